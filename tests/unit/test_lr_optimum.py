"""The best lr of a grid (loopscale/fit/lr_optimum.py): the parabola's vertex and its interval against the closed
form of a symmetric grid, the pooled noise, the window and the edge rule the tuning stage extends grids by."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from loopscale.fit.lr_optimum import parabola_optimum, pooled_noise, width_transfer, window

H = math.log(2**0.5)
X5 = H * np.arange(-2, 3)  # ln of 0.5 .. 2, symmetric about 0


def test_vertex_and_interval_match_the_closed_form_of_a_symmetric_grid():
    """L = c0 + c1 x + c2 x^2 exactly, known sigma: on a symmetric grid c1 and c2 are uncorrelated with
    Var c1 = s^2 / sum x^2 and Var c2 = s^2 / (sum x^4 - (sum x^2)^2 / n), so the delta method's se of
    x* = -c1 / (2 c2) is sqrt(Var c1 / (4 c2^2) + c1^2 Var c2 / (4 c2^4))."""
    c0, c1, c2, sigma = 3.7, -0.02, 0.05, 0.004
    L = c0 + c1 * X5 + c2 * X5**2
    fit = parabola_optimum(X5, L, sigma=sigma)
    vertex = -c1 / (2 * c2)
    assert fit.best == pytest.approx(math.exp(vertex), rel=1e-9)
    assert fit.L_best == pytest.approx(c0 - c1**2 / (4 * c2), rel=1e-12)
    sx2, sx4 = np.sum(X5**2), np.sum(X5**4)
    var_c1, var_c2 = sigma**2 / sx2, sigma**2 / (sx4 - sx2**2 / 5)
    se = math.sqrt(var_c1 / (4 * c2**2) + c1**2 * var_c2 / (4 * c2**4))
    assert fit.log_se == pytest.approx(se, rel=1e-9)
    z = stats.norm.ppf(0.975)
    assert fit.interval == pytest.approx((math.exp(vertex - z * se), math.exp(vertex + z * se)), rel=1e-9)
    # an estimated sigma on `dof` degrees of freedom: the t quantile instead
    t = parabola_optimum(X5, L, sigma=sigma, dof=16)
    q = stats.t.ppf(0.975, 16)
    assert t.interval == pytest.approx((math.exp(vertex - q * se), math.exp(vertex + q * se)), rel=1e-9)
    assert (fit.side, fit.at_edge) == (0, False)


def test_own_residuals_and_pooled_noise():
    rng = np.random.default_rng(0)
    grids = [(X5, 3.0 + 0.05 * X5**2 + rng.normal(0, 0.003, 5)) for _ in range(40)]
    sigma, dof = pooled_noise(grids)
    assert dof == 80 and sigma == pytest.approx(0.003, rel=0.2)
    own = parabola_optimum(*grids[0])  # sigma from this grid's 2 residual dof, t quantile 4.30
    x, L = grids[0]
    coef, res, *_ = np.polyfit(x, L, 2, full=True)
    s = math.sqrt(res[0] / 2)
    pooled = parabola_optimum(x, L, sigma=s, dof=2)
    assert own.interval == pytest.approx(pooled.interval, rel=1e-9)
    assert pooled_noise([(X5[:3], X5[:3])]) == (None, 0)  # 3 lrs: no residual


def test_edges_window_and_flat_losses():
    below = parabola_optimum(X5, 3.0 + 0.05 * (X5 - 3 * H) ** 2, sigma=0.001)  # optimum at x2.83, above the grid
    assert below.at_edge and below.side == 1 and below.best == pytest.approx(2**1.5, rel=1e-6)
    on_edge = parabola_optimum(X5, 3.0 + 0.05 * (X5 + 2 * H) ** 2)  # vertex on the lowest lr: not bracketed
    assert not on_edge.at_edge and on_edge.side == -1
    falling = parabola_optimum(X5, 3.0 - 0.01 * X5**2 + 0.001 * X5)  # concave: no vertex, the lowest loss is taken
    assert falling.interval is None and falling.reason and falling.side == -1 and falling.best == pytest.approx(0.5)
    x7 = H * np.arange(-2, 5)
    L7 = 3.0 + 0.05 * (x7 - H) ** 2
    assert sorted(window(x7, L7, 5)) == [1, 2, 3, 4, 5]  # centred on the lowest loss
    assert sorted(window(x7, 3.0 + 0.05 * (x7 - 4 * H) ** 2, 5)) == [2, 3, 4, 5, 6]  # held inside the grid
    with pytest.raises(ValueError, match="needs 3"):
        parabola_optimum(X5[:2], X5[:2])


def test_the_width_transfer_recovers_its_exponent_and_its_misfit():
    """ln best = a_r + gamma ln(d / 24) exactly at two widths: a_r and gamma exact, chi2 0 on n - 5 dof. With two
    widths gamma is the mean of the four pairs' differences / ln 2, so its se is se sqrt(2) / (2 ln 2), and one
    optimum moved by 3 se leaves a pair deviation of 3/4 of that (the others 1/4): chi2 = 9 (9 + 3) / 32."""
    a, gamma = {1: 2.0, 2: 1.7, 4: 1.4, 8: 1.1}, -0.8
    r = np.repeat([1, 2, 4, 8], 2)
    d = np.tile([24.0, 48.0], 4)
    y = np.array([a[int(v)] + gamma * math.log(w / 24) for v, w in zip(r, d)])
    se = np.full(8, 0.1)
    t = width_transfer(r, d, y, se, 24.0)
    assert t["gamma"] == pytest.approx(gamma, abs=1e-12) and t["chi2"] == pytest.approx(0.0, abs=1e-18)
    assert t["a"] == pytest.approx({1.0: 2.0, 2.0: 1.7, 4.0: 1.4, 8.0: 1.1}) and t["dof"] == 3
    assert t["gamma_se"] == pytest.approx(0.1 * math.sqrt(2) / (math.log(2) * 2), rel=1e-12)
    moved = y.copy()
    moved[0] += 0.3
    assert width_transfer(r, d, moved, se, 24.0)["chi2"] == pytest.approx(9.0 * 12 / 32, rel=1e-9)
    with pytest.raises(ValueError, match="two or more widths"):
        width_transfer(r, np.full(8, 24.0), y, se, 24.0)


def test_a_nearly_straight_grid_gives_an_interval_to_infinity_without_a_warning():
    """d48's r = 2 loop grid on the demo (2026-12-07, x1/16 .. x1): the loss rises almost linearly in ln lr_loop, so
    the parabola barely curves, its vertex lies far below the grid and ln(best)'s standard error is huge: the
    interval runs to 0 and inf and the optimum is on the lower side, said quietly (the tune printed numpy's
    'overflow encountered in exp' before)."""
    import warnings

    x = np.log([0.0625, 0.125, 0.25, 0.5, 1.0])
    L = np.array([3.7993, 3.8046, 3.8108, 3.8143, 3.8213])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit = parabola_optimum(x, L, sigma=0.0038, dof=16)
    assert fit.side == -1 and fit.at_edge and fit.interval is not None
    assert fit.interval[1] == float("inf") and fit.interval[0] == 0.0
