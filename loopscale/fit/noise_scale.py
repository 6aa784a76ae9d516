"""The scale a fit's intervals are on (issue 53): a seed sigma bounded below by the scatter about the law, the
degrees of freedom behind it, and what a pilot shows of its noise beyond seed noise (docs/design.md, "The noise
model: seeds as data").

- `scatter_about_law`: S^2 from squared standardised residuals summed within dependence groups (unbounded);
- `scale_to_scatter` / `fit_on_its_scale`: sigma x S where S^2 > 1, the fit refined there, the reference F(1, nu);
- `reference_quantile`: chi2_1 or F(1, nu), the profile's threshold's 95% point;
- `residual_tails`, `point_misfit`, `parent_share`: the residuals' kurtosis, the law's misfit at a point and the
  share of a run's noise a forked job's branches share (what `power` draws).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
from scipy.stats import chi2
from scipy.stats import f as f_dist

from loopscale.fit.objective import objective, residuals
from loopscale.fit.optimize import FitState, newton, refine

CHI2_1_95 = 3.841458820694124  # 95% quantile of chi-square with 1 degree of freedom


def reference_quantile(dof: int | None, level: float = 0.95) -> float:
    """The likelihood-ratio statistic's 95% point: chi2_1 when the noise scale is known, F(1, dof) when it was
    estimated from `dof` degrees of freedom (the square of Student's t: a scale from few repeats is itself
    uncertain, and the interval widens for it)."""
    if dof is None or not np.isfinite(dof):
        return float(chi2.ppf(level, 1)) if level != 0.95 else CHI2_1_95
    return float(f_dist.ppf(level, 1, max(1, int(dof))))


def scatter_about_law(state: FitState) -> tuple[float, int]:
    """(S^2, G - p): the scatter of the residuals about the law in units of their noise scale, from SQUARED
    residuals (unbounded: it grows as far as the data say), and its degrees of freedom (G independent groups, p
    parameters; at least 1).

    Residuals z (standardised by the seed sigma, or in log units) are summed within each dependence group
    (`LawData.noise_group`: a point's seeds share the law's misfit there, a forked job's branches its stable
    phase) before squaring, a cluster-robust variance: S^2 = sum_g (sum_{i in g} z_i)^2 / (n (G - p) / G), whose
    denominator is its expectation under independent unit noise for groups of equal size (n - p for single
    rows). S^2 = 1 + n_g tau^2 / sigma^2 for a misfit tau shared by a point's n_g seeds: the variance factor of a
    point's score."""
    z = residuals(state.law.log_predict(state.best.theta, state.data), state.data)
    groups = state.data.noise_group
    sums = z if groups is None else np.bincount(groups, weights=z)
    G, n, p = len(sums), len(z), state.law.n_params
    dof = max(1, G - p)
    return float(np.sum(sums**2) * G / (n * dof)), dof


def scale_to_scatter(state: FitState) -> tuple[FitState, dict[str, Any] | None]:
    """A weighted fit's noise scale bounded below by the scatter about the law (issue 53): with S^2 > 1 (the law
    misses its points by more than seed noise, or a sigma from few repeats came out small) every row's sigma is
    multiplied by S and the fit refined there (Huber's threshold is then on the scatter's scale, not on a sigma
    the data contradict), and the profile's reference becomes F(1, G - p), the scatter's degrees of freedom;
    with S^2 <= 1 the seed sigma stands, its reference F(1, dof_seed + G - p) (both estimate it). Returns the
    state to continue from and what was done (None for an unweighted fit, whose scale is its residuals')."""
    data = state.data
    if data.sigma is None:
        return state, None
    s2, dof_scatter = scatter_about_law(state)
    seed_dof = data.sigma_dof or 0
    groups = data.noise_group
    n_groups = len(data) if groups is None else int(groups.max()) + 1
    info = {"lack_of_fit": s2, "scatter_dof": dof_scatter, "seed_dof": seed_dof, "groups": n_groups, "rows": len(data)}
    if not s2 > 1:
        info.update(scale=1.0, source="seed sigma", reference_dof=seed_dof + dof_scatter)
        return replace(state, data=replace(data, sigma_dof=seed_dof + dof_scatter)), info
    scale = float(np.sqrt(s2))
    info.update(scale=scale, source="scatter about the law", reference_dof=dof_scatter)
    law, loss = state.law, state.loss
    data = replace(data, sigma=data.sigma * scale, sigma_dof=dof_scatter)
    theta = newton(law, data, loss, state.best.theta)[0] if law.has_hessian else state.best.theta
    best = min((refine(t, law, data, loss) for t in (theta, state.best.theta)), key=lambda r: r.objective)
    refined = [replace(r, objective=objective(r.theta, law, data, loss)) for r in state.refined]
    return FitState(law, data, loss, best, state.starts, refined), info


TAIL_Z = 2.0  # excess kurtosis beyond this many standard errors (sqrt(24 / n)) counts as heavy tails


