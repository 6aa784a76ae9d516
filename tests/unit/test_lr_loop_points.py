"""Runs of one point of the law at two lr_loop (the loop's own lr, which the law does not see) are no seeds of that
point: a table with a loop-lr grid (`tune --axis loop`'s runs, a sweep over optim.lr_loop) is refused where it is
read to fit (loopscale/fit/points.py `check_one_lr_loop`, called by runs_table.canonical_table), naming the point
and its settings; a tuned loop rule's lr_loop, one per r and width, fits as before, and `fit --group lr_loop`
fits each setting alone (collect writes lr_loop empty at 1: read as 1)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from loopscale.errors import InputError
from loopscale.fit.points import check_one_lr_loop
from support.cli import run_cli
from support.paths import FIXTURES

SMALL = FIXTURES / "looped_synthetic_small.csv"


def _point_rows(lr_loop, seed=(0, 1, 0, 1, 2)):
    """Two points of r = 2 (D 1e9 and 2e9, the second twice) and one of r = 1 (two recipes: one dense point)."""
    return pd.DataFrame(
        {"r": [2, 2, 2, 1, 1], "N_once": 1e6, "N_rec": [2e6, 2e6, 2e6, 3e6, 3e6], "D": [1e9, 2e9, 2e9, 1e9, 1e9],
         "recipe": ["baseline", "baseline", "baseline", "baseline", "lora"], "seed": list(seed), "lr_loop": lr_loop}
    )  # fmt: skip


def test_a_point_at_two_lr_loop_is_named_with_its_settings_and_one_a_point_passes():
    check_one_lr_loop(_point_rows([0.25, 0.5, 0.5, 2.0, 2.0]))  # a tuned rule: per r and width, one per point
    check_one_lr_loop(_point_rows([0.25, np.nan, 1.0, 2.0, 2.0]))  # empty is 1 (collect writes 1 as empty)
    check_one_lr_loop(_point_rows([0.25, " ", 1.0, 2.0, 2.0]))  # blank, as a JSON table may hold it
    check_one_lr_loop(_point_rows([0.25, 0.1 + 0.2, 0.3, 2.0, 2.0]))  # one setting written twice (float noise)
    check_one_lr_loop(_point_rows([0.25, 0.5, 0.5, 2.0, 2.0]).drop(columns="lr_loop"))  # tables before lr_loop
    with pytest.raises(
        InputError,
        match=r"rows \[1, 2\] are one point of the law \(r = 2, N_once = 1e\+06, N_rec = "
        r"2e\+06, D = 2e\+09, recipe baseline\) trained at lr_loop \[0.5, 1.0\] \(1 such point",
    ):
        check_one_lr_loop(_point_rows([0.25, 0.5, np.nan, 2.0, 2.0]))
    with pytest.raises(InputError, match=r"rows \[3, 4\] .*recipe baseline, lora\) trained at lr_loop \[1.0, 2.0\]"):
        check_one_lr_loop(_point_rows([0.25, 0.5, 0.5, 2.0, 1.0]))  # r = 1: one dense point whatever the recipe
    with pytest.raises(InputError, match=r"\(2 such point\(s\)\).*fit --group lr_loop"):
        check_one_lr_loop(_point_rows([0.25, 0.5, 0.25, 2.0, 1.0]))
    with pytest.raises(InputError, match="column lr_loop has 'x' \\(row 0\\): the loop's lr is a number > 0"):
        check_one_lr_loop(_point_rows(["x", 0.5, 0.5, 2.0, 2.0]))
    for value in (0.0, -0.5, np.inf):  # no lr at all, or none a loop could train at (review)
        with pytest.raises(InputError, match=r"column lr_loop has .* \(row 1\): the loop's lr is a number > 0"):
            check_one_lr_loop(_point_rows([0.25, value, value, 2.0, 2.0]))


@pytest.fixture(scope="module")
def loop_grid(tmp_path_factory):
    """(folder, the small synthetic table with every point also trained at lr_loop 0.5, its loss 1% higher)."""
    d = tmp_path_factory.mktemp("loop_grid")
    raw = pd.read_csv(SMALL)
    grid = pd.concat([raw.assign(lr_loop=np.nan), raw.assign(lr_loop=0.5, L=raw["L"] * 1.01)], ignore_index=True)
    grid.to_csv(d / "grid.csv", index=False)
    return d, raw, d / "grid.csv"


def _one_line(res, *says: str) -> str:
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    (line,) = res.stderr.strip().splitlines()
    for text in says:
        assert text in line, line
    return line


def test_fit_validate_and_power_refuse_a_loop_lr_grid_and_fit_group_lr_loop_fits_each_setting(loop_grid):
    d, raw, grid = loop_grid
    said = ("rows [0, 56] are one point of the law (r = 1, N_once = 7.082e+06", "trained at lr_loop [0.5, 1.0]")
    _one_line(run_cli(["fit", str(grid), "--no-profile"]), *said, f"({len(raw)} such point(s))", "--group lr_loop")

    res = run_cli(["fit", str(grid), "--no-profile", "--group", "lr_loop", "--out", str(d / "fit.json")])
    assert res.returncode == 0, res.stderr
    one = d / "one.json"
    assert run_cli(["fit", str(SMALL), "--no-profile", "--out", str(one)]).returncode == 0
    records = {json.loads(p.read_text())["group"]["value"]: json.loads(p.read_text()) for p in d.glob("fit.*.json")}
    assert sorted(records) == [0.5, 1.0] and {r["input"]["n_rows_used"] for r in records.values()} == {len(raw)}
    # the lr_loop = 1 group is the table without the grid: the same fit
    assert records[1.0]["params"]["phi"] == pytest.approx(json.loads(one.read_text())["params"]["phi"], rel=1e-6)

    _one_line(run_cli(["validate", str(one), str(grid), "--allow-changed-table", "--jobs", "1"]), *said)
    _one_line(run_cli(["power", "--fit", str(one), "--table", str(grid), "--sims", "20", "--no-menu"]), *said)
    # a group's fit validates on its own setting's rows of the table it was made from (empty read as 1)
    res = run_cli(["validate", str(d / "fit.1.0.json"), "--no-conventions", "--jobs", "1", "--out", str(d / "v.json")])
    assert res.returncode == 0, res.stderr
    assert json.loads((d / "v.json").read_text())["n_rows"] == len(raw)
