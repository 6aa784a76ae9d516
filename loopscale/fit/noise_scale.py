"""The scale a fit's intervals are on (issue 53): a seed sigma bounded below by the scatter about the law, the
degrees of freedom behind it, and what a pilot shows of its noise beyond seed noise (docs/design.md, "The noise
model: seeds as data").

- `scatter_about_law`: S^2 from squared standardised residuals summed within dependence groups (unbounded);
- `scale_to_scatter` / `fit_on_its_scale`: sigma x S where S^2 > 1, the fit refined there, the reference F(1, nu);
- `reference_quantile` (`cluster_se`'s, re-exported): chi2_1 or F(1, nu), the profile's threshold's 95% point;
- `parameter_scale` / `pooled_scale_moments`: one parameter's cluster-robust scale, and the pooled sum's expectation
  under independent noise with the fit's leverage (a curve law's profile), each with Satterthwaite's nu;
- `residual_tails`, `point_misfit`, `parent_share`: the residuals' kurtosis, the law's misfit at a point and the
  share of a run's noise a forked job's branches share, with its standard error (what `power` draws);
- `residual_units`: the standardised residuals themselves, seed-level and point-level, as the unit-variance pools
  `power` resamples (heavy tails without a significance gate: `pilot.unit_draws`).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from scipy.stats import chi2
from scipy.stats import f as f_dist

# the reference (chi2_1, F(1, nu)) lives below `curve_worth`, which reads it too; re-exported for the fit's readers
from loopscale.fit.cluster_se import CHI2_1_95 as CHI2_1_95
from loopscale.fit.cluster_se import independent_moments
from loopscale.fit.cluster_se import reference_quantile as reference_quantile
from loopscale.fit.curve_worth import with_curve_noise
from loopscale.fit.noise import draw_groups
from loopscale.fit.objective import objective, residuals, scaled_jacobian
from loopscale.fit.optimize import FitState, newton, refine
from loopscale.fit.record_blocks import Scale, Tails, Units


def reference_p_value(statistic: float, dof: float | None) -> float:
    """The likelihood-ratio statistic's p-value on the reference `reference_quantile` bounds the interval with (the
    same whole degrees of freedom: a Satterthwaite nu_k of 8.04 is read as 8 by both, so a value at the
    interval's end has p = 0.05, not 0.0498)."""
    if dof is None or not np.isfinite(dof):
        return float(chi2.sf(statistic, 1))
    return float(f_dist.sf(statistic, 1, max(1, int(dof))))


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


def parameter_scale(state: FitState, name: str) -> tuple[float, float] | None:
    """(S_k^2, nu_k): the scatter about the law as parameter `name`'s estimate sees it, and its degrees of freedom;
    None where no dependence group spans two points (single rows, or a point's seeds: `_groups_span_points`), where
    `scatter_about_law`'s pooled S^2 stands.

    `scatter_about_law` sums a group's residuals with equal weights, the design effect of the parameters' common
    direction; a parameter's estimate weighs the rows by its own influence, w = e_k^T (J^T J)^-1 J^T (J the
    Jacobian of the objective's residuals: the least-squares linearisation), and a dependence that shifts the
    rows of a group together moves it only as far as w's sum over that group. The cluster-robust (sandwich)
    variance of theta_k over its model variance under independent unit noise is then

        S_k^2 = sum_g (sum_{i in g} w_i x_i)^2 / tr(P C P),   C = sum_g w_g w_g^T,  P = I - J (J^T J)^-1 J^T

    (x: the standardised residuals z, unbounded, or psi of the log residuals without a seed sigma): the
    adjusted profile likelihood's factor (Royall & Tsou 2003; Chandler & Bate 2007), its denominator the
    numerator's expectation under independent noise with the fitted residuals' leverage (exactly unbiased there,
    the bias reduction of Bell & McCaffrey 2002). With ~16 groups S_k^2 is itself noisy: its degrees of freedom
    are Satterthwaite's for a quadratic form, nu_k = tr(P C P)^2 / tr((P C P)^2), the reference F(1, nu_k)."""
    law, data = state.law, state.data
    groups = data.noise_group
    if groups is None or not _groups_span_points(data, groups):
        return None
    log_pred, J = law.log_predict_and_jac(state.best.theta, data)
    x = residuals(log_pred, data)
    if data.sigma is None:
        x = state.loss.psi(x)
    g = scaled_jacobian(J, data)  # (n, p)
    bread = np.linalg.pinv(g.T @ g)
    w = (bread @ g.T)[law.internal_names.index(name)]  # (n,) row i's pull on theta_k
    W = w[:, None] * np.eye(int(groups.max()) + 1)[groups]  # (n, G): column g is w on group g's rows
    moments = independent_moments(g, bread, W)
    if moments is None:
        return None
    expected, nu = moments
    return float(np.sum((W.T @ x) ** 2) / expected), nu


