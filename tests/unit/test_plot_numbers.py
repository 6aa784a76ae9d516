"""The numbers a figure draws, pinned to the law written out here in numpy (issue 58): the iso-FLOP panels' budget
bins (loopscale/plots/isoflop.py), the law along a binned iso-FLOP line, the collapse coordinates and their spread
(plots/curves.py), the residuals and the table fill-ins (plots/inputs.py), which rows a joint fit's views hold
(plots/views.py) and the axis numbers' text (plots/labels.py). The law: L = E + A (N_once + r^phi N_rec)^-alpha
+ B D^-beta (docs/design.md); C = 6 (N_once + r N_rec) D."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from loopscale.fit.result import load_fit
from loopscale.plots.curves import collapse_coordinates, collapse_spread, law_line
from loopscale.plots.inputs import as_looped_table, log_residuals, rows_for_fit
from loopscale.plots.isoflop import budget_panels
from loopscale.plots.labels import phi_text, sci
from loopscale.plots.views import DENSE, views
from support.paths import FIXTURES

FIXTURE = FIXTURES / "plots"


def looped_law(p: dict, N_once, N_rec, r, D, phi=None):
    """docs/design.md's looped law, written out."""
    phi = p["phi"] if phi is None else phi
    n_eff = np.asarray(N_once, float) + np.asarray(r, float) ** phi * np.asarray(N_rec, float)
    return p["E"] + p["A"] * n_eff ** -p["alpha"] + p["B"] * np.asarray(D, float) ** -p["beta"]


def test_budgets_get_a_panel_each_up_to_the_limit_then_equal_log_width_bins():
    assert budget_panels([3e17, 1e17, 3e17, 2e17], max_panels=3) == [(1e17, 1e17), (2e17, 2e17), (3e17, 3e17)]
    # as many budgets as panels: one each, even where a log bin would hold two of them
    assert budget_panels([1.0, 1.1, 100.0], max_panels=3) == [(1.0, 1.0), (1.1, 1.1), (100.0, 100.0)]
    assert budget_panels([1.0, 1.1, 100.0, 50.0], max_panels=3) == [(1.0, 1.1), (50.0, 100.0)]
    # 7 budgets in 3 bins of equal width in log C over [1, 1000]: edges 1, 10, 100, 1000 (a budget on an edge
    # opens the next bin; the largest closes the last)
    C = [1, 5, 10, 50, 200, 999, 1000]
    assert budget_panels(C, max_panels=3) == [(1, 5), (10, 50), (200, 1000)]
    assert budget_panels([1, 2, 3, 1000], max_panels=3) == [(1, 3), (1000, 1000)]  # the empty middle bin dropped


def test_sci_writes_m_times_ten_to_the_k_at_the_asked_digits():
    assert sci(4.64e17) == r"$4.64\times10^{17}$"
    assert sci(4.6449e17) == r"$4.64\times10^{17}$"
    assert sci(2.5e11, 2) == r"$2.5\times10^{11}$"
    assert sci(1e18) == r"$10^{18}$"  # a mantissa of 1 is left out
    assert sci(1.999e-3, 2) == r"$2\times10^{-3}$"  # rounded to 2.0, trailing zero dropped
    assert sci(123456, 2) == r"$1.2\times10^{5}$"
    assert sci(0) == "$0$"
    assert phi_text(0.12345) == r"$\hat{\phi} = 0.123$" and phi_text(0.5, r"\phi") == r"$\phi = 0.500$"


@pytest.fixture(scope="module")
def fit():
    return load_fit(FIXTURE / "fit.baseline.json")


@pytest.fixture(scope="module")
def rows(fit):
    table = as_looped_table(pd.read_csv(FIXTURE / "runs.csv"))
    return rows_for_fit(table, fit)


def test_the_residuals_are_log_observed_minus_log_the_law(rows, fit):
    expected = np.log(rows["L"]) - np.log(looped_law(fit.params, rows["N_once"], rows["N_rec"], rows["r"], rows["D"]))
    assert log_residuals(rows, fit) == pytest.approx(expected.to_numpy(), rel=1e-12, abs=1e-14)


