"""loopscale/launch/design.py: a sweep's points with exact accounting (what `loopscale power` simulates) and the
designs beside it, written as overrides that the same expansion reads."""

from __future__ import annotations

import re

import pytest

from loopscale.errors import ConfigError
from loopscale.launch.design import (
    Point,
    candidate_designs,
    design_points,
    grid_points,
    looped_overrides,
    n_seeds,
    parse_point,
    with_budget,
    with_seeds,
    with_size,
)
from loopscale.model.accounting import tokens_for_budget

REDUCED = ["experiment=isodepth_cpu_demo", "model.r=1,2,4", "point=C6e10_8.5e10-d16,C6e10_8.5e10-d24"]


def test_the_reduced_demo_design_has_one_row_per_branch_with_exact_accounting():
    design = design_points(REDUCED)
    assert len(design) == 3 * 2 * 2  # r x widths x budgets
    # each parent job named by its r and width, and the tuned lr rule's multiplier it trains at (-lrt<x>)
    assert {re.sub(r"-lrt[0-9.]+$", "", p) for p in design["parent"]} == {
        f"baseline-r{r}-d{w}" for r in (1, 2, 4) for w in (16, 24)
    }
    assert all(re.search(r"-lrt[0-9.]+$", p) for p in design["parent"])
    assert sorted(set(design["C_budget"])) == [6e10, 8.5e10] and set(design["seed"]) == {0}
    for row in design.itertuples():  # each branch trains whole batches of 16 x 64 tokens to its budget
        assert row.D == tokens_for_budget(row.C_budget, row.F, 16 * 64)[0] and row.C == pytest.approx(row.D * row.F)
        assert row.N == row.N_once + row.N_rec and row.N_pass == 0
    three = design_points(with_seeds(REDUCED, 3))
    assert len(three) == 36 and n_seeds(with_seeds(REDUCED, 3)) == 3 and n_seeds(REDUCED) == 1
    assert three["parent"].nunique() == 18  # a seed is a different parent job


def test_points_of_both_forms_gain_a_budget_and_a_size_at_the_grids_own_step():
    forked = [parse_point("C6e10_8.5e10-d16"), parse_point("C6e10_8.5e10-d24")]
    assert forked[1] == Point((6e10, 8.5e10), "d24") and forked[1].label() == "C6e10_8.5e10-d24"
    assert [p.label() for p in with_budget(forked)] == ["C6e10_8.5e10_1.2e11-d16", "C6e10_8.5e10_1.2e11-d24"]
    assert [p.label() for p in with_size(forked)][-1] == "C6e10_8.5e10-d32"
    paper = [parse_point(p) for p in ("C1e18-s10", "C1e18-s12", "C2e18-s12", "C2e18-s14")]
    assert [p.label() for p in with_budget(paper)][4:] == ["C4e18-s12", "C4e18-s14", "C4e18-s16"]
    assert [p.label() for p in with_size(paper)][4:] == ["C1e18-s14", "C2e18-s16"]


def test_the_menu_is_overrides_the_expansion_reads():
    menu = dict(candidate_designs(REDUCED))
    assert list(menu) == ["as given", "2 seeds", "4 seeds", "+1 budget", "+1 size", "+1 budget, +1 size"]
    assert len(design_points(menu["+1 budget"])) == 18 and len(design_points(menu["+1 size"])) == 18
    assert len(design_points(menu["+1 budget, +1 size"])) == 27 and len(design_points(menu["4 seeds"])) == 48
    assert grid_points(menu["+1 size"])[-1] == Point((6e10, 8.5e10), "d32")
    looped = looped_overrides(REDUCED, [1, 2, 4], ["model.recipe=tbptt"])
    assert "model.r=2,4" in looped and "model.r=1,2,4" not in looped and looped[-1] == "model.recipe=tbptt"
    with pytest.raises(ConfigError, match="no `point` values"):
        grid_points(["model=tiny"])


def test_a_design_with_per_pass_adapters_lists_their_parameters_as_the_plan_counts_them():
    """lora's looped runs carry N_pass (the per-pass adapters) as `train.plan` counts it, the baseline's r = 1 runs
    none; without the column `loopscale power` drew lora designs as if the adapters were not there."""
    from loopscale.launch.sweep import expand
    from loopscale.train.job_plan import plan_job

    overrides = ["experiment=designs_cpu", "model.recipe=lora", "model.r=1,2", "point=C2.5e11_3.54e11-d16"]
    design = design_points(overrides)
    assert (design["N"] == design["N_once"] + design["N_pass"] + design["N_rec"]).all()
    looped = design[design["r"] == 2]
    assert set(looped["recipe"]) == {"lora"} and (design.loc[design["r"] == 1, "N_pass"] == 0).all()
    (job,) = [job for job in expand(overrides) if job.cfg.model.r == 2]
    assert set(looped["N_pass"]) == {plan_job(job.cfg).run.N_pass} and looped["N_pass"].iloc[0] > 0