def pooled_scale_moments(state: FitState) -> tuple[float, float] | None:
    """(E, nu): the expectation under independent unit noise of the pooled scale's numerator sum_g (sum_{i in g}
    x_i)^2 (x: residuals after the fit, or their psi), and its Satterthwaite degrees of freedom; None where no
    dependence group spans two points (single rows, or a point's seeds: `_groups_span_points`), where the
    n (G - p) / G and G - p of `scatter_about_law` and the unweighted profile threshold stand (exact for single
    rows, n - p and Student's n - p).

    With x = P u (P = I - H, the fit's least-squares projection) and C the block matrix of ones over each group,
    E = tr(P C P) = sum_g 1' (I - H)_gg 1 and nu = E^2 / tr((P C P)^2): `parameter_scale`'s quadratic form with
    w = 1 (Bell & McCaffrey 2002's bias reduction of the cluster-robust variance). n (G - p) / G is E when every
    parameter moves whole groups (a Jacobian constant within each of G equal groups: each parameter takes one
    group's worth of the sum); a curve law's parameters mostly move the rows within a curve (its schedule terms
    and the shape along it), so they take far less of the group sums: on the tuned demo's curves (16 parents,
    635 rows, 8 parameters) E = 441.5 where n (G - p) / G = 317.5, nu = 11.1 for G - p = 8."""
    data = state.data
    groups = data.noise_group
    if groups is None or not _groups_span_points(data, groups):
        return None
    _, J = state.law.log_predict_and_jac(state.best.theta, data)
    g = scaled_jacobian(J, data)  # (n, p)
    bread = np.linalg.pinv(g.T @ g)
    return independent_moments(g, bread, np.eye(int(groups.max()) + 1)[groups])


def _groups_span_points(data, groups: np.ndarray) -> bool:
    """Whether a dependence group holds runs of two or more points (a forked job's branches, a curve's
    evaluations). Groups that are each one point's seeds share only the law's misfit there, a shift of that point
    alone: the same design effect for every parameter with equal seeds a point, which the pooled S^2 measures from
    more degrees of freedom than any one parameter's sandwich."""
    recipe = np.zeros(len(data)) if data.recipe is None else data.recipe
    keys = np.column_stack([data.N_once, data.N_rec, data.r, data.D, recipe])
    point = np.unique(keys, axis=0, return_inverse=True)[1].ravel()
    points_per_group = np.bincount(np.unique(np.column_stack([groups, point]), axis=0)[:, 0])
    return bool(points_per_group.max() > 1)


def scale_to_scatter(state: FitState) -> tuple[FitState, Scale | None]:
    """A weighted fit's noise scale bounded below by the scatter about the law (issue 53): with S^2 > 1 (the law
    misses its points by more than seed noise, or a sigma from few repeats came out small) every row's sigma is
    multiplied by S and the fit refined there (Huber's threshold is then on the scatter's scale, not on a sigma
    the data contradict), and the profile's reference becomes F(1, G - p), the scatter's degrees of freedom;
    with S^2 <= 1 the seed sigma stands, its reference F(1, dof_seed + G - p) (both estimate it). Returns the
    state to continue from and what was done (None for an unweighted fit, whose scale is its residuals')."""
    data = state.data
    if data.sigma is None or data.sigma_estimated:  # a position sigma's scale is the profile's own (`position_sigma`)
        return state, None
    s2, dof_scatter = scatter_about_law(state)
    seed_dof = data.sigma_dof or 0
    groups = data.noise_group
    n_groups = len(data) if groups is None else int(groups.max()) + 1
    info = Scale(
        lack_of_fit=s2,
        scatter_dof=dof_scatter,
        seed_dof=seed_dof,
        groups=n_groups,
        rows=len(data),
        scale=1.0,
        source="seed sigma",
        reference_dof=seed_dof + dof_scatter,
    )
    if not s2 > 1:
        return replace(state, data=replace(data, sigma_dof=seed_dof + dof_scatter)), info
    scale = float(np.sqrt(s2))
    info.update(scale=scale, source="scatter about the law", reference_dof=dof_scatter)
    law, loss = state.law, state.loss
    data = replace(data, sigma=data.sigma * scale, sigma_dof=dof_scatter, sigma_scale=data.sigma_scale * scale)
    theta = newton(law, data, loss, state.best.theta)[0] if law.has_hessian else state.best.theta
    best = min((refine(t, law, data, loss) for t in (theta, state.best.theta)), key=lambda r: r.objective)
    refined = [replace(r, objective=objective(r.theta, law, data, loss)) for r in state.refined]
    return FitState(law, data, loss, best, state.starts, refined), info


