"""Uncertainty of a fitted law: bootstrap, profile intervals, likelihood-ratio tests, a held-out budget.

Each step continues from a fit's `loopscale.fit.optimize.FitState` (docs/design.md, "Fitting"):
- `bootstrap` (`loopscale.fit.resample`): refits on resampled rows or clusters, over worker processes;
  intervals by `percentile_ci`;
- `profile_param` / `profile_phi`: the objective minimised over the other parameters along one
  coordinate, with a robust likelihood-ratio interval (Schrader & Hettmansperger 1980) whose ends are
  found by root-finding; `lr_test` is the same statistic as a test of one value;
- `holdout_largest`: the law refit without the largest compute budget, and its error there.
"""

from __future__ import annotations

import numpy as np

from loopscale.errors import InputError
from loopscale.fit.bounds import bounds_for
from loopscale.fit.laws.form import Law, LawData
from loopscale.fit.laws.registry import make_law
from loopscale.fit.noise import huber_moments
from loopscale.fit.noise_scale import (
    parameter_scale,
    pooled_scale_moments,
    reference_p_value,
    reference_quantile,
    scatter_about_law,
)
from loopscale.fit.objective import Loss, objective_grad_hess, residuals
from loopscale.fit.optimize import BASIN_ABS_TOL, FitState, Refined, fit_law, lm_batch, newton, refine
from loopscale.fit.record_blocks import Holdout, Profile
from loopscale.fit.runs_table import budget_clusters


def percentile_ci(columns: dict[str, list[float]], level: float = 0.95) -> dict[str, list[float]]:
    """Percentile bootstrap interval per parameter."""
    tail = 100 * (1 - level) / 2
    return {k: [float(np.percentile(v, tail)), float(np.percentile(v, 100 - tail))] for k, v in columns.items()}


# ----------------------------------------------------------------------------------------------
# Profiles and likelihood-ratio tests
# ----------------------------------------------------------------------------------------------
def profile_threshold(state: FitState, name: str | None = None) -> tuple[float, dict[str, float]]:
    """Objective increase that bounds the 95% profile interval for one parameter (`name`, an internal
    coordinate; None: the pooled threshold every parameter shared before, which the joint-vs-separate test reads).

    Robust likelihood-ratio test for M-estimators (Schrader & Hettmansperger 1980): the statistic
    2 * Delta(sum rho) * mean(psi') / mean(psi^2) is asymptotically chi-square(1). So the interval
    is {phi : Delta <= q / 2 * mean(psi^2) / mean(psi')}, with psi, psi' evaluated at the residuals of the full
    fit and q the reference's 95% point (`reference_quantile`): F(1, dof) where the scale was estimated. For
    plain least squares this is the usual Delta <= q/2 s^2.

    With a seed sigma (`LawData.sigma`) the residuals are standardised: the moments are those of z ~ N(0, 1)
    (`noise.huber_moments`; Delta <= 1.92 x 0.865 for Huber at 1.345 with a known scale), times the scale
    factor S^2 (`scatter_about_law`, from squared residuals) when it exceeds 1, and q is F(1, LawData.sigma_dof):
    the degrees of freedom behind the scale (`scale_to_scatter`). Without one, the moments are the residuals'
    own, psi summed within each dependence group (`LawData.noise_group`) before squaring, over that sum's expectation
    under independent noise: n (G - p) / G with q F(1, G - p) (n - p for single rows), and for a curve law whose
    groups span points the expectation with the fit's leverage, q F(1, nu) (`_unweighted_threshold`).

    Where a dependence group spans points (a forked job's branches), a seed sigma standardises the rows and `name`
    is given, that pooled S^2 is the design effect of the parameters' common direction, not of `name`'s: the
    statistic of parameter k is ~ S_k^2 x chi2_1 with S_k^2 its own sandwich-over-model variance ratio
    (`_adjusted`, the adjusted profile likelihood).
    """
    if state.data.sigma is not None and not state.data.sigma_estimated:
        thr, stats = _standardised_threshold(state)
    else:
        thr, stats = _unweighted_threshold(state)
    return (thr, stats) if name is None else _adjusted(state, name, thr, stats)


