"""The loop's price at equal tokens by size (plots/loop_gap.py): each looped run paired with the r = 1 run of its
width and budget, the gap of their seed means against the same gap of the fitted law, and the figure drawn for a
single looped fit of a table that has the pair columns (not for a joint fit, not without width)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from loopscale.fit import synthetic as S
from loopscale.fit.fit_table import fit_table
from loopscale.fit.laws.registry import law_class
from loopscale.plots import registry
from loopscale.plots.loop_gap import loop_gaps


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
    assert gaps["gap"].to_numpy() == pytest.approx(gaps["gap_law"].to_numpy(), abs=2e-3)  # the law's own data


def test_the_figure_is_drawn_for_a_single_looped_fit_with_the_pair_columns_only(seeded):
    table, fit = seeded
    assert "loop_gap" in registry.figures(table, fit)
    assert loop_gaps(table.drop(columns="width"), fit) is None
    assert "loop_gap" not in registry.figures(table.drop(columns="width"), fit)
    assert loop_gaps(table[table["r"] > 1], fit) is None  # no r = 1 run to pair with