TAIL_Z = 2.0  # excess kurtosis beyond this many standard errors (sqrt(24 / n)) counts as heavy tails


def residual_tails(state: FitState) -> Tails:
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
    return Tails(excess_kurtosis=k, se=se, t_dof=t_dof)


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


def parent_share(
    state: FitState, draws: np.ndarray | None, sigma: np.ndarray | None, point: np.ndarray | None = None
) -> tuple[float, float] | None:
    """(rho, its standard error): the share rho of a run's noise variance that a forked job's branches share, from
    the fit's residuals, in [0, 1]; None without a job of two branches (draws None: an unforked table).

    The statistic is the sum of cross products of two branches' standardised residuals, c = z^T Q z (z = r /
    sigma, sigma per row the seed sigma: the variance of a run's whole noise, or the residuals' RMS without one;
    Q_ij = 1 for two rows of one job). A job's branches sit at different points, so the law's misfit,
    independent across points, does not enter it. A fit absorbs part of what jobs share (a job's offset moves
    the law's A, alpha), so the raw mean cross product comes out low (measured: 0.43 for a true 0.5 on the
    demo's forked design); with the fit linearised, residuals z = P u (P = I - H, H the hat matrix of the
    Jacobian in z units) and u of covariance V = I + rho Q, E c = tr(Q P) + rho tr(Q P Q P), linear in rho:
    solved for it (a method of moments, as REML corrects a variance for the fitted mean). Its standard error is
    that of a ratio of Gaussian quadratic forms over the slope
    tr(Q P Q P), the scale's own uncertainty included (`_share_se`; point: the rows' point ids, whose seed
    repeats measured sigma): a pilot of a few jobs knows rho only roughly (sd over pilots 0.09-0.21), and
    `power` draws it per simulated sweep (`pilot.share_draw`)."""
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
    at_0, slope = np.trace(QP), np.trace(QP @ QP)
    if not slope > 0:
        return None
    rho = float(np.clip((z @ Q @ z - at_0) / slope, 0.0, 1.0))
    kappa = max(0.0, float(np.mean(z**4) / np.mean(z**2) ** 2 - 3))  # the residuals' excess kurtosis, no gate
    return rho, _share_se(P, draws, rho, slope, at_0, None if sigma is None else point, kappa)


def _share_se(P: np.ndarray, draws: np.ndarray, rho: float, slope: float, at_0: float, point, kappa: float) -> float:
    """The standard error of `parent_share`'s rho: c = a / d, a = u^T A u (A = P Q P) the cross products on sigma's
    scale, d = u^T W u / df the scale's own estimate (W: the within-point deviations of points with seed repeats,
    df their degrees of freedom; without a seed sigma the residuals' mean square, W = P, df = n). The noise as
    `power` draws it, u = M e, M = [sqrt(rho) G, sqrt(1 - rho) I] (G: a row's job), e independent of unit
    variance and excess kurtosis kappa: var(e^T B e) = 2 tr(B^2) + kappa sum_i B_ii^2, the covariance alike
    (B = M^T A M, M^T W M / df), and the delta method for the ratio, var c = var a / d^2 - 2 a cov(a, d) / d^3 +
    a^2 var d / d^4 at their expectations. The scale shares the jobs' noise with the cross products (a point's
    seeds are other jobs' branches), which narrows c: without it the standard error came out 1.7x the spread
    over pilots (demo, 3 seeds, Gaussian); without kappa 0.7x (2 seeds, Student-t 5)."""
    n = len(P)
    if point is None:
        W, df = P, float(n)
    else:
        point = np.asarray(point)
        same = point[:, None] == point[None, :]
        n_g = same.sum(axis=1)
        repeated = (n_g >= 2).astype(float)
        W = (np.eye(n) - same / n_g[:, None]) * repeated[:, None] * repeated[None, :]
        df = float(np.trace(W))
        if not df > 0:
            W, df = P, float(n)
    G = (draws[:, None] == np.unique(draws)[None, :]).astype(float)
    M = np.hstack([np.sqrt(rho) * G, np.sqrt(1 - rho) * np.eye(n)])
    Q = G @ G.T - np.eye(n)
    BA, BW = M.T @ (P @ Q @ P) @ M, M.T @ W @ M / df

    def cov(X, Y):
        return 2 * np.sum(X * Y) + kappa * np.sum(np.diag(X) * np.diag(Y))

    e_a, e_d = at_0 + rho * slope, float(np.trace(BW))
    var_c = cov(BA, BA) / e_d**2 - 2 * e_a * cov(BA, BW) / e_d**3 + e_a**2 * cov(BW, BW) / e_d**4
    return float(np.sqrt(max(var_c, 0.0)) / slope)