def _unweighted_threshold(state: FitState) -> tuple[float, dict[str, float]]:
    """`profile_threshold` for residuals in log units (no seed sigma): the pooled scale, its psi summed within each
    dependence group, over the sum's expectation under independent noise: n (G - p) / G on F(1, G - p) (n - p and
    Student's t for single rows: exact for least squares), and for a curve law whose groups span points (a run's or
    a forked parent's evaluations) the expectation with the fit's own leverage, sum_g 1' (I - H)_gg 1 on F(1, nu),
    nu Satterthwaite's (`noise_scale.pooled_scale_moments`). A forked sweep's final points keep n (G - p) / G: with
    the exact expectation there the 1-seed demo's delta-phi interval called a null "real" in 8% of 200 sweeps
    against 5.5% (docs/results.md, "The pooled scale over its expectation"). A curve fit weighted by its position
    sigma (`LawData.sigma_estimated`: estimated from the fit's own residuals, so its level is not a known scale)
    reads the same rule on its standardised residuals, the leverage the weighted fit's (`position_sigma`)."""
    res = residuals(state.law.log_predict(state.best.theta, state.data), state.data)
    psi = state.loss.psi(res)
    groups = state.data.noise_group
    sums = psi if groups is None else np.bincount(groups, weights=psi)
    G, n, p = len(sums), len(res), state.law.n_params
    spanned = pooled_scale_moments(state) if state.law.reads_curves else None  # curve laws only: design.md
    dof = max(1, G - p) if spanned is None else spanned[1]

    def pooled(sums):
        return float(np.sum(sums**2) * G / (n * dof)) if spanned is None else float(np.sum(sums**2) / spanned[0])

    m_psi2 = pooled(sums)
    m_dpsi = float(np.mean(state.loss.psi_prime(res)))
    if m_dpsi == 0:  # no residual inside +-delta: fall back to the least-squares scale
        m_psi2, m_dpsi = pooled(res if groups is None else np.bincount(groups, weights=res)), 1.0
    thr = 0.5 * reference_quantile(dof) * m_psi2 / m_dpsi
    stats = {"mean_psi_sq": m_psi2, "mean_psi_prime": m_dpsi, "reference_dof": dof, "groups": G}
    return thr, stats if spanned is None else {**stats, "independent_sum": spanned[0]}


def _standardised_threshold(state: FitState) -> tuple[float, dict[str, float]]:
    """`profile_threshold` for residuals standardised by a measured seed sigma: the pooled scale."""
    e_psi2, e_dpsi = huber_moments(state.loss.kind, state.loss.delta)
    s2, dof_scatter = scatter_about_law(state)
    m_psi2 = e_psi2 * max(1.0, s2)
    dof = state.data.sigma_dof
    thr = 0.5 * reference_quantile(dof) * m_psi2 / e_dpsi
    groups = dof_scatter + state.law.n_params
    stats = {"mean_psi_sq": m_psi2, "mean_psi_prime": e_dpsi, "scale_factor_sq": s2, "reference_dof": dof}
    return thr, {**stats, "groups": groups}


