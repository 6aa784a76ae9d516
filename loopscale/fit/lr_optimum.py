"""The best learning rate of a small lr grid: a parabola of the loss in x = ln(lr multiplier) and its vertex.

    L(x) = c0 + c1 x + c2 x^2,   x* = -c1 / (2 c2),   best multiplier exp(x*)

The interval is the delta method on the vertex (d x* / d c1 = -1 / (2 c2), d x* / d c2 = c1 / (2 c2^2)) with the
coefficients' covariance sigma^2 (X^T X)^-1, sigma the run noise of one loss, and the t quantile of the noise
estimate's degrees of freedom. A single grid of 5 lrs leaves a parabola 2 degrees of freedom (t = 4.3), so the
tuning stage (loopscale/launch/tune.py) pools the noise over every grid it fits (`pooled_noise`: the residuals of
all the parabolas together; seed noise and the parabola's misfit both) and fits each grid at that sigma; a
grid alone estimates its own (`parabola_optimum(x, L)`, what `validate`'s lr confound reads).

`window` picks the points a parabola is fitted to: the `n` lrs nearest the grid's lowest loss, so a grid
extended past an edge (loopscale/launch/tune.py) still fits the vertex locally, where a parabola describes the
loss (far from the optimum the loss rises more steeply on the high-lr side).

A run whose loss is over FAILED_RATIO times its grid's lowest did not train at that lr (`failed`: it diverged, or
never left the loss of a model without context); it is no point of the basin a parabola describes and is left out
of the window and of the pooled noise. Past such lrs the grid cannot grow (`bounded_by_failure`): a lowest trained
loss at the grid's edge next to them is bracketed there, and a vertex at or past the first failed lr is clipped to
the last lr that trained, with no interval.

Across cells: `combine_optima` averages one r's ln(best) over the cells (weights 1 / se^2, Cochran's Q for whether
they agree), `width_transfer` fits ln best = a_r + gamma ln(width / ref) when the cells hold several widths.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from scipy.special import chdtrc, stdtrit

from loopscale.config.tune_record import CombinedOptimum, WidthTransfer


@dataclass(frozen=True)
class LrOptimum:
    """The best multiplier of one grid: exp(x*), its 95% interval (None without a noise estimate or when the
    losses do not curve upwards), L at x* clipped to the grid, and where it lies: `at_edge` when the vertex is
    outside the grid's lrs; `side` where the grid must grow to bracket the optimum: -1 below, +1 above when the
    vertex is outside or the grid's lowest loss is at its first or last lr, 0 when bracketed."""

    best: float
    interval: tuple[float, float] | None
    L_best: float
    at_edge: bool
    side: int
    log_se: float | None  # standard error of ln(best)
    reason: str | None = None
    bounded: bool = False  # the best is the last lr that trained next to lrs that failed (`bounded_by_failure`)


# Every grid tuned here rose by at most 8% of its lowest loss over 5 lrs spaced by sqrt 2 (sweeps/lr_rules/*.yaml);
# the runs that failed (huginn's sandwich block at r = 1, x2-x5.66) sat 33-45% above it
FAILED_RATIO = 1.2


def failed(L: np.ndarray) -> np.ndarray:
    """(n,) the runs that did not train: a loss that is not finite or over FAILED_RATIO x the lowest finite one."""
    L = np.asarray(L, float)
    finite = np.isfinite(L)
    if not finite.any():
        return np.ones(len(L), bool)
    return ~finite | (L > FAILED_RATIO * L[finite].min())


def bounded_by_failure(fit: LrOptimum, x_trained: np.ndarray, x_failed: np.ndarray) -> LrOptimum:
    """`fit` of the lrs that trained, read against the lrs beyond them that failed: a grid whose edge (`side`)
    borders failed lrs is bracketed (growing it there trains more failures); a vertex at or past the first failed
    lr is clipped to the last lr that trained, without an interval (the optimum lies between the two, closer than
    a parabola can say)."""
    above = x_failed[x_failed > x_trained.max()]
    below = x_failed[x_failed < x_trained.min()]
    vertex = np.log(fit.best) if fit.best > 0 else -np.inf
    for failures, sign, last, word in ((above, 1, x_trained.max(), "highest"), (below, -1, x_trained.min(), "lowest")):
        if not len(failures):
            continue
        first = float(failures.min() if sign > 0 else failures.max())
        if sign * (vertex - first) >= 0:  # at or past the first lr that failed
            why = f"runs fail from x{np.exp(first):.3g}: the best is the {word} lr that trained"
            clipped = {"best": float(np.exp(last)), "interval": None, "at_edge": True, "side": 0, "log_se": None}
            return replace(fit, **clipped, reason=why, bounded=True)
        if fit.side == sign:
            return replace(fit, side=0)  # the trained lrs' edge borders lrs that fail: bracketed there
    return fit


