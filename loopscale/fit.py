"""Fitting a scaling law: robust log-space objective, global multi-start, bootstrap, profile, holdout.

Objective (Hoffmann et al. 2022, eq. 10 fitted in log space; Besiroglu et al. 2024):

    sum_i w_i * rho(log L_hat_i - log L_i),   rho = Huber(delta) (default delta = 1e-3) or 0.5 x^2

with w_i = 1 for a plain fit and bootstrap counts for a replicate. L-BFGS-B with analytic
gradients and tight tolerances refines the best starts. Default L-BFGS-B tolerances are relative to
max(|f|, 1) and the objective here is ~1e-3, so they stop far from the optimum (this is how the
published Chinchilla fit ended near its starting grid); we use ftol = 1e-15 and gtol = 1e-12.

Global strategy. The objective has many local minima and is ill-conditioned in (a, b) vs the
exponents. Two families of starts are screened in one vectorised numpy pass:
  1. the classic grid (a, b in {0, 5, ..., 25}, e in {-1, -0.5, ..., 1}, alpha, beta in
     {0, 0.5, ..., 2}, phi in {0, 0.5, 1} for the looped law) plus a few seeded random points;
  2. "exponent-projected" starts: for a grid of exponents (alpha, beta, phi) the law is linear in
     (E, A, B), so the best non-negative (E, A, B) for the relative error (L_hat - L) / L, which
     approximates the log residual, is a 3-variable NNLS solved exactly by enumerating supports.
The best starts of each family are refined; the refined optimum with the lowest objective wins,
and `n_best_basin` counts refined starts that ended at the same optimum.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import minimize

from .laws import Law, LawData, make_law

DEFAULT_DELTA = 1e-3
# L-BFGS-B settings: see module docstring for why the tolerances are this tight.
LBFGSB_OPTIONS = {"ftol": 1e-15, "gtol": 1e-12, "maxiter": 20000, "maxfun": 40000, "maxls": 50}
# Box for the internal coordinates (wide; only keeps exp() finite and exponents meaningful).
BOUNDS = {
    "e": (-10.0, 5.0),
    "a": (-10.0, 60.0),
    "b": (-10.0, 60.0),
    "alpha": (0.0, 5.0),
    "beta": (0.0, 5.0),
    "phi": (-1.0, 3.0),
}
LOG_K_BOUNDS = (-5.0, 5.0)
DPHI_BOUNDS = (-3.0, 3.0)  # phi_g - phi of the reference recipe (looped-joint)
# Two refined starts are "in the same basin" when their exponents (alpha, beta, phi, ...) agree to
# EXPONENT_TOL and their objectives agree to BASIN_REL_TOL relative, or to BASIN_ABS_TOL per row
# absolute: on exact data the optimum is ~1e-30 and a relative gap to it means nothing (1e-24 and
# 1e-30 are the same fit), while 1e-12 per row is a log residual of ~1e-6, far below any real noise.
BASIN_REL_TOL = 1e-6
BASIN_ABS_TOL = 1e-12
EXPONENT_TOL = 1e-3
# Elements (rows x starts x ...) one vectorised pass may hold: bounds memory on big tables
# (2^22 float64 = 32 MiB per array).
CHUNK_ELEMENTS = 1 << 22
# Tables with more rows than this (e.g. one row per logged evaluation, 10^5-10^6 rows) screen their
# ~15k starts, and pre-solve the refined ones, on a seeded random subsample of this many rows: the
# screen only ranks starting points, and its cost would otherwise grow as starts x rows. Every
# refinement and every reported number uses all rows. Sweep-sized tables are untouched.
SCREEN_ROWS = 1024
# On a big table, a start whose subsample optimum has more than this times the best subsample
# objective is not finished on all rows (`multistart`).
FINISH_RATIO = 2.0
# Warn when fewer than this share of refined starts reach the best basin.
SMALL_BASIN_SHARE = 0.2


# ----------------------------------------------------------------------------------------------
# Loss and objective
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Loss:
    """Per-residual loss: ``huber`` with threshold `delta` (in log units) or plain ``l2`` (0.5 x^2)."""

    kind: str = "huber"
    delta: float = DEFAULT_DELTA

    def __post_init__(self) -> None:
        if self.kind not in ("huber", "l2"):
            raise ValueError(f"loss must be 'huber' or 'l2'; got {self.kind!r}")
        if self.kind == "huber" and not (np.isfinite(self.delta) and self.delta > 0):
            raise ValueError(
                f"Huber delta must be a finite number > 0; got {self.delta} (use loss 'l2' for plain least squares)"
            )

    def rho(self, x: np.ndarray) -> np.ndarray:
        if self.kind == "l2":
            return 0.5 * x * x
        ax = np.abs(x)
        return np.where(ax <= self.delta, 0.5 * x * x, self.delta * (ax - 0.5 * self.delta))

    def psi(self, x: np.ndarray) -> np.ndarray:
        """d rho / d x."""
        return x if self.kind == "l2" else np.clip(x, -self.delta, self.delta)

    def psi_prime(self, x: np.ndarray) -> np.ndarray:
        return np.ones_like(x) if self.kind == "l2" else (np.abs(x) <= self.delta).astype(float)


def objective(theta, law: Law, data: LawData, loss: Loss, weights=None) -> float:
    """Sum of rho(log L_hat - log L), weighted by bootstrap counts when given."""
    res = law.log_predict(theta, data) - data.log_L
    r = loss.rho(res)
    return float(r.sum() if weights is None else weights @ r)


def objective_and_grad(theta, law: Law, data: LawData, loss: Loss, weights=None):
    """(objective, gradient in internal coordinates): grad = sum_i w_i psi(res_i) d log L_hat_i."""
    log_pred, J = law.log_predict_and_jac(theta, data)
    res = log_pred - data.log_L
    rho, psi = loss.rho(res), loss.psi(res)
    if weights is not None:
        rho, psi = weights * rho, weights * psi
    return float(rho.sum()), psi @ J


def chunk_size(n_rows: int, per_row: int = 1, cap: int = 2048) -> int:
    """How many problems (starts, replicates) one vectorised pass takes so that problems x rows x
    per_row stays within CHUNK_ELEMENTS: memory bounded whatever the table's size."""
    return int(max(1, min(cap, CHUNK_ELEMENTS // max(1, n_rows * per_row))))


def batch_objective(thetas: np.ndarray, law: Law, data: LawData, loss: Loss, chunk: int | None = None):
    """Objective at many parameter vectors (M, n_params) -> (M,), vectorised in chunks."""
    chunk = chunk or chunk_size(len(data), 4)
    out = np.empty(len(thetas))
    for lo in range(0, len(thetas), chunk):
        res = law.log_predict_batch(thetas[lo : lo + chunk], data) - data.log_L
        out[lo : lo + chunk] = loss.rho(res).sum(axis=1)
    return np.where(np.isfinite(out), out, np.inf)


def bounds_for(law: Law) -> list[tuple[float, float]]:
    return [BOUNDS.get(name, DPHI_BOUNDS if name.startswith("dphi[") else LOG_K_BOUNDS) for name in law.internal_names]


def _phi_axes(law: Law, values: np.ndarray) -> list[np.ndarray]:
    """Grid axes of the law's exponents beyond (alpha, beta): phi for looped; for looped-joint phi of
    the reference and dphi for the others, so the grid covers every recipe's phi in `values`
    (fewer values per recipe as recipes add up, to keep the product small)."""
    if law.name == "looped":
        return [values]
    if law.name != "looped-joint":
        return []
    k = len(law.recipes)
    per = values if k <= 2 else np.linspace(values.min(), values.max(), max(3, int(round(49 ** (1 / k)))))
    deltas = np.unique(np.round((per[:, None] - per[None, :]).ravel(), 12))
    return [per] + [deltas] * (k - 1)


# ----------------------------------------------------------------------------------------------
# Starts
# ----------------------------------------------------------------------------------------------
def classic_grid(law: Law) -> np.ndarray:
    """The classic grid (Hoffmann et al.; Besiroglu et al.), extended with phi in {0, 0.5, 1}."""
    axes = [
        np.linspace(-1, 1, 5),
        np.arange(0, 30, 5.0),
        np.linspace(0, 2, 5),
        np.arange(0, 30, 5.0),
        np.linspace(0, 2, 5),
    ]
    axes += _phi_axes(law, np.array([0.0, 0.5, 1.0]))[:1]
    grid = np.array(list(itertools.product(*axes)), dtype=float)
    if law.name == "looped-joint":  # every recipe starts at the shared phi; projected starts spread them
        grid = np.hstack([grid, np.zeros((len(grid), len(law.recipes) - 1))])
    return grid


def projected_starts(law: Law, data: LawData, n_exponent: int = 16) -> np.ndarray:
    """Exponent-grid starts with the best non-negative (E, A, B) solved in closed form.

    For fixed (alpha, beta, phi) the prediction E + A X + B Y (X = N_eff^-alpha, Y = D^-beta) is
    linear in (E, A, B); minimising sum ((pred - L) / L)^2, which approximates the log residual, is
    a 3-variable NNLS. Its solution is the best feasible least-squares solution over the 7 supports
    (subsets of {E, A, B}), so we solve all 7 for every exponent triple in one batched pass. The
    exponent grid goes through in chunks (`chunk_size`), so memory does not grow with rows x starts.
    """
    alphas = np.linspace(0.05, 1.2, n_exponent)
    betas = np.linspace(0.05, 1.2, n_exponent)
    phi_axes = _phi_axes(law, np.linspace(0.0, 1.2, 7))
    grid = np.array(list(itertools.product(alphas, betas, *phi_axes)))
    if law.name == "looped-joint":  # keep combinations whose every recipe phi lies in [0, 1.2]
        phis = grid[:, 2:3] + np.hstack([np.zeros((len(grid), 1)), grid[:, 3:]])
        grid = grid[np.all((phis >= -1e-9) & (phis <= 1.2 + 1e-9), axis=1)]
    w = 1.0 / data.L**2  # relative-error weights
    Y = np.exp(-betas[:, None] * data.log_D)  # (n_exponent, n): D^-beta for each beta on the grid
    G = np.empty((len(grid), 3, 3))
    h = np.empty((len(grid), 3))
    x_mean_max = 0.0
    chunk = chunk_size(len(data), 8)
    for lo in range(0, len(grid), chunk):
        g = grid[lo : lo + chunk]
        thetas = np.zeros((len(g), law.n_params))
        thetas[:, 5:] = g[:, 2:]
        log_n, _ = law.log_n_eff_batch(thetas, data, jac=False)
        X = np.exp(-g[:, 0:1] * log_n)
        Yc = Y[np.searchsorted(betas, g[:, 1])]
        Z = np.stack([np.ones_like(X), X, Yc], axis=2)  # (k, n, 3): columns E, A, B
        Zw = Z * w[None, :, None]
        G[lo : lo + chunk] = np.matmul(Zw.transpose(0, 2, 1), Z)
        h[lo : lo + chunk] = np.matmul(Zw.transpose(0, 2, 1), data.L[None, :, None])[:, :, 0]
        x_mean_max = max(x_mean_max, float(X.mean(axis=1).max()))
    base = float(w @ data.L**2)
    best_sse = np.full(len(grid), np.inf)
    best_coef = np.zeros((len(grid), 3))
    for support in _SUPPORTS:
        idx = np.array(support)
        Gs = G[:, idx[:, None], idx[None, :]] + 1e-300
        coef_s = _batched_solve(Gs, h[:, idx])
        coef = np.zeros((len(grid), 3))
        coef[:, idx] = coef_s
        feasible = np.all(coef_s >= 0, axis=1)
        sse = base - 2 * np.einsum("ki,ki->k", coef, h) + np.einsum("ki,kij,kj->k", coef, G, coef)
        better = feasible & (sse < best_sse)
        best_sse[better] = sse[better]
        best_coef[better] = coef[better]
    # Zero coefficients get a small floor so their term can revive under L-BFGS-B.
    floors = np.array(
        [1e-3 * data.L.min(), 1e-4 * data.L.mean() / x_mean_max, 1e-4 * data.L.mean() / Y.mean(axis=1).max()]
    )
    E, A, B = (np.log(np.maximum(best_coef[:, i], floors[i])) for i in range(3))
    return np.column_stack([E, A, grid[:, 0], B, grid[:, 1], grid[:, 2:]])


_SUPPORTS = [s for k in (3, 2, 1) for s in itertools.combinations(range(3), k)]


def _batched_solve(G: np.ndarray, h: np.ndarray) -> np.ndarray:
    """Solve G x = h for a batch; singular systems give NaN (treated as infeasible)."""
    try:
        return np.linalg.solve(G, h[..., None])[..., 0]
    except np.linalg.LinAlgError:
        out = np.full(h.shape, np.nan)
        for i in range(len(G)):
            try:
                out[i] = np.linalg.solve(G[i], h[i])
            except np.linalg.LinAlgError:
                pass
        return out


def _clip_to_bounds(thetas: np.ndarray, law: Law) -> np.ndarray:
    lo, hi = np.array(bounds_for(law)).T
    return np.clip(thetas, lo, hi)


def screen_starts(law: Law, data: LawData, loss: Loss, n_refine: int, rng: np.random.Generator, n_random: int = 64):
    """Screen all starts vectorised; return the best n_refine (half from each family) and count.

    Family 1 is the classic grid plus `n_random` seeded uniform points in the grid's box; family 2
    the exponent-projected starts. Returns (starts (n_refine, P), total screened). Big tables are
    screened on `screen_subsample` rows.
    """
    data = screen_subsample(data)
    classic = classic_grid(law)
    lo, hi = classic.min(axis=0), classic.max(axis=0)
    random_pts = lo + (hi - lo) * rng.random((n_random, classic.shape[1]))
    family1 = np.vstack([classic, random_pts])
    family2 = _clip_to_bounds(projected_starts(law, data), law)
    f1 = batch_objective(family1, law, data, loss)
    f2 = batch_objective(family2, law, data, loss)
    n2 = n_refine - n_refine // 2
    picks = [
        family2[np.argsort(f2, kind="stable")[:n2]],  # projected family first
        family1[np.argsort(f1, kind="stable")[: n_refine - n2]],
    ]
    return np.vstack(picks), len(family1) + len(family2)


# ----------------------------------------------------------------------------------------------
# Refinement
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
    if chunk < M:
        out = [
            lm_batch(
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
    W = np.ones((M, len(data))) if weights is None else np.asarray(weights, dtype=float)
    lo, hi = np.array(bounds_for(law)).T
    free = np.ones(P, bool) if fixed is None else ~np.asarray(fixed, bool)
    lam = np.full(M, 1e-3)
    f = (loss.rho(law.log_predict_batch(thetas, data) - data.log_L) * W).sum(axis=1)
    active = np.isfinite(f)
    eye = np.eye(P)
    for _ in range(max_iter):
        idx = np.flatnonzero(active)
        if len(idx) == 0:
            break
        log_pred, J = law.log_predict_and_jac_batch(thetas[idx], data)
        J = J * free  # fixed coordinates get no step
        res = log_pred - data.log_L
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
        f_trial = (loss.rho(law.log_predict_batch(trial, data) - data.log_L) * Wi).sum(axis=1)
        ok = np.isfinite(f_trial) & (f_trial < f[idx])
        small = ok & (f[idx] - f_trial <= rel_tol * np.abs(f[idx]))
        thetas[idx[ok]] = trial[ok]
        f[idx[ok]] = f_trial[ok]
        lam[idx[ok]] = np.maximum(lam[idx[ok]] / 3, 1e-12)
        lam[idx[~ok]] *= 4
        active[idx[small | (lam[idx] > 1e10)]] = False
    return thetas, f


def objective_grad_hess(theta, law: Law, data: LawData, loss: Loss, weights=None):
    """(objective, gradient, exact Hessian, IRLS curvature) in internal coordinates, for laws with
    `Law.has_hessian`.

    Exact: H = sum_i w_i [psi'(res_i) J_i J_i^T + psi(res_i) d^2 log L_hat_i], the Gauss-Newton
    part from the rows inside the Huber threshold (psi' = 1 there, 0 outside), the second part the
    model's curvature weighted by psi (`Law.log_predict_jac_hess`). IRLS: sum_i w_i
    min(1, delta / |res_i|) J_i J_i^T, positive semi-definite and a majoriser (as in `lm_batch`).
    """
    log_pred, J, hess = law.log_predict_jac_hess(theta, data)
    res = log_pred - data.log_L
    rho, psi, dpsi = loss.rho(res), loss.psi(res), loss.psi_prime(res)
    curv = np.ones_like(res) if loss.kind == "l2" else np.minimum(1.0, loss.delta / np.maximum(np.abs(res), 1e-300))
    if weights is not None:
        rho, psi, dpsi, curv = weights * rho, weights * psi, weights * dpsi, weights * curv
    return (float(rho.sum()), np.einsum("n,np->p", psi, J), (J.T * dpsi) @ J + hess(psi), (J.T * curv) @ J)


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
    with `refine`.
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


def same_basin(a: Refined, best: Refined, law: Law, n_rows: int = 1) -> bool:
    """Same optimum: the exponents agree to EXPONENT_TOL and the objectives to BASIN_REL_TOL
    relative or BASIN_ABS_TOL per row absolute (an exact fit's ~1e-30 optimum has no relative scale)."""
    exps = [i for i, n in enumerate(law.internal_names) if n not in ("e", "a", "b")]
    gap = a.objective - best.objective
    close_f = gap <= max(BASIN_REL_TOL * best.objective, BASIN_ABS_TOL * n_rows)
    return bool(close_f and np.max(np.abs(a.theta[exps] - best.theta[exps])) <= EXPONENT_TOL)


def screen_subsample(data: LawData) -> LawData:
    """All rows, or for a table over SCREEN_ROWS rows a fixed random subsample of that many (seed 0:
    the same rows every time, so fits stay reproducible)."""
    if len(data) <= SCREEN_ROWS:
        return data
    rows = np.sort(np.random.default_rng(0).choice(len(data), SCREEN_ROWS, replace=False))
    return data.subset(rows)


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
# Result record
# ----------------------------------------------------------------------------------------------
@dataclass
class FitResult:
    """One fitted law. JSON keys (stable; plots and `compare` read them):

    law, params (name -> estimate: E, A, alpha, B, beta, phi / k_<r>), ci95 (name -> [low, high]
    when bootstrapped), bootstrap ({"params": {name: [replicates]}, "objective": [...],
    "n_replicates", "cluster"} when run), profile_phi ({"phi", "objective", "interval", "threshold",
    ...} when computed), holdout (when run), objective, grad_norm, n_starts (screened), n_refined,
    n_best_basin, settings, seed, input (path, sha256, n_rows, columns), versions, warnings, group,
    joint (`loopscale.joint`: recipes, delta_phi per recipe, shared_check, separate fits).
    """

    law: str
    params: dict[str, float]
    objective: float
    grad_norm: float
    n_starts: int
    n_refined: int
    n_best_basin: int
    settings: dict[str, Any]
    seed: int | None = None
    n_rows: int = 0
    ci95: dict[str, list[float]] = field(default_factory=dict)
    bootstrap: dict[str, Any] | None = None
    profile_phi: dict[str, Any] | None = None
    holdout: dict[str, Any] | None = None
    input: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    group: dict[str, Any] | None = None
    residual_rms_log: float | None = None
    joint: dict[str, Any] | None = None  # looped-joint: recipes, delta-phi tests, shared-parameter check

    def to_json_dict(self) -> dict[str, Any]:
        return _jsonable(asdict(self))

    def write_json(self, path) -> None:
        Path(path).write_text(json.dumps(self.to_json_dict(), indent=2) + "\n")

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FitResult:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in d.items() if k in known})

    @classmethod
    def from_json(cls, path) -> FitResult:
        return cls.from_dict(json.loads(Path(path).read_text()))


def load_fit(fit) -> FitResult:
    """A FitResult from a FitResult, the dict of its JSON, or a path to that JSON."""
    if isinstance(fit, FitResult):
        return fit
    if isinstance(fit, Mapping):
        d = dict(fit)
    else:
        path = Path(fit)
        try:
            d = json.loads(path.read_text())
        except (OSError, ValueError) as err:
            raise ValueError(f"cannot read fit JSON {path}: {err}") from err
    if not isinstance(d, dict) or "law" not in d or "params" not in d:
        raise ValueError(
            f"{fit if not isinstance(fit, Mapping) else 'fit'} is not a loopscale fit record (needs 'law' and 'params')"
        )
    return FitResult.from_dict(d)


def predict_loss(fit, table) -> np.ndarray:
    """The fitted law's loss L_hat for each row of `table` (a DataFrame or dict of arrays with the columns
    the law reads, e.g. r, N_once, N_rec, D): `laws.predict_loss` at the fit's parameters. `fit` is a
    FitResult, the dict of its JSON or a path to that JSON."""
    from .laws import predict_loss as law_prediction

    fit = load_fit(fit)
    return law_prediction(fit.law, fit.params, table)


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist())
    if isinstance(x, (np.floating, float)):
        return float(x) if np.isfinite(x) else None
    if isinstance(x, np.integer):
        return int(x)
    return x


def versions() -> dict[str, str]:
    from .records import library_versions

    return library_versions(("numpy", "scipy", "pandas", "loopscale"))


def file_sha256(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


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


def fit_law(
    data: LawData, law_name: str | Law = "looped", loss: Loss | None = None, seed: int = 0, n_refine: int = 16
) -> tuple[FitResult, FitState]:
    """Fit one law to data with the global multi-start strategy. Returns (result, state).

    looped-free starts from the looped fit with k_r = r^phi_hat, k_r = 1 and k_r = r. A
    looped-joint law is passed as a `Law` (it carries its recipe names).
    """
    loss = loss or Loss()
    law = law_name if isinstance(law_name, Law) else make_law(law_name, data.r)
    rng = np.random.default_rng(seed)
    if law.name == "looped-free":
        looped_result, looped_state = fit_law(data, "looped", loss, seed, n_refine)
        base = looped_state.best.theta
        log_r = np.log(np.array(law.r_values))
        starts = np.array(
            [
                np.concatenate([base[:5], base[5] * log_r]),
                np.concatenate([base[:5], 0.0 * log_r]),
                np.concatenate([base[:5], 1.0 * log_r]),
            ]
        )
        starts = _clip_to_bounds(starts, law)
        n_screened = looped_result.n_starts + len(starts)
    else:
        starts, n_screened = screen_starts(law, data, loss, n_refine, rng)
    best, refined = multistart(law, data, loss, starts)
    n_basin = sum(same_basin(r, best, law, len(data)) for r in refined)
    res = law.log_predict(best.theta, data) - data.log_L
    notes = []
    if n_basin / len(refined) < SMALL_BASIN_SHARE:
        notes.append(
            f"only {n_basin} of {len(refined)} refined starts reached the best optimum: "
            "the objective has competing minima; treat the estimate with care"
        )
    notes += _boundary_notes(best.theta, law)
    result = FitResult(
        law=law.name,
        params=law.to_user(best.theta),
        objective=best.objective,
        grad_norm=best.grad_norm,
        n_starts=n_screened,
        n_refined=len(refined),
        n_best_basin=n_basin,
        settings={
            "loss": loss.kind,
            "delta": loss.delta if loss.kind == "huber" else None,
            "n_refine": n_refine,
            "optimizer": "L-BFGS-B",
            **{f"lbfgsb_{k}": v for k, v in LBFGSB_OPTIONS.items()},
        },
        seed=seed,
        n_rows=len(data),
        warnings=notes,
        residual_rms_log=float(np.sqrt(np.mean(res**2))),
    )
    return result, FitState(law, data, loss, best, starts)


def _boundary_notes(theta, law: Law) -> list[str]:
    notes = []
    for name, value, (lo, hi) in zip(law.internal_names, theta, bounds_for(law)):
        if name in ("alpha", "beta", "phi") and (value <= lo + 1e-9 or value >= hi - 1e-9):
            notes.append(f"{name} = {value:.4g} sits on its bound [{lo}, {hi}]")
    return notes


# ----------------------------------------------------------------------------------------------
# Bootstrap
# ----------------------------------------------------------------------------------------------
def budget_clusters(C: np.ndarray) -> np.ndarray:
    """Cluster label per row: the compute budget rounded to 3 significant digits."""
    C = np.asarray(C, dtype=float)
    return np.array([float(f"{c:.3g}") for c in C])


def budget_column(table) -> np.ndarray:
    """The compute budget each run was given: `C_budget` where a sweep recorded it (the spent C scatters
    around it by batch rounding, so grouping by C would split one budget), else the spent C."""
    C = table["C"].to_numpy(dtype=float)
    if "C_budget" in table.columns:
        asked = pd.to_numeric(table["C_budget"], errors="coerce").to_numpy(dtype=float)
        C = np.where(np.isfinite(asked) & (asked > 0), asked, C)
    return C


def bootstrap(
    state: FitState, n_replicates: int, seed: int = 0, clusters=None, n_starts: int = 3, polish: bool = True
) -> dict[str, Any]:
    """Refit on resampled data; returns {"params": {name: [...]}, "objective": [...], ...}.

    Rows are resampled with replacement (as integer weights on the objective), or, with `clusters`
    (one label per row), whole clusters are resampled: e.g. compute budgets or widths. Each
    replicate is refit from the full-data optimum (warm start) plus the best `n_starts - 1`
    screened starts (batched `lm_batch`), the lowest objective is kept and, with `polish`, refined
    by L-BFGS-B to the same tolerances as the main fit.
    """
    law, data, loss = state.law, state.data, state.loss
    rng = np.random.default_rng(seed)
    n = len(data)
    starts = [state.best.theta] + _distinct_starts(state.starts, n_starts - 1)
    if clusters is not None:
        labels, inverse = np.unique(np.asarray(clusters), return_inverse=True)

    def weights_of_replicate() -> np.ndarray:
        if clusters is None:
            return np.bincount(rng.integers(0, n, n), minlength=n).astype(float)
        counts = np.bincount(rng.integers(0, len(labels), len(labels)), minlength=len(labels))
        return counts[inverse].astype(float)

    S = len(starts)
    # Replicates x starts in one batched LM pass, in chunks (weights drawn per chunk, in replicate
    # order) so memory stays bounded on big tables.
    thetas = np.empty((n_replicates, law.n_params))
    objectives = np.empty(n_replicates)
    chunk = max(1, chunk_size(n, 3 * law.n_params + 8, cap=4096) // S)
    for lo in range(0, n_replicates, chunk):
        Wc = np.array([weights_of_replicate() for _ in range(min(chunk, n_replicates - lo))])
        th, fv = lm_batch(law, data, loss, np.tile(np.array(starts), (len(Wc), 1)), np.repeat(Wc, S, axis=0))
        best = np.argmin(fv.reshape(len(Wc), S), axis=1)
        for j, b in enumerate(best):
            r = refine(th[j * S + b], law, data, loss, Wc[j]) if polish else None
            thetas[lo + j] = th[j * S + b] if r is None else r.theta
            objectives[lo + j] = fv[j * S + b] if r is None else r.objective
    user = [law.to_user(t) for t in thetas]
    columns = {name: [u[name] for u in user] for name in law.user_names}
    return {
        "params": columns,
        "objective": objectives,
        "n_replicates": n_replicates,
        "cluster": None if clusters is None else "custom",
        "seed": seed,
        "n_starts_per_replicate": len(starts),
    }


def _distinct_starts(starts: np.ndarray, k: int) -> list[np.ndarray]:
    """The k best exponent-projected starts (the first family in `screen_starts` order).

    They sit near the optimum for their exponents, so a replicate converges from them in a few
    dozen LM steps; classic-grid corners take hundreds and almost never win on a replicate.
    """
    if k <= 0 or len(starts) == 0:
        return []
    return [starts[i] for i in range(min(k, len(starts) - len(starts) // 2))]


def percentile_ci(columns: dict[str, list[float]], level: float = 0.95) -> dict[str, list[float]]:
    """Percentile bootstrap interval per parameter."""
    tail = 100 * (1 - level) / 2
    return {k: [float(np.percentile(v, tail)), float(np.percentile(v, 100 - tail))] for k, v in columns.items()}


# ----------------------------------------------------------------------------------------------
# Profile in phi
# ----------------------------------------------------------------------------------------------
CHI2_1_95 = 3.841458820694124  # 95% quantile of chi-square with 1 degree of freedom


def profile_threshold(state: FitState) -> tuple[float, dict[str, float]]:
    """Objective increase that bounds the 95% profile interval for one parameter.

    Robust likelihood-ratio test for M-estimators (Schrader & Hettmansperger 1980): the statistic
    2 * Delta(sum rho) * mean(psi') / mean(psi^2) is asymptotically chi-square(1). So the interval
    is {phi : Delta <= chi2_1(0.95) / 2 * mean(psi^2) / mean(psi')}, with psi, psi' evaluated at
    the residuals of the full fit. For plain least squares this is the usual Delta <= 1.92 sigma^2.
    """
    res = state.law.log_predict(state.best.theta, state.data) - state.data.log_L
    m_psi2 = float(np.mean(state.loss.psi(res) ** 2))
    m_dpsi = float(np.mean(state.loss.psi_prime(res)))
    if m_dpsi == 0:  # no residual inside +-delta: fall back to the least-squares scale
        m_psi2, m_dpsi = float(np.mean(res**2)), 1.0
    thr = 0.5 * CHI2_1_95 * m_psi2 / m_dpsi
    return thr, {"mean_psi_sq": m_psi2, "mean_psi_prime": m_dpsi}


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
) -> dict[str, Any]:
    """Profile of the objective in one internal coordinate (phi, or dphi[<recipe>] of a joint law),
    and its 95% interval.

    The grid (for the figure) is solved outward from the optimum (`_walk_profile`), each point
    polished by L-BFGS-B. The interval ends are the roots of profile(x) - f_min - threshold between
    the last grid point inside and the first outside, to `xtol`, by `_threshold_crossing`. Returns
    {"x", "objective", "interval", "threshold", "method", ...}.
    """
    law, data, best = state.law, state.data, state.best
    i = law.internal_names.index(name)
    lo_b, hi_b = bounds_for(law)[i]
    x_hat = best.theta[i]
    grid = np.unique(np.clip(np.linspace(x_hat - half_width, x_hat + half_width, n_points), lo_b, hi_b))
    centre = int(np.argmin(np.abs(grid - x_hat)))
    solved = _walk_profile(state, name, grid, centre)
    values = np.array([r.objective for r in solved])
    thr, stats = profile_threshold(state)
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
        "method": "robust LR (Schrader-Hettmansperger), chi2_1 95%; ends by root-finding on the "
        "profile (cubic Hermite steps from values and slopes, bracketed)",
        "param": name,
        **stats,
    }
    if values.min() < best.objective * (1 - 1e-6) - BASIN_ABS_TOL * len(data):
        out["warning"] = "profile found a lower objective than the fit: the fit missed the optimum"
    return out


def profile_phi(state: FitState, half_width: float = 0.5, n_points: int = 21) -> dict[str, Any]:
    """Objective minimised over the other parameters on a phi grid around phi_hat, and its interval.

    Returns {"phi", "objective", "interval", "threshold", "method", ...} (see `profile_param`).
    """
    if state.law.name != "looped":
        raise ValueError(f"the phi profile needs the looped law; got {state.law.name!r}")
    out = profile_param(state, "phi", half_width, n_points)
    out["phi"] = out.pop("x")
    return out


def lr_test(state: FitState, name: str, value: float = 0.0) -> dict[str, float]:
    """Robust likelihood-ratio test of internal coordinate `name` = value (e.g. dphi = 0).

    Statistic T = 2 (f_restricted - f_min) mean(psi') / mean(psi^2) (Schrader & Hettmansperger
    1980; the least-squares LR statistic when rho is 0.5 x^2), asymptotically chi-square(1); the
    restricted fit starts from the optimum with the coordinate moved to `value`, after a batched
    LM pass.
    """
    from scipy.stats import chi2

    restricted = profile_values(state, name, [value])[0]
    _, stats = profile_threshold(state)
    gap = max(0.0, restricted.objective - state.best.objective)
    T = 2 * gap * stats["mean_psi_prime"] / stats["mean_psi_sq"]
    return {
        "value": value,
        "objective_restricted": restricted.objective,
        "statistic": float(T),
        "df": 1,
        "p_value": float(chi2.sf(T, 1)),
    }


# ----------------------------------------------------------------------------------------------
# Holdout
# ----------------------------------------------------------------------------------------------
def holdout_largest(
    data: LawData, C: np.ndarray, law_name: str, loss: Loss, seed: int = 0, n_refine: int = 16
) -> dict[str, Any]:
    """Refit without the largest compute budget; report the error on the held-out runs.

    Budgets are grouped by `budget_clusters`. Errors are relative: L_hat / L - 1.
    """
    clusters = budget_clusters(C)
    largest = clusters.max()
    test = clusters == largest
    train = ~test
    law = make_law(law_name, data.r)
    n_min = 2 * law.n_params
    if train.sum() < n_min:
        raise ValueError(f"holdout leaves {int(train.sum())} rows, fewer than {n_min}")
    result, _ = fit_law(data.subset(train), law_name, loss, seed, n_refine)
    pred = _predict_user(law_name, result.params, data.subset(test))
    obs = data.L[test]
    rel = pred / obs - 1
    return {
        "held_out_budget": float(largest),
        "n_train": int(train.sum()),
        "n_holdout": int(test.sum()),
        "params": result.params,
        "rows": np.flatnonzero(test).tolist(),
        "observed": obs.tolist(),
        "predicted": pred.tolist(),
        "rel_error": rel.tolist(),
        "mean_abs_rel_error": float(np.mean(np.abs(rel))),
        "max_abs_rel_error": float(np.max(np.abs(rel))),
        "mean_rel_error": float(np.mean(rel)),
    }


def _predict_user(law_name: str, params: dict, data: LawData) -> np.ndarray:
    law = (
        make_law(law_name, data.r)
        if law_name != "looped-free"
        else Law(law_name, tuple(float(k[2:]) for k in params if k.startswith("k_")))
    )
    return np.exp(law.log_predict(law.from_user(params), data))


# ----------------------------------------------------------------------------------------------
# Comparing fits
# ----------------------------------------------------------------------------------------------
def compare_param(a: FitResult, b: FitResult, name: str = "phi", level: float = 0.95, seed: int = 0) -> dict[str, Any]:
    """delta = b.name - a.name with a percentile CI from the two fits' bootstrap replicates.

    The fits are of different data (e.g. recipe variants), so their replicates are independent;
    delta replicates pair them at random (the shorter set sets the count).
    """
    for label, f in (("first", a), ("second", b)):
        if name not in f.params:
            raise ValueError(f"{label} fit ({f.law}) has no parameter {name!r}")
    out: dict[str, Any] = {
        "param": name,
        "a": a.params[name],
        "b": b.params[name],
        "delta": b.params[name] - a.params[name],
        "ci": None,
    }
    reps = []
    for f in (a, b):
        cols = (f.bootstrap or {}).get("params", {})
        reps.append(np.asarray(cols.get(name, []), dtype=float))
    if min(len(reps[0]), len(reps[1])) >= 2:
        rng = np.random.default_rng(seed)
        k = min(len(reps[0]), len(reps[1]))
        d = rng.permutation(reps[1])[:k] - rng.permutation(reps[0])[:k]
        tail = 100 * (1 - level) / 2
        out["ci"] = [float(np.percentile(d, tail)), float(np.percentile(d, 100 - tail))]
        out["se"] = float(np.std(d, ddof=1))
        out["n_replicates"] = k
    return out


# ----------------------------------------------------------------------------------------------
# Everything for one table
# ----------------------------------------------------------------------------------------------
def fit_table(
    table,
    law: str = "looped",
    loss: Loss | None = None,
    seed: int = 0,
    n_bootstrap: int = 0,
    cluster: str | None = None,
    holdout: bool = False,
    profile: bool | None = None,
    n_refine: int = 16,
) -> FitResult:
    """Fit a canonical runs table (see `loopscale.tables`) and attach the uncertainty steps.

    cluster: None (resample rows), "C" (whole compute budgets, grouped by `budget_clusters`) or
    any other column (e.g. "width"). profile defaults to True for the looped law. The bootstrap
    uses seed + 1 and the holdout refit uses seed, so results are reproducible from `seed`.
    """
    from .laws import law_data_from_table

    loss = loss or Loss()
    data = law_data_from_table(table, law)
    result, state = fit_law(data, law, loss, seed, n_refine)
    if n_bootstrap > 0:
        labels = None
        if cluster is not None:
            if cluster not in table.columns:
                raise ValueError(f"cluster column {cluster!r} is not in the table")
            labels = budget_clusters(budget_column(table)) if cluster == "C" else table[cluster].to_numpy()
            if len(np.unique(labels)) < 3:
                raise ValueError(f"cluster column {cluster!r} has fewer than 3 distinct values")
        boot = bootstrap(state, n_bootstrap, seed=seed + 1, clusters=labels)
        boot["cluster"] = cluster
        result.bootstrap = boot
        result.ci95 = percentile_ci(boot["params"])
    if profile is None:
        profile = law == "looped"
    if profile and law == "looped":
        result.profile_phi = profile_phi(state)
        if "warning" in result.profile_phi:
            result.warnings.append(result.profile_phi["warning"])
    if holdout:
        result.holdout = holdout_largest(data, budget_column(table), law, loss, seed, n_refine)
    result.settings.update({"n_bootstrap": n_bootstrap, "cluster": cluster, "law": law, "holdout_largest": holdout})
    result.versions = versions()
    return result
