"""Fitting one law: refinement of the screened starts and the multi-start fit (docs/design.md, "Fitting").

L-BFGS-B with analytic gradients and tight tolerances refines the best starts (`loopscale.fit.starts`).
Default L-BFGS-B tolerances are relative to max(|f|, 1) and the objective here (`loopscale.fit.objective`)
is ~1e-3, so they stop far from the optimum (this is how the published Chinchilla fit ended near its
starting grid); we use ftol = 1e-15 and gtol = 1e-12. Before L-BFGS-B, many starts (or bootstrap
replicates) go through one batched Levenberg-Marquardt pass (`lm_batch`), or exact Newton steps
(`newton`) where the law has an analytic Hessian. The refined optimum with the lowest objective wins,
and `n_best_basin` counts refined starts that ended at the same optimum (`same_basin`).
`fit_law` returns the record (`loopscale.fit.result.FitResult`) and the state the uncertainty steps
(`loopscale.fit.uncertainty`) continue from.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
from scipy.optimize import minimize

from loopscale.fit.bounds import bounds_for, clip_to_bounds
from loopscale.fit.laws.form import Law, LawData
from loopscale.fit.laws.registry import law_class, warm_law
from loopscale.fit.objective import (
    Loss,
    chunk_size,
    objective,
    objective_and_grad,
    objective_grad_hess,
    residuals,
    scaled_jacobian,
)
from loopscale.fit.record_blocks import Settings
from loopscale.fit.result import FitResult
from loopscale.fit.starts import SCREEN_ROWS, screen_starts, screen_subsample

# L-BFGS-B settings: see module docstring for why the tolerances are this tight.
LBFGSB_OPTIONS = {"ftol": 1e-15, "gtol": 1e-12, "maxiter": 20000, "maxfun": 40000, "maxls": 50}
# Two refined starts are "in the same basin" when their exponents (alpha, beta, phi, ...) agree to
# EXPONENT_TOL and their objectives agree to BASIN_REL_TOL relative, or to BASIN_ABS_TOL per row
# absolute: on exact data the optimum is ~1e-30 and a relative gap to it means nothing (1e-24 and
# 1e-30 are the same fit), while 1e-12 per row is a log residual of ~1e-6, far below any real noise.
BASIN_REL_TOL = 1e-6
BASIN_ABS_TOL = 1e-12
EXPONENT_TOL = 1e-3
# On a big table, a start whose subsample optimum has more than this times the best subsample
# objective is not finished on all rows (`multistart`).
FINISH_RATIO = 2.0
# Warn when fewer than this share of refined starts reach the best basin.
SMALL_BASIN_SHARE = 0.2


# ----------------------------------------------------------------------------------------------
# Refinement of one start, or of many at once
# ----------------------------------------------------------------------------------------------
@dataclass
class Refined:
    theta: np.ndarray
    objective: float
    grad_norm: float
    n_iter: int
    message: str
    grad: np.ndarray | None = None  # gradient at theta (all coordinates, pinned ones included)


def refine(theta0, law: Law, data: LawData, loss: Loss, weights=None, bounds=None) -> Refined:
    """L-BFGS-B from theta0 with analytic gradients and tight tolerances."""
    res = minimize(
        objective_and_grad,
        np.asarray(theta0, dtype=float),
        jac=True,
        method="L-BFGS-B",
        args=(law, data, loss, weights),
        bounds=bounds or bounds_for(law),
        options=LBFGSB_OPTIONS,
    )
    _, g = objective_and_grad(res.x, law, data, loss, weights)
    return Refined(res.x, float(res.fun), float(np.linalg.norm(g)), int(res.nit), str(res.message), g)


def lm_batch(
    law: Law,
    data: LawData,
    loss: Loss,
    thetas: np.ndarray,
    weights=None,
    fixed: np.ndarray | None = None,
    max_iter: int = 400,
    rel_tol: float = 1e-13,
):
    """Many independent fits at once by a batched Levenberg-Marquardt on the IRLS model.

    Each problem m minimises sum_i W[m, i] rho(res_i(theta_m)). The quadratic model uses the IRLS
    curvature J^T diag(W psi(res)/res) J, which majorises the Huber loss (psi(x)/x is non-increasing
    in |x|), plus Marquardt damping; a step is kept only if it lowers that problem's objective.
    `fixed` marks coordinates held at their start value (the phi profile). Returns (thetas, f).
    Used for bootstrap replicates and profiles, where thousands of small fits make a per-fit
    scipy call (~0.2 ms of overhead per evaluation) the bottleneck; results are then polished by
    `refine` so every reported optimum meets the same L-BFGS-B tolerances.
    """
    thetas = np.array(thetas, dtype=float)
    M, P = thetas.shape
    chunk = chunk_size(len(data), 3 * P + 8, cap=M)  # J, J * curv, ... per problem: bounded memory
    if chunk >= M:
        return _lm_pass(law, data, loss, thetas, weights, fixed, max_iter, rel_tol)
    out = [
        _lm_pass(
            law,
            data,
            loss,
            thetas[i : i + chunk],
            None if weights is None else np.asarray(weights)[i : i + chunk],
            fixed,
            max_iter,
            rel_tol,
        )
        for i in range(0, M, chunk)
    ]
    return np.vstack([t for t, _ in out]), np.concatenate([f for _, f in out])


def _lm_pass(
    law: Law, data: LawData, loss: Loss, thetas: np.ndarray, weights, fixed, max_iter: int, rel_tol: float
) -> tuple[np.ndarray, np.ndarray]:
    """`lm_batch` on problems few enough for one vectorised pass; `thetas` (M, P) is updated in place."""
    M, P = thetas.shape
    W = np.ones((M, len(data))) if weights is None else np.asarray(weights, dtype=float)
    lo, hi = np.array(bounds_for(law)).T
    free = np.ones(P, bool) if fixed is None else ~np.asarray(fixed, bool)
    lam = np.full(M, 1e-3)
    f = (loss.rho(residuals(law.log_predict_batch(thetas, data), data)) * W).sum(axis=1)
    active = np.isfinite(f)
    eye = np.eye(P)
    for _ in range(max_iter):
        idx = np.flatnonzero(active)
        if len(idx) == 0:
            break
        log_pred, J = law.log_predict_and_jac_batch(thetas[idx], data)
        J = scaled_jacobian(J, data) * free  # fixed coordinates get no step
        res = residuals(log_pred, data)
        Wi = W[idx]
        g = np.matmul((Wi * loss.psi(res))[:, None, :], J)[:, 0, :]
        if loss.kind == "l2":
            curv = Wi
        else:
            curv = Wi * np.minimum(1.0, loss.delta / np.maximum(np.abs(res), 1e-300))
        H = np.matmul(J.transpose(0, 2, 1), J * curv[:, :, None])
        diag = np.einsum("mpp->mp", H)
        scale = diag.max(axis=1, keepdims=True)
        damp = lam[idx, None] * (diag + 1e-12 * scale) + (~free) * 1.0
        A = H + damp[:, :, None] * eye
        try:
            step = -np.linalg.solve(A, g[..., None])[..., 0]
        except np.linalg.LinAlgError:
            step = -np.einsum("mpq,mq->mp", np.linalg.pinv(A), g)
        trial = np.clip(thetas[idx] + step, lo, hi)
        f_trial = (loss.rho(residuals(law.log_predict_batch(trial, data), data)) * Wi).sum(axis=1)
        ok = np.isfinite(f_trial) & (f_trial < f[idx])
        small = ok & (f[idx] - f_trial <= rel_tol * np.abs(f[idx]))
        thetas[idx[ok]] = trial[ok]
        f[idx[ok]] = f_trial[ok]
        lam[idx[ok]] = np.maximum(lam[idx[ok]] / 3, 1e-12)
        lam[idx[~ok]] *= 4
        active[idx[small | (lam[idx] > 1e10)]] = False
    return thetas, f


def newton(
    law: Law,
    data: LawData,
    loss: Loss,
    theta0,
    fixed: np.ndarray | None = None,
    weights=None,
    max_iter: int = 100,
    rel_tol: float = 1e-14,
) -> tuple[np.ndarray, float]:
    """Minimise the objective from theta0 (coordinates in `fixed` held) by exact Newton steps,
    falling back to an LM step on the IRLS curvature where Newton's fails.

    The IRLS curvature of `lm_batch` majorises the Huber loss, so LM converges only linearly (about
    0.4 per step here: ~30 steps to 1e-13); the exact Hessian (`objective_grad_hess`) converges
    quadratically near an optimum: a handful of steps from a warm start. Each iteration tries the
    Newton step (H s = -g on the free coordinates, clipped to the bounds) when H is positive
    definite there, and keeps it if it lowers the objective; else it takes LM steps (IRLS curvature
    plus lam diag, lam divided by 3 on success, times 4 on failure) until one lowers it. A
    coordinate on its bound whose gradient points outward (or is zero: a term that has vanished)
    is held there, as in L-BFGS-B's active set. Stops when Newton's predicted decrease g^T s / 2,
    or an LM step's actual decrease, falls below rel_tol * f. Returns (theta, f); callers polish
    with `refine`. Kept as one loop (about 60 lines): the Newton attempt and the LM retries share the
    damping lam, the evaluation count and the stopping tests, and read as the steps above in order.
    """
    lo, hi = np.array(bounds_for(law)).T
    free = np.ones(law.n_params, bool) if fixed is None else ~np.asarray(fixed, bool)
    theta = np.clip(np.array(theta0, dtype=float), lo, hi)
    f, g, H, H_irls = objective_grad_hess(theta, law, data, loss, weights)
    lam = 1e-3
    n_eval = 0
    while np.isfinite(f) and n_eval < max_iter:
        # active set: a coordinate on its bound stays there unless the gradient points inside
        stuck = ((theta <= lo) & (g >= 0)) | ((theta >= hi) & (g <= 0))
        move = free & ~stuck
        gf = g[move]
        step = _cholesky_step(H[np.ix_(move, move)], gf)
        if step is not None:
            if -0.5 * gf @ step <= rel_tol * abs(f):
                break
            trial = _stepped(theta, move, step, lo, hi)
            f_trial = objective(trial, law, data, loss, weights)
            n_eval += 1
            if not (np.isfinite(f_trial) and f_trial < f):
                step = None
        if step is None:  # LM on the IRLS curvature until a step lowers the objective
            Hf = H_irls[np.ix_(move, move)]
            diag = np.diag(Hf)
            while n_eval < max_iter and lam <= 1e10:
                step = _cholesky_step(Hf + np.diag(lam * (diag + 1e-12 * diag.max())), gf)
                trial = _stepped(theta, move, step, lo, hi) if step is not None else theta
                f_trial = objective(trial, law, data, loss, weights)
                n_eval += 1
                if np.isfinite(f_trial) and f_trial < f:
                    lam = max(lam / 3, 1e-12)
                    break
                lam *= 4
            else:
                break
            if f - f_trial <= rel_tol * abs(f):
                theta, f = trial, f_trial
                break
        theta = trial
        f, g, H, H_irls = objective_grad_hess(theta, law, data, loss, weights)
    return theta, f


def _cholesky_step(H: np.ndarray, g: np.ndarray) -> np.ndarray | None:
    """-H^-1 g by Cholesky, or None where H is not (numerically) positive definite."""
    try:
        chol = np.linalg.cholesky(H)
    except np.linalg.LinAlgError:
        return None
    step = -np.linalg.solve(chol.T, np.linalg.solve(chol, g))
    return step if np.all(np.isfinite(step)) else None


def _stepped(theta: np.ndarray, move: np.ndarray, step: np.ndarray, lo, hi) -> np.ndarray:
    trial = theta.copy()
    trial[move] += step
    return np.clip(trial, lo, hi)


# ----------------------------------------------------------------------------------------------
# Multi-start
# ----------------------------------------------------------------------------------------------
def same_basin(a: Refined, best: Refined, law: Law, n_rows: int = 1) -> bool:
    """Same optimum: the exponents agree to EXPONENT_TOL and the objectives to BASIN_REL_TOL
    relative or BASIN_ABS_TOL per row absolute (an exact fit's ~1e-30 optimum has no relative scale)."""
    exps = [i for i, n in enumerate(law.internal_names) if n not in ("e", "a", "b")]
    gap = a.objective - best.objective
    close_f = gap <= max(BASIN_REL_TOL * best.objective, BASIN_ABS_TOL * n_rows)
    return bool(close_f and np.max(np.abs(a.theta[exps] - best.theta[exps])) <= EXPONENT_TOL)


def multistart(law: Law, data: LawData, loss: Loss, starts: np.ndarray, weights=None):
    """Refine every start; return (best, list of all refined).

    The starts first go through one batched LM pass (`lm_batch`), then each is finished by
    L-BFGS-B to the tight tolerances; from a converged LM point that takes a handful of steps, so
    the reported optimum and gradient norm are L-BFGS-B's.

    On a big unweighted table the LM pass runs on `screen_subsample` first. Starts that reach the
    same point there are one start from then on. A distinct point whose subsample objective is more
    than FINISH_RATIO times the best one's is in another basin (a 1024-row subsample estimates the
    mean loss per row to a few percent): it is not finished on all rows, and enters the list with
    its objective on all rows, unrefined (n_iter 0, grad_norm NaN), so it counts outside the best
    basin as a finished one would; finishing such points (L-BFGS-B crawls hundreds of iterations
    along their flat valleys, e.g. towards E = 0) was most of a big table's fit time. The other
    points go on to all rows by exact Newton (`newton`, where the law has an analytic Hessian;
    LM's linear convergence costs tens of full-table passes per start there), then L-BFGS-B.
    """
    starts = np.asarray(starts, dtype=float)
    if weights is None and len(data) > SCREEN_ROWS:
        starts, f_sub = lm_batch(law, screen_subsample(data), loss, starts)
        exps = [i for i, n in enumerate(law.internal_names) if n not in ("e", "a", "b")]
        key = np.column_stack(
            [np.round(starts[:, exps] / (0.1 * EXPONENT_TOL)), np.round(np.log(np.maximum(f_sub, 1e-300)), 6)]
        )
        _, first, which = np.unique(key, axis=0, return_index=True, return_inverse=True)
        f_first = f_sub[first]
        # the absolute floor keeps an exact fit's 1e-25 and 1e-30 (the same optimum) together
        finish = f_first <= FINISH_RATIO * np.nanmin(f_first) + BASIN_ABS_TOL * SCREEN_ROWS
        if law.has_hessian:
            moved = [newton(law, data, loss, s)[0] if go else s for s, go in zip(starts[first], finish)]
        else:
            moved = starts[first].copy()
            moved[finish] = lm_batch(law, data, loss, starts[first][finish])[0]
        distinct = [
            refine(s, law, data, loss)
            if go
            else Refined(
                s,
                objective(s, law, data, loss),
                float("nan"),
                0,
                "not finished on all rows: another basin on the subsample",
            )
            for s, go in zip(moved, finish)
        ]
        refined = [distinct[k] for k in np.ravel(which)]
        return min((d for d, go in zip(distinct, finish) if go), key=lambda x: x.objective), refined
    W = None if weights is None else np.tile(weights, (len(starts), 1))
    moved, _ = lm_batch(law, data, loss, starts, W)
    refined = [refine(s, law, data, loss, weights) for s in moved]
    best = min(refined, key=lambda x: x.objective)
    return best, refined


# ----------------------------------------------------------------------------------------------
# The main fit
# ----------------------------------------------------------------------------------------------
@dataclass
class FitState:
    """What a fit keeps for its uncertainty steps: the law, data, loss, best optimum, best starts."""

    law: Law
    data: LawData
    loss: Loss
    best: Refined
    starts: np.ndarray  # screened starts that were refined (best first per family)
    refined: list = field(default_factory=list)  # every refined start (Refined), to count the best basin


def fit_law(
    data: LawData,
    law_name: str | Law = "looped",
    loss: Loss | None = None,
    seed: int = 0,
    n_refine: int = 16,
    starts: np.ndarray | None = None,
) -> tuple[FitResult, FitState]:
    """Fit one law to data with the global multi-start strategy. Returns (result, state).

    A law with a `warm_start` law (looped-free: the looped law) starts from that law's optimum
    (`Law.warm_starts`: k_r = r^phi_hat, k_r = 1 and k_r = r) instead of screening starts. A per-recipe law
    is passed as a `Law` (it carries its recipe names). `starts` (internal coordinates, one per row): refine
    these instead of screening (the fast path of simulations that fit many sweeps of one design: the starts
    screened once on its noise-free table, as `loopscale power` and the calibration benchmark do).
    """
    loss = loss or Loss()
    law = law_name if isinstance(law_name, Law) else law_class(law_name).for_data(data)
    rng = np.random.default_rng(seed)
    if starts is not None:
        starts = clip_to_bounds(np.atleast_2d(np.asarray(starts, dtype=float)), law)
        n_screened = len(starts)
    elif law.warm_start is not None:
        base_result, base_state = fit_law(data, warm_law(law, data.r), loss, seed, n_refine)
        starts = clip_to_bounds(law.warm_starts(base_state.best.theta), law)
        n_screened = base_result.n_starts + len(starts)
    else:
        starts, n_screened = screen_starts(law, data, loss, n_refine, rng)
    best, refined = multistart(law, data, loss, starts)
    n_basin, notes = _optimum_notes(best, refined, law, len(data))
    res = law.log_predict(best.theta, data) - data.log_L
    result = FitResult(
        law=law.name,
        params=law.to_user(best.theta),
        objective=best.objective,
        grad_norm=best.grad_norm,
        n_starts=n_screened,
        n_refined=len(refined),
        n_best_basin=n_basin,
        settings=Settings(
            loss=loss.kind,
            delta=loss.delta if loss.kind == "huber" else None,
            n_refine=n_refine,
            optimizer="L-BFGS-B",
            **{f"lbfgsb_{k}": v for k, v in LBFGSB_OPTIONS.items()},
        ),
        seed=seed,
        n_rows=len(data),
        warnings=notes,
        residual_rms_log=float(np.sqrt(np.mean(res**2))),
    )
    return result, FitState(law, data, loss, best, starts, refined)


def _optimum_notes(best: Refined, refined: list, law: Law, n_rows: int) -> tuple[int, list[str]]:
    """(refined starts in the best basin, the warnings about the optimum: few starts reached it, an
    exponent on its bound)."""
    n_basin = sum(same_basin(r, best, law, n_rows) for r in refined)
    notes = []
    if n_basin / len(refined) < SMALL_BASIN_SHARE:
        notes.append(
            f"only {n_basin} of {len(refined)} refined starts reached the best optimum: "
            "the objective has competing minima; treat the estimate with care"
        )
    return n_basin, notes + _boundary_notes(best.theta, law)


def adopt_optimum(result: FitResult, state: FitState, best: Refined, note: str) -> FitState:
    """A lower optimum found after the multi-start (by a profile): `result` (in place) and the returned
    state take it; the warnings about the old optimum are replaced by the new one's, and `note` says why."""
    law, data = state.law, state.data
    _, old_notes = _optimum_notes(state.best, state.refined, law, len(data))
    n_basin, notes = _optimum_notes(best, state.refined, law, len(data))
    res = law.log_predict(best.theta, data) - data.log_L
    result.params = law.to_user(best.theta)
    result.objective, result.grad_norm, result.n_best_basin = best.objective, best.grad_norm, n_basin
    result.residual_rms_log = float(np.sqrt(np.mean(res**2)))
    result.warnings = [w for w in result.warnings if w not in old_notes] + notes + [note]
    return replace(state, best=best)


def _boundary_notes(theta, law: Law) -> list[str]:
    notes = []
    for name, value, (lo, hi) in zip(law.internal_names, theta, bounds_for(law)):
        if name in ("alpha", "beta", "phi") and (value <= lo + 1e-9 or value >= hi - 1e-9):
            notes.append(f"{name} = {value:.4g} sits on its bound [{lo}, {hi}]")
    return notes