def residual_tails(state: FitState) -> dict[str, Any]:
    """The tails of a fit's residuals (standardised by the fit's scale, or by their RMS without one): the excess
    kurtosis k, its standard error sqrt(24 / n) under normality, and the Student-t degrees of freedom with that
    kurtosis, 4 + 6 / k, where k exceeds TAIL_Z standard errors (else None: Gaussian). What `loopscale power`
    draws a pilot's noise from."""
    res = state.law.log_predict(state.best.theta, state.data) - state.data.log_L
    z = res if state.data.sigma is None else res / state.data.sigma
    z = z - z.mean()
    k = float(np.mean(z**4) / np.mean(z**2) ** 2 - 3) if np.any(z) else 0.0
    se = float(np.sqrt(24 / len(z)))
    t_dof = float(max(4.2, 4 + 6 / k)) if k > TAIL_Z * se else None
    return {"excess_kurtosis": k, "se": se, "t_dof": t_dof}


def point_misfit(state: FitState, point: np.ndarray, seed_sigma: np.ndarray | None) -> float | None:
    """The law's misfit at a point, in log L: the standard deviation tau of a shift shared by the point's runs, from
    a one-way analysis of the residuals (Var of a point's mean residual = tau^2 + sigma^2 / n_g): tau^2 =
    sum_g rbar_g^2 / (G - p) - mean_g sigma_g^2 / n_g, at least 0 (G points, p parameters; sigma: the seed sigma
    per row). In a forked sweep a point's seeds are different parents, so a parent's shared noise is seed noise
    here, not misfit. None without a seed sigma (one run a point cannot tell misfit from seed noise)."""
    if seed_sigma is None:
        return None
    res = state.law.log_predict(state.best.theta, state.data) - state.data.log_L
    n_g = np.bincount(point)
    rbar = np.bincount(point, weights=res) / n_g
    var_mean = np.bincount(point, weights=seed_sigma**2) / n_g**2
    G = len(n_g)
    tau2 = np.sum(rbar**2) / max(1, G - state.law.n_params) - np.mean(var_mean)
    return float(np.sqrt(max(0.0, tau2)))


def parent_share(state: FitState, draws: np.ndarray | None, sigma: np.ndarray | None) -> float | None:
    """The share rho of a run's noise variance that a forked job's branches share, from the fit's residuals, in
    [0, 1]; None without a job of two branches (draws None: an unforked table).

    The statistic is the sum of cross products of two branches' standardised residuals, c = z^T Q z (z = r /
    sigma, sigma per row the seed sigma: the variance of a run's whole noise, or the residuals' RMS without one;
    Q_ij = 1 for two rows of one job). A job's branches sit at different points, so the law's misfit,
    independent across points, does not enter it. A fit absorbs part of what jobs share (a job's offset moves
    the law's A, alpha), so the raw mean cross product comes out low (measured: 0.43 for a true 0.5 on the
    demo's forked design); with the fit linearised, residuals z = P u (P = I - H, H the hat matrix of the
    Jacobian in z units) and u of covariance (1 - rho) I + rho (Q + I), E c = (1 - rho) tr(Q P) + rho
    tr(Q P (Q + I) P), linear in rho: solved for it (a method of moments, as REML corrects a variance for the
    fitted mean)."""
    if draws is None:
        return None
    same = draws[:, None] == draws[None, :]
    Q = same.astype(float) - np.eye(len(draws))
    if not Q.any():
        return None
    theta = state.best.theta
    res = state.law.log_predict(theta, state.data) - state.data.log_L
    scale = np.sqrt(np.mean(res**2)) if sigma is None else sigma
    z = res / scale
    _, J = state.law.log_predict_and_jac(theta, state.data)
    Jz = J / np.broadcast_to(scale, res.shape)[:, None]
    P = np.eye(len(z)) - Jz @ np.linalg.pinv(Jz)
    QP = Q @ P
    at_0, at_1 = np.trace(QP), np.trace(QP @ (Q + np.eye(len(z))) @ P)
    if not at_1 - at_0 > 0:
        return None
    return float(np.clip((z @ Q @ z - at_0) / (at_1 - at_0), 0.0, 1.0))


def with_parent_share(noise, share: float | None):
    """The fit record's noise block with the parent share (`parent_share`) where the table is forked: what `loopscale
    power` draws from a forked pilot; an unforked table's block as it was."""
    return noise if share is None else noise.replace(parent_share=share)


def fit_on_its_scale(result, state: FitState, point=None) -> tuple[FitState, dict[str, Any] | None]:
    """`scale_to_scatter` on a fit, its record (`FitResult`, in place) moved to the refined optimum; with the
    table's point ids, the law's misfit at a point (`point_misfit`) joins what was done."""
    seed_sigma = state.data.sigma
    state, info = scale_to_scatter(state)
    if info is not None and info["scale"] > 1:
        res = state.law.log_predict(state.best.theta, state.data) - state.data.log_L
        result.params = state.law.to_user(state.best.theta)
        result.objective, result.grad_norm = state.best.objective, state.best.grad_norm
        result.residual_rms_log = float(np.sqrt(np.mean(res**2)))
    if info is not None and point is not None:
        info["misfit_log"] = point_misfit(state, np.asarray(point), seed_sigma)
    return state, info