POOL_MIN = 8  # fewer standardised residuals than this: no pool (power draws Student-t where the kurtosis says so)
POOL_MAX = 400  # a longer pool is kept as this many of its quantiles (the record stays small; resampling is iid)


def _unit_pool(values: np.ndarray) -> list[float] | None:
    """Values centred and scaled to unit RMS, sorted (a long pool as POOL_MAX quantiles), rounded to 4 decimals;
    None for fewer than POOL_MIN or no spread."""
    v = values - values.mean()
    rms = float(np.sqrt(np.mean(v**2))) if len(v) else 0.0
    if len(v) < POOL_MIN or not rms > 0:
        return None
    v = np.sort(v / rms)
    if len(v) > POOL_MAX:
        v = np.quantile(v, (np.arange(POOL_MAX) + 0.5) / POOL_MAX)
    return [round(float(x), 4) for x in v]


def residual_units(state: FitState, point: np.ndarray | None) -> Units | None:
    """The fit's standardised residuals as the unit-variance pools `loopscale power` resamples (issue 53): the
    shape of the noise as the pilot shows it, with no test of whether its tails are heavy. "seed": a run's own
    noise, the deviations of a point's runs from their mean, each scaled by sqrt(n_g / (n_g - 1)) (points with
    seed repeats); "point": the points' mean residuals (the law's misfit there, with the seed noise its runs did
    not average away). Without seed repeats both are the residuals themselves (a run's whole noise, its split
    unknown). None when neither pool has POOL_MIN values."""
    res = state.law.log_predict(state.best.theta, state.data) - state.data.log_L
    z = res if state.data.sigma is None else res / state.data.sigma
    n_g = None if point is None else np.bincount(point)
    if n_g is None or not (n_g >= 2).any():
        pool = _unit_pool(z)
        return None if pool is None else Units(seed=pool, point=pool, n_seed=len(z), n_point=len(z))
    zbar = np.bincount(point, weights=z) / n_g
    repeated = n_g[point] >= 2
    dev = ((z - zbar[point]) * np.sqrt(n_g / np.maximum(n_g - 1, 1))[point])[repeated]
    seed, at_points = _unit_pool(dev), _unit_pool(zbar)
    if seed is None and at_points is None:
        return None
    return Units(seed=seed, point=at_points, n_seed=int(repeated.sum()), n_point=len(n_g))


def with_pilot_noise(noise, state: FitState, table, sigma: np.ndarray | None, point):
    """The fit record's noise block with what `loopscale power` draws from a pilot: the parent share and its
    standard error where the table is forked (`parent_share`, over the table's draws: `noise.draw_groups`), the
    residual pools (`residual_units`) and a curve law's noise along its curves (`curve_worth.with_curve_noise`)."""
    point = None if point is None else np.asarray(point)
    noise = with_curve_noise(noise, state, table)
    share = parent_share(state, draw_groups(table), sigma, point)
    if share is not None:
        noise = noise.replace(parent_share=share[0], parent_share_se=share[1])
    units = residual_units(state, point)
    return noise if units is None else noise.replace(units=units)


def fit_on_its_scale(result, state: FitState, point=None) -> tuple[FitState, Scale | None]:
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
