"""Issue 57, items 2 and 3: `validate` and `report` check what they are given. No output of validate (or report,
plot, advise, notebook: atomic.check_outputs_apart) may be one of its inputs; validate refuses a table whose
content is not the fit's (the sha256 the fit recorded) unless --allow-changed-table, and then says so and names
the table it validated; report refuses a validation record of another fit unless --allow-other-fit."""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest

from support.cli import run_cli
from support.paths import FIXTURES

SMALL = FIXTURES / "looped_synthetic_small.csv"


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """(folder, its runs.csv, the fit of it)."""
    d = tmp_path_factory.mktemp("fitted")
    table, fit = d / "runs.csv", d / "fit.json"
    table.write_bytes(SMALL.read_bytes())
    assert run_cli(["fit", str(table), "--no-profile", "--out", str(fit)]).returncode == 0
    return d, table, fit


def _one_line(res, says: str) -> str:
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert says in line, line
    return line


def test_validate_refuses_to_write_over_the_fit_it_reads(fitted, tmp_path):
    d, _, fit = fitted
    before = fit.read_bytes()
    _one_line(run_cli(["validate", str(fit), "--out", str(fit)]), f"--out {fit} is the fit {fit}")
    link = tmp_path / "link.json"
    os.link(fit, link)  # another name of the same file
    _one_line(run_cli(["validate", str(fit), "--out", str(link)]), "is the fit")
    assert fit.read_bytes() == before and not fit.with_suffix(".md").exists()


def test_report_and_plot_refuse_to_write_over_their_inputs(fitted, tmp_path):
    d, table, fit = fitted
    before = table.read_bytes()
    _one_line(run_cli(["report", str(table), "--fit", str(fit), "--out", str(table)]), "is the input table")
    figures = tmp_path / "figures"
    figures.mkdir()
    planted = figures / "iso_flop.png"  # a table that happens to sit where a figure would go
    planted.write_bytes(before)
    res = run_cli(["plot", str(planted), str(fit), "--out", str(figures)])
    _one_line(res, f"a figure {planted} is the input table {planted}")
    _one_line(run_cli(["advise", str(fit), "--compute", "1e18", "--json", str(fit)]), f"--json {fit} is the fit")
    assert table.read_bytes() == before == planted.read_bytes()


def test_validate_refuses_a_table_changed_since_the_fit_and_says_when_allowed(fitted, tmp_path):
    d, table, fit = fitted
    edited = pd.read_csv(table)
    edited.loc[edited["r"] == 8, "L"] *= 1.03  # 3% on the r = 8 losses
    changed = tmp_path / "runs.csv"
    edited.to_csv(changed, index=False)
    line = _one_line(run_cli(["validate", str(fit), str(changed)]), "its rows changed since the fit")
    assert str(table) in line and str(changed) in line and "--allow-changed-table" in line
    out = tmp_path / "v.json"
    args = ["validate", str(fit), str(changed), "--allow-changed-table", "--no-conventions", "--jobs", "1"]
    res = run_cli([*args, "--out", str(out)])
    assert res.returncode == 0, res.stderr
    assert "**Changed table:**" in res.stdout and f"validated on {changed}" in res.stdout
    record = json.loads(out.read_text())
    assert record["table_check"]["changed"] and record["table_check"]["allowed"]
    assert f"validated on {changed}" in out.with_suffix(".md").read_text()
    # the fit's own table, moved elsewhere, is still its table (by content)
    moved = tmp_path / "moved.csv"
    moved.write_bytes(table.read_bytes())
    res = run_cli(["validate", str(fit), str(moved), "--no-conventions", "--jobs", "1"])
    assert res.returncode == 0 and "Changed table" not in res.stdout, res.stderr


def test_report_refuses_the_validation_record_of_another_fit(fitted, tmp_path):
    d, table, fit = fitted
    out = tmp_path / "v.json"
    assert run_cli(["validate", str(fit), "--no-conventions", "--jobs", "1", "--out", str(out)]).returncode == 0
    other = tmp_path / "other.json"
    assert run_cli(["fit", str(table), "--no-profile", "--drop-top-k", "2", "--out", str(other)]).returncode == 0
    report = tmp_path / "report.md"
    args = ["report", str(table), "--fit", str(other), "--validation", str(out), "--out", str(report)]
    _one_line(run_cli(args), f"--validation {out} validates another fit ({fit} looped law")
    assert not report.exists()
    res = run_cli([*args, "--allow-other-fit"])
    assert res.returncode == 0 and "shown by --allow-other-fit" in res.stderr, res.stderr
    assert "shown by --allow-other-fit" in report.read_text()
    res = run_cli(["report", str(table), "--fit", str(fit), "--validation", str(out), "--out", str(report)])
    assert res.returncode == 0 and "another fit" not in res.stderr + report.read_text()