def _adjusted(state: FitState, name: str, thr: float, stats: dict) -> tuple[float, dict[str, float]]:
    """The pooled threshold (thr, stats) replaced by parameter `name`'s own (`noise_scale.parameter_scale`: S_k^2
    on F(1, nu_k)) where the rows are dependent and a seed sigma standardises them. The seed sigma's own threshold
    (S^2 = 1 at the unscaled seed sigma, on the pooled reference) stays a floor: a parameter's sandwich may narrow
    the pooled scale's interval, never below what the measured seed noise alone gives (a sandwich from ~16 groups
    can come out small by chance). Without a seed sigma (Huber at 1e-3 in log units, psi of most rows clipped: the
    least-squares linearisation behind S_k^2 does not hold) the pooled threshold stands: measured, S_k^2 there
    covered phi in 25 of 30 sweeps of the 1-seed forked demo (docs/results.md)."""
    own = None if state.data.sigma is None or state.data.sigma_estimated else parameter_scale(state, name)
    if own is None:
        return thr, stats
    s2_k, nu_k = own
    q_k = reference_quantile(nu_k)
    e_psi2, e_dpsi = huber_moments(state.loss.kind, state.loss.delta)
    seed_floor = 0.5 * reference_quantile(stats["reference_dof"]) * e_psi2 / e_dpsi / state.data.sigma_scale**2
    thr_k = max(0.5 * q_k * e_psi2 * s2_k / e_dpsi, seed_floor)
    adjusted = {"mean_psi_sq": 2 * thr_k * e_dpsi / q_k, "reference_dof": nu_k, "param_scale_sq": s2_k}
    return thr_k, {**stats, **adjusted, "pooled_threshold": thr}


def profile_value(state: FitState, name: str, value: float, theta0=None) -> Refined:
    """The objective minimised over every other parameter with internal coordinate `name` held at
    `value` (L-BFGS-B with that coordinate's bounds pinned), from theta0 (default: the optimum)."""
    law = state.law
    i = law.internal_names.index(name)
    theta = np.array(state.best.theta if theta0 is None else theta0, dtype=float)
    theta[i] = value
    bounds = bounds_for(law)
    bounds[i] = (value, value)
    return refine(theta, law, state.data, state.loss, bounds=bounds)


def profile_solve(state: FitState, name: str, value: float, theta0) -> Refined:
    """`profile_value` from theta0 after a fast pre-solve with the coordinate held at `value`:
    exact Newton (`newton`) where the law has an analytic Hessian, else the batched LM."""
    law = state.law
    fixed = np.array([n == name for n in law.internal_names])
    theta = np.array(theta0, dtype=float)
    theta[fixed] = value
    if law.has_hessian:
        theta, _ = newton(law, state.data, state.loss, theta, fixed=fixed)
    else:
        theta = lm_batch(law, state.data, state.loss, theta[None, :], fixed=fixed)[0][0]
    return profile_value(state, name, value, theta)


def profile_values(state: FitState, name: str, values, thetas=None) -> list[Refined]:
    """`profile_value` at several values, each by `profile_solve` from its theta (default: the
    optimum), so every point meets the fit's L-BFGS-B tolerances."""
    values = np.atleast_1d(np.asarray(values, dtype=float))
    starts = [state.best.theta] * len(values) if thetas is None else list(thetas)
    return [profile_solve(state, name, x, theta) for x, theta in zip(values, starts)]


def _walk_profile(state: FitState, name: str, grid: np.ndarray, centre: int) -> list[Refined]:
    """The profile on `grid`, solved outward from grid[centre] (started at the optimum): each point
    starts from the straight-line extrapolation of its two solved neighbours towards it, which is
    close (the path theta(x) is smooth), so Newton needs a few steps per point."""
    solved: list[Refined | None] = [None] * len(grid)
    solved[centre] = profile_solve(state, name, grid[centre], state.best.theta)
    for step in (-1, 1):
        for j in range(centre + step, len(grid) if step > 0 else -1, step):
            near = solved[j - step].theta
            start = near
            if 0 <= j - 2 * step < len(grid) and solved[j - 2 * step] is not None:
                far = solved[j - 2 * step].theta
                slope = (near - far) / (grid[j - step] - grid[j - 2 * step])
                start = near + slope * (grid[j] - grid[j - step])
            solved[j] = profile_solve(state, name, grid[j], start)
    return solved