def away_from_failure(x_trained: np.ndarray, L_trained: np.ndarray, x_failed: np.ndarray) -> LrOptimum | None:
    """A grid with fewer than 3 lrs that trained and failures on one side of them: no parabola, but the side it
    must grow on (away from the failures), its lowest trained loss the best so far; None with failures on both
    sides or nothing trained (no direction to take)."""
    if not len(x_trained) or not len(x_failed):
        return None
    above, below = (x_failed > x_trained.max()).any(), (x_failed < x_trained.min()).any()
    if above == below:
        return None
    at = int(np.argmin(L_trained))
    why = f"{len(np.unique(x_trained))} lr(s) trained: the grid grows away from the lrs that failed"
    return LrOptimum(float(np.exp(x_trained[at])), None, float(L_trained[at]), True, -1 if above else 1, None, why)


def window(x: np.ndarray, L: np.ndarray, n: int = 5) -> np.ndarray:
    """Indices (sorted by x) of the n lrs nearest the lowest loss, by rank; all of them when there are <= n."""
    order = np.argsort(x)
    if len(order) <= n:
        return order
    at = int(np.argmin(np.asarray(L)[order]))
    start = min(max(at - n // 2, 0), len(order) - n)
    return order[start : start + n]


def _design(x: np.ndarray) -> np.ndarray:
    return np.column_stack([np.ones_like(x), x, x**2])  # columns c0, c1, c2


def residual_ss(x: np.ndarray, L: np.ndarray) -> tuple[float, int]:
    """(residual sum of squares of the least-squares parabola, its degrees of freedom n - 3)."""
    X = _design(np.asarray(x, float))
    coef, *_ = np.linalg.lstsq(X, np.asarray(L, float), rcond=None)
    return float(np.sum((np.asarray(L, float) - X @ coef) ** 2)), len(x) - 3


def pooled_noise(grids: list[tuple[np.ndarray, np.ndarray]]) -> tuple[float | None, int]:
    """(sigma of one loss, degrees of freedom) from the parabolas of several grids together: sqrt(sum RSS /
    sum (n - 3)); (None, 0) when no grid has more than 3 lrs."""
    rss, dof = 0.0, 0
    for x, L in grids:
        if len(np.unique(x)) > 3:
            r, d = residual_ss(x, L)
            rss, dof = rss + r, dof + d
    return (float(np.sqrt(rss / dof)), dof) if dof else (None, 0)


def parabola_optimum(x, L, sigma: float | None = None, dof: int | None = None) -> LrOptimum:
    """The vertex of the least-squares parabola L(x) (x = ln multiplier) and its 95% interval (module
    docstring). sigma: the noise of one loss (None: this grid's own residuals, n - 3 degrees of freedom, none
    with 3 points); dof: the degrees of freedom sigma was estimated with (None: a known sigma, normal quantile).
    ValueError with fewer than 3 distinct lrs."""
    x, L = np.asarray(x, float), np.asarray(L, float)
    if len(np.unique(x)) < 3:
        raise ValueError(f"{len(np.unique(x))} learning rate(s): a parabola needs 3")
    X = _design(x)
    coef, *_ = np.linalg.lstsq(X, L, rcond=None)
    c0, c1, c2 = (float(c) for c in coef)
    lo, hi = float(x.min()), float(x.max())
    lowest = float(x[np.argmin(L)])
    if not c2 > 0:
        side = -1 if lowest == lo else 1 if lowest == hi else 0
        return LrOptimum(float(np.exp(lowest)), None, float(L.min()), True, side, None,
                         "the losses do not curve upwards: the best lr is the grid's lowest loss")  # fmt: skip
    vertex = -c1 / (2 * c2)
    side = -1 if vertex < lo - 1e-9 or lowest == lo else 1 if vertex > hi + 1e-9 or lowest == hi else 0
    inside = float(np.clip(vertex, lo, hi))
    if sigma is None and len(x) > 3:
        rss, own_dof = residual_ss(x, L)
        sigma, dof = float(np.sqrt(rss / own_dof)), own_dof
    log_se, interval = None, None
    if sigma is not None:
        cov = sigma**2 * np.linalg.inv(X.T @ X)
        g = np.array([0.0, -1 / (2 * c2), c1 / (2 * c2**2)])  # d vertex / d (c0, c1, c2)
        log_se = float(np.sqrt(max(g @ cov @ g, 0.0)))
        q = 1.959963984540054 if dof is None else float(stdtrit(dof, 0.975))  # t quantile (no scipy.stats import)
        with np.errstate(over="ignore"):  # a nearly flat parabola: its interval runs to 0 and inf, and says so
            interval = (float(np.exp(vertex - q * log_se)), float(np.exp(vertex + q * log_se)))
    L_best = c0 + c1 * inside + c2 * inside**2
    at_edge = not lo - 1e-9 <= vertex <= hi + 1e-9
    with np.errstate(over="ignore"):
        best = float(np.exp(vertex))
    return LrOptimum(best, interval, float(L_best), at_edge, side, log_se)


def width_transfer(
    r: np.ndarray, width: np.ndarray, log_best: np.ndarray, log_se: np.ndarray, ref_width: float, noise_dof: int = 0
) -> WidthTransfer:
    """The best lr across cells of several widths as one transfer: ln best = a_r + gamma ln(width / ref_width),
    a per-r intercept and a shared width exponent, weighted least squares with weights 1 / se^2 (the optima's own
    errors, taken as known). Returns {"a": {r: a_r}, "a_se": {r: se}, "gamma", "gamma_se", "chi2", "dof", "chi2_p",
    "ref_width", "intervals_at_ref": {r: [lo, hi]} (95%, t on the pooled noise's `noise_dof`; normal when 0),
    "used"}: chi2 the weighted residual sum of squares on n - (number of r + 1) degrees of freedom (does one
    exponent serve every r?); used when gamma differs from 0 by 2 se (else the per-r multipliers are the rule).
    ValueError without two widths."""
    r, width = np.asarray(r, float), np.asarray(width, float)
    y, se = np.asarray(log_best, float), np.asarray(log_se, float)
    if len(np.unique(width)) < 2:
        raise ValueError("a width transfer needs optima at two or more widths")
    levels = sorted(np.unique(r))
    X = np.column_stack([*(r == v for v in levels), np.log(width / ref_width)]).astype(float)
    w = 1.0 / se**2
    cov = np.linalg.inv(X.T @ (w[:, None] * X))
    coef = cov @ X.T @ (w * y)
    chi2, dof = float(np.sum(w * (y - X @ coef) ** 2)), len(y) - len(coef)
    a = {float(v): float(c) for v, c in zip(levels, coef)}
    a_se = {float(v): float(np.sqrt(cov[i, i])) for i, v in enumerate(levels)}
    q = float(stdtrit(noise_dof, 0.975)) if noise_dof else 1.959963984540054
    gamma, gamma_se = float(coef[-1]), float(np.sqrt(cov[-1, -1]))
    return {
        **{"a": a, "a_se": a_se, "gamma": gamma, "gamma_se": gamma_se, "chi2": chi2, "dof": dof},
        "chi2_p": float(chdtrc(dof, chi2)) if dof > 0 else None,
        "ref_width": ref_width,
        "intervals_at_ref": {v: [float(np.exp(a[v] - q * a_se[v])), float(np.exp(a[v] + q * a_se[v]))] for v in a},
        "used": bool(abs(gamma) >= 2 * gamma_se),
    }


def combine_optima(fits: list[LrOptimum | None], dof: int) -> CombinedOptimum:
    """One r's cells combined: ln(best) weighted by 1 / se^2, its 95% interval (t quantile at the pooled noise's
    dof), and Cochran's Q with its chi^2 p (do the cells agree on the best lr?). Cells without an se (losses not
    curving upwards, a best bounded by failed lrs) are left out; where no cell has one, the bounded cells' lrs
    (geometric mean) without an interval; `best` None when there are none either."""
    usable = [f for f in fits if f is not None and f.log_se and f.log_se > 0]
    if not usable:
        bounded = [f for f in fits if f is not None and f.bounded]
        if bounded:  # only cells whose optimum lies past their last trained lr: take those lrs, with no interval
            best = float(np.exp(np.mean(np.log([f.best for f in bounded]))))
            why = "every cell's best is the last lr that trained before lrs that failed: no interval"
            return {"best": best, "interval": None, "cells_used": len(bounded), "reason": why}
        return {
            "best": None,
            "reason": "no cell's losses curve upwards or stop short of failed lrs: no optimum to take",
        }
    x = np.log([f.best for f in usable])
    w = 1.0 / np.square([f.log_se for f in usable])
    mean = float(np.sum(w * x) / np.sum(w))
    se = float(1.0 / np.sqrt(np.sum(w)))
    q = float(stdtrit(dof, 0.975)) if dof else 1.959963984540054
    Q = float(np.sum(w * (x - mean) ** 2))
    p = float(chdtrc(len(usable) - 1, Q)) if len(usable) > 1 else None
    return {
        "best": float(np.exp(mean)),
        "interval": [float(np.exp(mean - q * se)), float(np.exp(mean + q * se))],
        "log_se": se,
        "cells_used": len(usable),
        "heterogeneity_Q": Q,
        "heterogeneity_p": p,
    }