def test_the_collapse_removes_the_data_term_and_measures_the_relative_distance_from_the_size_curve(rows, fit):
    p, phi = fit.params, 0.8  # off the fitted phi, so r^phi is not the fit's
    x, y = collapse_coordinates(rows, fit, phi)
    n_eff = rows["N_once"] + rows["r"] ** phi * rows["N_rec"]
    data_term = p["B"] * rows["D"] ** -p["beta"]
    assert x == pytest.approx(n_eff.to_numpy(), rel=1e-12)
    assert y == pytest.approx((rows["L"] - data_term).to_numpy(), rel=1e-12)
    curve = p["E"] + p["A"] * n_eff ** -p["alpha"]
    spread = np.sqrt(np.mean(((rows["L"] - data_term - curve) / curve) ** 2))
    assert collapse_spread(rows, fit, phi) == pytest.approx(spread, rel=1e-12)


def test_a_binned_iso_flop_line_is_the_law_at_exactly_the_bins_budget(rows, fit):
    """plots/curves.law_line: given C, D = C / F with F = C / D of the runs: at a run's N the law at (its sizes,
    C x its D / its C)."""
    group = rows[(rows["r"] == 4) & (rows["C_budget"] == rows["C_budget"].min())].sort_values("N")
    budget = 3.3e17
    x, y = law_line(group, fit, n_points=7, C=budget)
    first, last = group.iloc[0], group.iloc[-1]
    at = [looped_law(fit.params, g["N_once"], g["N_rec"], 4, budget * g["D"] / g["C"]) for g in (first, last)]
    assert (x[0], x[-1]) == pytest.approx((first["N"], last["N"]), rel=1e-12)
    assert (y[0], y[-1]) == pytest.approx(at, rel=1e-12)
    # N is spaced evenly in log N: the middle point is the geometric mean of the ends
    assert x[3] == pytest.approx(np.sqrt(first["N"] * last["N"]), rel=1e-12)


def test_a_plain_table_is_a_looped_one_at_r_1_with_d_from_c_over_6n():
    plain = pd.DataFrame({"N": [1e6, 3e6], "C": [6e15, 3.6e16], "L": [3.1, 2.9]})
    t = as_looped_table(plain)
    assert t["N_once"].tolist() == [1e6, 3e6] and t["N_rec"].tolist() == [0.0, 0.0] and t["r"].tolist() == [1, 1]
    assert t["D"].tolist() == pytest.approx([1e9, 2e9])  # C / (6 N)
    looped = pd.DataFrame({"N_once": [1e6], "N_rec": [2e6], "r": [4], "C": [5.4e16], "L": [3.0]})
    assert as_looped_table(looped)["D"].tolist() == pytest.approx([1e9])  # C / (6 (N_once + r N_rec)): 9e6 per token
    assert as_looped_table(looped)["N"].tolist() == [3e6]  # the unique parameters, not r-weighted
    with_d = pd.DataFrame({"N_once": [1e6], "N_rec": [2e6], "r": [4], "D": [2e9], "L": [3.0]})
    assert as_looped_table(with_d)["C"].tolist() == pytest.approx([6 * 9e6 * 2e9])


def test_a_joint_fits_views_split_the_shared_dense_runs_from_each_recipes_looped_runs():
    joint = load_fit(FIXTURE / "fit.joint.json")
    table = as_looped_table(pd.read_csv(FIXTURE / "runs.csv"))
    vs = {v.label: v for v in views(table, joint)}
    assert list(vs) == [DENSE, "baseline", "tbptt", "hyper"]
    assert set(vs[DENSE].rows["r"]) == {1} and len(vs[DENSE].rows) == int((table["r"] == 1).sum())
    for recipe in ("baseline", "tbptt", "hyper"):
        v = vs[recipe]
        assert set(v.rows["recipe"]) == {recipe} and (v.rows["r"] > 1).all()
        assert len(v.rows) == int(((table["recipe"] == recipe) & (table["r"] > 1)).sum())
        assert v.fit.params["phi"] == joint.params[f"phi[{recipe}]"]  # each recipe at its own phi
        assert v.fit.params["E"] == joint.params["E"]
    assert vs[DENSE].fit.params["phi"] == joint.params["phi[baseline]"]  # the reference recipe's


def test_a_joint_recipes_rows_are_its_own_and_the_shared_r1_runs():
    from loopscale.plots.views import recipe_fit

    joint = load_fit(FIXTURE / "fit.joint.json")
    table = as_looped_table(pd.read_csv(FIXTURE / "runs.csv"))
    rows = rows_for_fit(table, recipe_fit(joint, "tbptt"))
    expected = (table["recipe"] == "tbptt") | (table["r"] == 1)
    assert len(rows) == int(expected.sum()) and set(rows["recipe"]) == set(table[expected]["recipe"])