def _threshold_crossing(
    state: FitState,
    name: str,
    level: float,
    inside: tuple[float, Refined],
    outside: tuple[float, Refined],
    xtol: float,
    max_iter: int = 60,
) -> float:
    """The x between a solved point inside (profile <= level) and one outside (> level) where the
    profile crosses `level`.

    The profile's slope is free: at a profile point the other coordinates are optimal, so
    d profile / dx is the objective's partial derivative in x there (envelope theorem), i.e. the
    gradient L-BFGS-B reports. With values and slopes at both ends of the bracket, the next guess
    is the crossing of the cubic Hermite interpolant (exact for a quadratic profile, so the first
    guess is already close), and the bracket shrinks around the crossing; a guess outside the
    bracket falls back to bisection. Each evaluation starts from the straight line between the
    bracket's solutions. Stops when a guess moves less than xtol / 10 or the bracket is narrower
    than xtol.
    """
    i = state.law.internal_names.index(name)
    (x_in, r_in), (x_out, r_out) = inside, outside
    x_prev = np.inf
    for _ in range(max_iter):
        x = _hermite_crossing(x_in, r_in.objective - level, r_in.grad[i], x_out, r_out.objective - level, r_out.grad[i])
        if abs(x - x_prev) < 0.1 * xtol or abs(x_out - x_in) < xtol:
            return float(x)
        u = (x - x_in) / (x_out - x_in)
        r = profile_solve(state, name, x, (1 - u) * r_in.theta + u * r_out.theta)
        if r.objective <= level:
            x_in, r_in = x, r
        else:
            x_out, r_out = x, r
        x_prev = x
    return float(x)


def _hermite_crossing(x0: float, g0: float, d0: float, x1: float, g1: float, d1: float) -> float:
    """A zero strictly between x0 and x1 of the cubic with values g and slopes d at both ends
    (g0 <= 0 < g1), or the midpoint where the cubic has none there."""
    h = x1 - x0
    # p(t) on t in [0, 1] in the Hermite basis, expanded into powers of t
    coef = [2 * g0 + h * d0 - 2 * g1 + h * d1, -3 * g0 - 2 * h * d0 + 3 * g1 - h * d1, h * d0, g0]
    roots = np.roots(coef) if np.all(np.isfinite(coef)) else np.array([])
    t = roots.real[(np.abs(roots.imag) < 1e-12) & (roots.real > 0) & (roots.real < 1)]
    if len(t) == 0:
        return x0 + 0.5 * h
    secant = g0 / (g0 - g1)
    return float(x0 + h * t[np.argmin(np.abs(t - secant))])


def profile_param(
    state: FitState, name: str = "phi", half_width: float = 0.5, n_points: int = 21, xtol: float = 1e-6
) -> Profile:
    """The profile of the objective in one internal coordinate and its 95% interval (`_profile`)."""
    return _profile(state, name, half_width, n_points, xtol)[0]


def profile_refit(
    state: FitState, name: str = "phi", half_width: float = 0.5, n_points: int = 21, max_refits: int = 3
) -> tuple[Profile, Refined | None]:
    """`profile_param`, and a better optimum when the profile walked below the fit: (profile, None) when
    it did not; (profile around the new optimum, the new optimum) when it did. The lowest profile point
    is refined with every coordinate free (`refine`); the profile is drawn again around the result,
    up to `max_refits` times. A profile still below the fit after that keeps its "warning"."""
    best = None
    out, lowest = _profile(state, name, half_width, n_points)
    for _ in range(max_refits):
        if "warning" not in out:
            break
        moved = refine(lowest.theta, state.law, state.data, state.loss)
        if not moved.objective < state.best.objective:
            break
        best = moved
        state = FitState(state.law, state.data, state.loss, moved, state.starts, state.refined)
        out, lowest = _profile(state, name, half_width, n_points)  # the returned profile is always drawn here
    return out, best


