"""The loop's price by size (plots/loop_gap.py): each looped run paired with the r = 1 run of its width and budget,
the gap of their seed means against the same gap of the fitted law, the tokens each pair trains, and the figure drawn
for a looped fit of a table that has the pair columns (a joint fit: a panel per recipe against the shared r = 1 runs,
each at its own phi; not without width)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from loopscale.fit import synthetic as S
from loopscale.fit.fit_table import fit_table
from loopscale.fit.joint import fit_joint, joint_table
from loopscale.fit.laws.registry import law_class
from loopscale.plots import registry
from loopscale.plots.loop_gap import loop_gap, loop_gaps, recipe_gaps
from loopscale.plots.views import recipe_fit


@pytest.fixture(scope="module")
def seeded() -> tuple[pd.DataFrame, object]:
    """The demo's grid drawn from the looped law, two seeds a point (L times exp(+-0.003)), and its looped fit."""
    grid = S.demo_grid()
    clean = law_class("looped").predict_table({**S.DEMO_DENSE, "phi": S.DEMO_PHI}, grid)
    table = pd.concat(
        [grid.assign(L=clean * np.exp(s * 0.003), seed=k) for k, s in enumerate((1.0, -1.0))], ignore_index=True
    )
    with np.errstate(all="ignore"):
        fit = fit_table(table, "looped", profile=False)
    return table, fit


def test_each_looped_point_is_paired_with_the_r1_run_of_its_width_and_budget(seeded):
    table, fit = seeded
    gaps = loop_gaps(table, fit)
    assert len(gaps) == int(((table["r"] > 1) & (table["seed"] == 0)).sum())  # every looped point has its pair
    law = law_class("looped")
    for row in gaps.itertuples():
        same = table[(table["width"] == row.width) & (table["C_budget"] == row.C_budget)]
        looped, plain = same[same["r"] == row.r], same[same["r"] == 1]
        assert row.gap == pytest.approx(looped["L"].mean() - plain["L"].mean(), abs=1e-12)  # the seeds average out
        hat = law.predict_table(fit.params, same)
        assert row.gap_law == pytest.approx(hat[same["r"] == row.r].mean() - hat[same["r"] == 1].mean(), abs=1e-12)
        assert row.N_c == pytest.approx((looped["N_once"] + row.r * looped["N_rec"]).mean())
        assert row.tokens_ratio == pytest.approx(looped["D"].mean() / plain["D"].mean(), rel=1e-12)
    assert gaps["gap"].to_numpy() == pytest.approx(gaps["gap_law"].to_numpy(), abs=2e-3)  # the law's own data


def test_the_figure_is_drawn_for_a_single_looped_fit_with_the_pair_columns_only(seeded):
    table, fit = seeded
    assert "loop_gap" in registry.figures(table, fit)
    assert loop_gaps(table.drop(columns="width"), fit) is None
    assert "loop_gap" not in registry.figures(table.drop(columns="width"), fit)
    assert loop_gaps(table[table["r"] > 1], fit) is None  # no r = 1 run to pair with


def test_a_joint_fit_gets_a_panel_per_recipe_each_against_the_shared_r1_runs_at_its_own_phi(seeded):
    """A probe recipe whose looped runs follow a higher phi (0.95 against 0.75): its gaps pair its own looped runs
    with the shared r = 1 runs, its law gap is the joint law's at its own phi (smaller than the baseline's at every
    looped point), and the figure has a panel per recipe."""
    table, _ = seeded
    probe = table[table["r"] > 1].copy()
    probe["L"] = law_class("looped").predict_table({**S.DEMO_DENSE, "phi": 0.95}, probe) * np.exp(
        np.where(probe["seed"] == 0, 0.003, -0.003)
    )
    both, recipes = joint_table([pd.concat([table, probe.assign(recipe="probe")], ignore_index=True)], "recipe")
    with np.errstate(all="ignore"):
        fit = fit_joint(both, "recipe", recipes, separate=False, profile=False)
    parts = dict(recipe_gaps(both, fit))
    assert list(parts) == ["baseline", "probe"]
    for recipe, gaps in parts.items():
        alone = loop_gaps(both, recipe_fit(fit, recipe))  # the recipe's looped runs and the shared r = 1 runs
        pd.testing.assert_frame_equal(gaps, alone)
        assert len(gaps) == int(((table["r"] > 1) & (table["seed"] == 0)).sum())
        assert gaps["gap"].to_numpy() == pytest.approx(gaps["gap_law"].to_numpy(), abs=2e-3)
    base, other = (parts[g].set_index(["r", "width", "C_budget"]) for g in ("baseline", "probe"))
    assert (other["gap_law"] < base["gap_law"] - 5e-3).all()  # a higher phi: a smaller price at every point
    fig = loop_gap(both, fit)
    assert [ax.get_title().split("\n")[0] for ax in fig.axes if ax.get_title()] == ["baseline", "probe"]
    assert "loop_gap" in registry.figures(both, fit)
