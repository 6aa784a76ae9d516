"""The lr grid beside a sweep (issue 39 item 2, loopscale/launch/lr_grid.py): extra jobs at the smallest budget,
the middle width, every r, at the lr multipliers other than 1; the same jobs listed by `loopscale sweep` as
launched; run names tagged; its cost stated against the grid's."""

from __future__ import annotations

import pytest

from loopscale.config.naming import lr_tag
from loopscale.errors import ConfigError
from loopscale.launch.lr_grid import LrGrid, lr_grid_jobs
from loopscale.launch.sweep import expand, sweep_overrides
from support.cli import run_cli

DEMO = [
    [f"model.r={r}", f"point={p}"]
    for r in (1, 2)
    for p in ("C2.5e11_3.54e11-d16", "C2.5e11_3.54e11_5e11-d24", "C2.5e11_3.54e11_5e11-d32", "C3.54e11_5e11-d48")
]


def test_the_grid_varies_the_middle_width_at_the_smallest_budget_for_every_r():
    extra = lr_grid_jobs(DEMO, LrGrid())
    multipliers = LrGrid().multipliers()
    assert multipliers == pytest.approx([0.5, 2**-0.5, 1.0, 2**0.5, 2.0]) and multipliers[0] == 0.5
    assert len(extra) == 2 * 4  # 2 r x the 4 multipliers other than 1 (1 is the grid's own run)
    assert {tuple(j[:2]) for j in extra} == {("model.r=1", "point=C2.5e11-d24"), ("model.r=2", "point=C2.5e11-d24")}
    assert sorted({j[2] for j in extra}) == sorted(f"optim.lr_scale={m!r}" for m in multipliers if m != 1.0)
    assert {j[1] for j in lr_grid_jobs(DEMO, LrGrid(points=3, step=2.0, width=32))} == {"point=C2.5e11-d32"}


def test_bad_grids_are_refused():
    with pytest.raises(ConfigError, match="odd integer"):
        LrGrid(points=4)
    with pytest.raises(ConfigError, match="must be > 1"):
        LrGrid(step=0.5)
    with pytest.raises(ConfigError, match="lr_grid.width=40 is not at the smallest budget"):
        lr_grid_jobs(DEMO, LrGrid(width=40))
    with pytest.raises(ConfigError, match="needs a sweep over `point`"):
        lr_grid_jobs([["model.r=1"]], LrGrid())


def test_sweep_lists_the_grid_with_its_cost_and_tagged_run_names():
    base = sweep_overrides(["experiment=isodepth"])
    jobs = sweep_overrides(["experiment=isodepth", "hydra/sweeper=lr_grid"])
    assert [j[:2] for j in jobs[: len(base)]] == [j[:2] for j in base]  # the grid first, as launched
    assert len(jobs) == len(base) + 16  # then 4 r x 4 multipliers
    cfgs = [job.cfg for job in expand(["experiment=isodepth", "hydra/sweeper=lr_grid", "model.r=4"])]
    tagged = [c for c in cfgs if c.optim.lr_scale != 1.0]
    assert {c.run_name for c in tagged} == {f"baseline-r4-C4.64e17-s8-lrx{m}" for m in ("0.5", "0.707", "1.41", "2")}
    assert lr_tag(1.0) == "" and lr_tag(2**-0.5) == "-lrx0.707"
    res = run_cli(["sweep", "experiment=isodepth", "hydra/sweeper=lr_grid", "model.r=1,4", "--no-probe"])
    assert res.returncode == 0, res.stderr
    line = next(x for x in res.stdout.splitlines() if x.startswith("lr grid:"))
    assert "8 extra jobs at C = 4.64e+17" in line and "% of the grid's" in line