def _profile(
    state: FitState, name: str = "phi", half_width: float = 0.5, n_points: int = 21, xtol: float = 1e-6
) -> tuple[Profile, Refined]:
    """Profile of the objective in one internal coordinate (phi, or dphi[<recipe>] of a joint law),
    and its 95% interval.

    The grid (for the figure) is solved outward from the optimum (`_walk_profile`), each point
    polished by L-BFGS-B. The interval ends are the roots of profile(x) - f_min - threshold between
    the last grid point inside and the first outside, to `xtol`, by `_threshold_crossing`. Returns
    (the Profile: its grid x, objective, interval, threshold, method, ...; the lowest solved point).
    """
    law, data, best = state.law, state.data, state.best
    i = law.internal_names.index(name)
    lo_b, hi_b = bounds_for(law)[i]
    x_hat = best.theta[i]
    grid = np.unique(np.clip(np.linspace(x_hat - half_width, x_hat + half_width, n_points), lo_b, hi_b))
    centre = int(np.argmin(np.abs(grid - x_hat)))
    solved = _walk_profile(state, name, grid, centre)
    values = np.array([r.objective for r in solved])
    thr, stats = profile_threshold(state, name)
    f_min = min(best.objective, float(values.min()))
    ends = []
    for step in (-1, 1):
        j = centre
        while 0 <= j + step < len(grid) and values[j + step] - f_min <= thr:
            j += step
        k = j + step
        if not 0 <= k < len(grid):
            ends.append(None)  # still inside at the grid's end: the interval is open on this side
            continue
        ends.append(_threshold_crossing(state, name, f_min + thr, (grid[j], solved[j]), (grid[k], solved[k]), xtol))
    out = {
        "x": grid.tolist(),
        "objective": values.tolist(),
        "interval": ends,
        "threshold": thr,
        "method": "robust LR (Schrader-Hettmansperger), F(1, nu) 95% (nu: the scale's degrees of freedom); ends by "
        "root-finding on the "
        "profile (cubic Hermite steps from values and slopes, bracketed)",
        "param": name,
        **stats,
    }
    if values.min() < best.objective * (1 - 1e-6) - BASIN_ABS_TOL * len(data):
        out["warning"] = "profile found a lower objective than the fit: the fit missed the optimum"
    return Profile.from_json(out), solved[int(np.argmin(values))]


def profile_interval(state: FitState, name: str, xtol: float = 1e-5, max_doublings: int = 8) -> list[float | None]:
    """The 95% profile interval of internal coordinate `name`, its two ends only (no grid for a figure): the same
    threshold (`profile_threshold`) and root-finder (`_threshold_crossing`) as `profile_param`, each end bracketed
    outward from the quadratic guess x_hat +- sqrt(2 threshold / h), h = 1 / (H^-1)_ii the profile's curvature at
    the optimum (exact Hessian; the IRLS one where it is not positive definite), doubling the step until the
    profile is outside. An end still inside at the box's edge is None (open). What `loopscale power` reads per
    simulated sweep: the verdict's interval at a few profile solves instead of a grid's twenty."""
    law, best = state.law, state.best
    i = law.internal_names.index(name)
    lo_b, hi_b = bounds_for(law)[i]
    thr, _ = profile_threshold(state, name)
    x_hat, f_min = float(best.theta[i]), best.objective
    step = 0.1
    if law.has_hessian:
        _, _, H, H_irls = objective_grad_hess(best.theta, law, state.data, state.loss)
        for M in (H, H_irls):
            try:
                c = np.linalg.inv(M)[i, i]
            except np.linalg.LinAlgError:
                continue
            if np.isfinite(c) and c > 0:
                step = float(np.sqrt(2 * thr * c))
                break
    ends: list[float | None] = []
    for sign in (-1.0, 1.0):
        inside, outside, width = (x_hat, best), None, step
        for _ in range(max_doublings):
            x = float(np.clip(x_hat + sign * width, lo_b, hi_b))
            r = profile_solve(state, name, x, inside[1].theta)
            if r.objective - f_min > thr:
                outside = (x, r)
                break
            inside = (x, r)
            if x in (lo_b, hi_b):
                break
            width *= 2
        ends.append(None if outside is None else _threshold_crossing(state, name, f_min + thr, inside, outside, xtol))
    return ends


