"""`loopscale fit` checks where it writes before it fits (never the input table, a figure format matplotlib
writes, no two groups or outputs onto one file, a link kept as a link), refuses rows without a group, and
warns about what it cannot trust in a table it fits (repeated rows, impossible magnitudes); tables in
JSON lines may not repeat a key. Each case through the command's own entry point, loopscale.cli.main, in this
process (support.cli.run_cli)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from support.cli import run_cli
from support.paths import FIXTURES

SMALL = FIXTURES / "looped_synthetic_small.csv"


def fit(*args, cwd):
    return run_cli(["fit", *map(str, args)], cwd=cwd)


def _copy(tmp_path, name="runs.csv"):
    path = tmp_path / name
    path.write_bytes(SMALL.read_bytes())
    return path


def test_out_may_not_be_the_input_table(tmp_path):
    table = _copy(tmp_path)
    before = table.read_bytes()
    (tmp_path / "link.json").symlink_to(table)
    for out in (table, tmp_path / "link.json", tmp_path / "." / "runs.csv"):
        res = fit(table, "--no-profile", "--out", out, cwd=tmp_path)
        assert res.returncode == 2 and "is the input table" in res.stderr, res.stderr
        assert table.read_bytes() == before
    res = fit(table, "--no-profile", "--out", tmp_path / "f.png", "--plot", tmp_path / "f.png", cwd=tmp_path)
    assert res.returncode == 2 and "both write" in res.stderr


def test_a_plot_format_matplotlib_cannot_write_fails_before_the_fit(tmp_path):
    table = _copy(tmp_path)
    res = fit(table, "--bootstrap", "200", "--out", tmp_path / "fit.json", "--plot", tmp_path / "fig.csv", cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "not a figure format" in res.stderr, res.stderr
    assert not (tmp_path / "fit.json").exists() and not (tmp_path / "fig.csv").exists()
    assert "objective" not in res.stdout  # nothing was fitted


def test_plot_writes_png_and_pdf_at_the_dpi_asked(tmp_path):
    """Issue 41 (16): `--plot fig.png` writes fig.png and fig.pdf, the PNG at --dpi; a --dpi outside 10-1000 is
    refused before the fit, as `plot` and `report` refuse it."""
    from PIL import Image

    table = _copy(tmp_path)
    sizes = {}
    for dpi in (50, 100):
        png = tmp_path / f"fig{dpi}.png"
        res = fit(table, "--no-profile", "--plot", png, "--dpi", dpi, cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        assert png.read_bytes().startswith(b"\x89PNG") and png.with_suffix(".pdf").read_bytes().startswith(b"%PDF")
        assert f"wrote {png} and {png.with_suffix('.pdf')}" in res.stdout
        sizes[dpi] = Image.open(png).size
    assert sizes[100] == (2 * sizes[50][0], 2 * sizes[50][1])  # pixels scale with the dpi asked
    res = fit(
        table, "--no-profile", "--out", tmp_path / "f.json", "--plot", tmp_path / "x.png", "--dpi", 5, cwd=tmp_path
    )
    assert (
        res.returncode == 2 and res.stderr.strip() == "loopscale fit: error: --dpi must be between 10 and 1000; got 5"
    )
    assert not (tmp_path / "f.json").exists() and not (tmp_path / "x.png").exists()


def test_out_through_a_symlink_writes_its_target_and_keeps_the_link(tmp_path):
    table = _copy(tmp_path)
    (tmp_path / "fits").mkdir()
    link = tmp_path / "latest.json"
    link.symlink_to(tmp_path / "fits" / "real.json")
    res = fit(table, "--no-profile", "--out", link, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert link.is_symlink() and json.loads((tmp_path / "fits" / "real.json").read_text())["law"] == "looped"


def test_group_values_that_name_one_file_are_refused_before_the_fit(tmp_path):
    raw = pd.read_csv(SMALL)
    raw["recipe"] = np.where((np.arange(len(raw)) // 4) % 2 == 0, "a/b", "a_b")  # every r in both groups
    raw.to_csv(tmp_path / "t.csv", index=False)
    res = fit(tmp_path / "t.csv", "--no-profile", "--group", "recipe", "--out", tmp_path / "f.json", cwd=tmp_path)
    assert res.returncode == 2 and "would both write" in res.stderr and "f.a_b.json" in res.stderr, res.stderr
    assert list(tmp_path.glob("f.*")) == []


def test_a_row_without_a_group_value_is_one_line(tmp_path):
    raw = pd.read_csv(SMALL)
    raw["recipe"] = ["baseline"] * (len(raw) - 1) + [None]
    raw.to_csv(tmp_path / "t.csv", index=False)
    res = fit(tmp_path / "t.csv", "--no-profile", "--group", "recipe", cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "is empty in rows [55]" in res.stderr, res.stderr


def test_repeated_rows_and_impossible_values_are_warned_about(tmp_path):
    raw = pd.read_csv(SMALL)
    pd.concat([raw, raw.iloc[:3]]).to_csv(tmp_path / "dup.csv", index=False)
    res = fit(tmp_path / "dup.csv", "--no-profile", "--out", tmp_path / "dup.json", cwd=tmp_path)
    assert res.returncode == 0 and "3 rows repeat another row's" in res.stdout, res.stdout[-2000:]
    assert any("repeat" in w for w in json.loads((tmp_path / "dup.json").read_text())["warnings"])
    for col, value in (("L", 1e300), ("N_once", 1e308)):
        bad = raw.astype({col: float})
        bad.loc[0, col] = value
        bad.to_csv(tmp_path / "big.csv", index=False)
        res = fit(tmp_path / "big.csv", "--no-profile", cwd=tmp_path)
        assert f"column {col} reaches" in res.stdout and "Traceback" not in res.stderr, res.stdout + res.stderr


def test_chinchilla_with_n_col_naming_another_canonical_column(tmp_path):
    raw = pd.read_csv(SMALL)[["N_once", "D", "L"]]  # N_once holds the model size here
    raw.to_csv(tmp_path / "t.csv", index=False)
    res = fit(tmp_path / "t.csv", "--law", "chinchilla", "--n-col", "N_once", cwd=tmp_path)
    assert res.returncode == 0, res.stderr


def test_jsonl_with_a_repeated_key_is_refused(tmp_path):
    rows = pd.read_csv(SMALL).to_dict("records")
    lines = [json.dumps(r) for r in rows]
    lines[4] = lines[4][:-1] + ', "L": 9.0}'  # a second L in one object: which one is the loss?
    (tmp_path / "t.jsonl").write_text("\n".join(lines) + "\n")
    res = fit(tmp_path / "t.jsonl", "--no-profile", cwd=tmp_path)
    assert res.returncode == 2 and "line 5" in res.stderr and "'L'" in res.stderr, res.stderr