def _fit_with(fit, tmp_path, **changes):
    record = json.loads(fit.read_text())
    for key, value in changes.items():
        if key.startswith("param_"):
            name = key.removeprefix("param_")
            if value is _MISSING:
                record["params"].pop(name)
            else:
                record["params"][name] = value
        else:
            record[key] = value
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(record))
    return path


_MISSING = object()


@pytest.mark.parametrize(
    "changes, says",
    [
        ({"group": "recipe"}, "group must be"),
        ({"seed": "abc"}, "seed must be"),
        ({"profile_phi": "bad"}, "profile_phi must be"),
        ({"profile_phi": {"interval": [0.6, 0.4]}}, "reversed"),
        ({"profile_phi": {"interval": ["a", 0.4]}}, "profile_phi"),
        ({"param_phi": "abc"}, "phi='abc' is not a finite number"),
        ({"param_phi": None}, "phi=None is not a finite number"),
        ({"param_phi": _MISSING}, "lacks phi"),
        ({"ci95": {"phi": [0.5, 0.4]}}, "reversed"),
    ],
)
def test_a_malformed_fit_record_is_one_line(fitted, tmp_path, changes, says):
    _, _, fit = fitted
    _one_line(run_cli(["validate", str(_fit_with(fit, tmp_path, **changes))]), says)


@pytest.mark.parametrize("value", ["abc", "-5", "nan", "0", "inf"])
def test_a_column_value_that_is_no_count_is_one_line(fitted, value):
    _, _, fit = fitted
    line = _one_line(run_cli(["validate", str(fit), "--column", f"seq_len={value}"]), "--column seq_len=")
    assert "a whole number > 0" in line


@pytest.mark.parametrize("value", ["inf", "0", "-1", "abc"])
def test_an_lr_scale_that_is_no_multiplier_is_one_line(fitted, tmp_path, value):
    _, table, fit = fitted
    raw = pd.read_csv(table).astype({"L": float})
    raw["lr_scale"] = [value] + [""] * (len(raw) - 1)
    given = tmp_path / "lr.csv"
    raw.to_csv(given, index=False)
    _one_line(run_cli(["validate", str(fit), str(given), "--allow-changed-table"]), "lr_scale")


def test_seed_repeats_and_copies_count_as_points_not_rows(fitted, tmp_path):
    """Issue 57: on a table with seed repeats validate refitted the rows as independent (AICc -11.4 became
    -40.5 with three near-identical seeds); it validates the points (each point's seeds averaged in log L) and
    warns of duplicated rows as `fit` does."""
    _, table, _ = fitted
    raw = pd.read_csv(table)
    rng = np.random.default_rng(0)
    seeds = pd.concat([raw.assign(seed=s, L=raw["L"] * (1 + 1e-4 * rng.standard_normal(len(raw)))) for s in range(3)])
    seeds = pd.concat([seeds, seeds.head(10)], ignore_index=True)  # ten rows copied
    csv, fit = tmp_path / "seeds.csv", tmp_path / "fit.json"
    seeds.to_csv(csv, index=False)
    assert run_cli(["fit", str(csv), "--no-profile", "--out", str(fit)]).returncode == 0
    out = tmp_path / "v.json"
    res = run_cli(["validate", str(fit), "--no-conventions", "--jobs", "1", "--out", str(out)])
    assert res.returncode == 0, res.stderr
    assert "10 rows repeat another row's" in res.stderr  # the copies, said as `fit` says them
    record = json.loads(out.read_text())
    assert record["n_rows"] == len(raw) and record["seed_repeats"]["n_rows"] == len(seeds)
    assert f"seed repeats: {len(seeds)} rows averaged into {len(raw)} points" in res.stdout


def test_the_fits_table_may_come_in_any_place_among_the_tables_given(fitted, tmp_path):
    """validate: one of the tables given must be the fit's (by content); others beside it (an lr grid's runs) add
    rows, whichever order they are given in; none of them the fit's is a changed table, and a fit that records no
    hash cannot say (None)."""
    from loopscale.fit.result import load_fit
    from loopscale.fit.validation.inputs import table_check

    _, table, fit_path = fitted
    fit = load_fit(fit_path)
    grid = tmp_path / "lr_grid.csv"
    pd.read_csv(table).head(5).assign(lr_scale=2.0).to_csv(grid, index=False)
    assert table_check(fit, [table, grid])["changed"] is False
    assert table_check(fit, [grid, table])["changed"] is False
    assert table_check(fit, [grid])["changed"] is True
    fit.input = {k: v for k, v in fit.input.items() if k != "sha256"}
    assert table_check(fit, [grid])["changed"] is None
