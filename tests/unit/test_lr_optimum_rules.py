"""The lr optimum's rules off the symmetric grid, by hand (issue 58; loopscale/fit/lr_optimum.py): L at the vertex
clipped to the grid, which side a grid must grow to, the window of an even count, the width transfer's use rule
(|gamma| >= 2 se), its intervals at the reference width on the pooled noise's t, its chi-square p, and the
combined optimum's interval and Cochran's Q."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import loopscale.fit.lr_optimum as lr_optimum

H = math.log(2**0.5)
X5 = H * np.arange(-2, 3)


def test_beyond_the_grid_the_best_loss_is_the_parabola_at_the_grids_end_and_the_side_says_where_to_grow():
    c0, c1, c2 = 3.0, 0.06, 0.05  # vertex at -0.6, inside the grid (ln 0.5 = -0.69), but the lowest loss is at 0.5
    fit = lr_optimum.parabola_optimum(X5, c0 + c1 * X5 + c2 * X5**2, sigma=0.001)
    assert fit.best == pytest.approx(math.exp(-0.6), rel=1e-9) and (fit.side, fit.at_edge) == (-1, False)
    below = 3.0 + 0.05 * (X5 + 3 * H) ** 2  # vertex at ln(0.35), below the grid
    out = lr_optimum.parabola_optimum(X5, below, sigma=0.001)
    lo = X5.min()
    assert out.at_edge and out.side == -1
    assert out.L_best == pytest.approx(3.0 + 0.05 * (lo + 3 * H) ** 2, rel=1e-12)  # at the grid's end, not the vertex
    assert out.best == pytest.approx(math.exp(-3 * H), rel=1e-9)
    at_top = lr_optimum.parabola_optimum(
        X5, 3.0 + 0.05 * (X5 - 1.9 * H) ** 2, sigma=0.001
    )  # vertex inside, lowest at the top lr
    assert not at_top.at_edge and at_top.side == 1


def test_the_window_of_an_even_count_and_ties():
    x = H * np.arange(8)
    L = 3.0 + 0.05 * (x - 5 * H) ** 2  # lowest at index 5
    assert lr_optimum.window(x, L, 4).tolist() == [3, 4, 5, 6]  # n // 2 = 2 below the lowest
    assert lr_optimum.window(x[::-1].copy(), L[::-1].copy(), 4).tolist() == [4, 3, 2, 1]  # by x, not position
    assert lr_optimum.window(x[:3], L[:3], 4).tolist() == [0, 1, 2]


def test_the_width_transfer_is_used_at_two_standard_errors_and_its_intervals_use_the_pooled_t():
    r = np.repeat([1.0, 2.0], 3)
    d = np.tile([32.0, 64.0, 128.0], 2)
    se = np.full(6, 0.1)
    noise = np.array([0.02, -0.03, 0.01, -0.01, 0.02, -0.02])
    for gamma, used in ((-0.5, True), (0.0, False), (0.16, True), (0.13, False)):  # |gamma| / se 7, 0, 2.1, 1.7
        y = np.where(r == 1, 1.0, 0.7) + gamma * np.log(d / 64.0) + noise
        t = lr_optimum.width_transfer(r, d, y, se, 64.0, noise_dof=5)
        X = np.column_stack([r == 1, r == 2, np.log(d / 64.0)]).astype(float)
        cov = np.linalg.inv(X.T @ X / 0.01)
        coef = cov @ X.T @ (y / 0.01)
        assert t["gamma"] == pytest.approx(coef[2], abs=1e-12) and t["gamma_se"] == pytest.approx(math.sqrt(cov[2, 2]))
        assert t["used"] is used and bool(abs(coef[2]) >= 2 * math.sqrt(cov[2, 2])) is used
        chi2 = float(np.sum((y - X @ coef) ** 2) / 0.01)
        assert t["dof"] == 3 and t["chi2"] == pytest.approx(chi2, rel=1e-9)
        assert t["chi2_p"] == pytest.approx(stats.chi2.sf(chi2, 3), rel=1e-9)
        q = stats.t.ppf(0.975, 5)
        a1, s1 = coef[0], math.sqrt(cov[0, 0])
        assert t["intervals_at_ref"][1.0] == pytest.approx([math.exp(a1 - q * s1), math.exp(a1 + q * s1)], rel=1e-9)


def test_cells_combine_by_inverse_variance_with_cochrans_q():
    cells = [
        lr_optimum.LrOptimum(2.0, None, 3.0, False, 0, 0.1),
        lr_optimum.LrOptimum(3.0, None, 3.0, False, 0, 0.2),
        lr_optimum.LrOptimum(1.0, None, 3.0, True, -1, None),  # no se: left out
    ]
    out = lr_optimum.combine_optima(cells, dof=4)
    x, w = np.log([2.0, 3.0]), np.array([100.0, 25.0])
    mean, se = float(np.sum(w * x) / 125), 1 / math.sqrt(125)
    q = stats.t.ppf(0.975, 4)
    assert out["best"] == pytest.approx(math.exp(mean), rel=1e-12) and out["cells_used"] == 2
    assert out["interval"] == pytest.approx([math.exp(mean - q * se), math.exp(mean + q * se)], rel=1e-9)
    Q = float(np.sum(w * (x - mean) ** 2))
    assert out["heterogeneity_Q"] == pytest.approx(Q, rel=1e-12)
    assert out["heterogeneity_p"] == pytest.approx(stats.chi2.sf(Q, 1), rel=1e-9)