def profile_phi(state: FitState, half_width: float = 0.5, n_points: int = 21) -> Profile:
    """Objective minimised over the other parameters on a phi grid around phi_hat, and its interval: the Profile,
    its grid under "phi" (see `profile_param`)."""
    if state.law.profile_param != "phi":
        raise InputError(f"the phi profile needs a law with one phi (the looped law); got {state.law.name!r}")
    return profile_param(state, "phi", half_width, n_points)


def lr_test(state: FitState, name: str, value: float = 0.0) -> dict[str, float]:
    """Robust likelihood-ratio test of internal coordinate `name` = value (e.g. dphi = 0).

    Statistic T = 2 (f_restricted - f_min) mean(psi') / mean(psi^2) (Schrader & Hettmansperger
    1980; the least-squares LR statistic when rho is 0.5 x^2), asymptotically chi-square(1); the
    restricted fit starts from the optimum with the coordinate moved to `value`, after a batched
    LM pass.
    """
    restricted = profile_values(state, name, [value])[0]
    _, stats = profile_threshold(state, name)
    gap = max(0.0, restricted.objective - state.best.objective)
    T = 2 * gap * stats["mean_psi_prime"] / stats["mean_psi_sq"]
    return {
        "value": value,
        "objective_restricted": restricted.objective,
        "statistic": float(T),
        "df": 1,
        "p_value": reference_p_value(T, stats.get("reference_dof")),
    }


# ----------------------------------------------------------------------------------------------
# Holdout
# ----------------------------------------------------------------------------------------------
def holdout_largest(
    data: LawData, C: np.ndarray, law_name: str | Law, loss: Loss, seed: int = 0, n_refine: int = 16
) -> Holdout:
    """Refit without the largest compute budget; report the error on the held-out runs.

    Budgets are grouped by `budget_clusters`. Errors are relative: L_hat / L - 1. law_name: a law's name, or
    a law instance (refitted as it is).
    """
    train = holdout_train_rows(C, law_name.name if isinstance(law_name, Law) else law_name, data.r)
    test = ~train
    largest = budget_clusters(C).max()
    result, state = fit_law(data.subset(train), law_name, loss, seed, n_refine)
    pred = np.exp(state.law.log_predict(state.law.from_user(result.params), data.subset(test)))
    obs = data.L[test]
    rel = pred / obs - 1
    return Holdout(
        held_out_budget=float(largest),
        n_train=int(train.sum()),
        n_holdout=int(test.sum()),
        params=result.params,
        rows=np.flatnonzero(test).tolist(),
        observed=obs.tolist(),
        predicted=pred.tolist(),
        rel_error=rel.tolist(),
        mean_abs_rel_error=float(np.mean(np.abs(rel))),
        max_abs_rel_error=float(np.max(np.abs(rel))),
        mean_rel_error=float(np.mean(rel)),
    )


def holdout_train_rows(C, law_name: str, r=None) -> np.ndarray:
    """The rows `holdout_largest` fits on (all but the largest compute budget, grouped by
    `budget_clusters`); InputError when they are fewer than twice the law's parameters. Pure and cheap:
    `fit_table` and the CLI call it before the first solve."""
    clusters = budget_clusters(C)
    train = clusters != clusters.max()
    n_min = 2 * make_law(law_name, r).n_params
    if train.sum() < n_min:
        raise InputError(
            f"--holdout-largest leaves {int(train.sum())} rows, fewer than {n_min} (twice the law's "
            f"{n_min // 2} parameters) below the largest budget {clusters.max():.3g}"
        )
    return train
