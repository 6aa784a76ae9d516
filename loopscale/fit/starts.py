"""Starting points for the fitter's global search (docs/design.md, "Fitting").

The objective has many local minima and is ill-conditioned in (a, b) vs the exponents. Two families of
starts are screened in one vectorised numpy pass:
  1. the classic grid (a, b in {0, 5, ..., 25}, e in {-1, -0.5, ..., 1}, alpha, beta in
     {0, 0.5, ..., 2}, phi in {0, 0.5, 1} for the looped law) plus a few seeded random points;
  2. "exponent-projected" starts: for a grid of exponents (alpha, beta, phi) the law is linear in
     (E, A, B), so the best non-negative (E, A, B) for the relative error (L_hat - L) / L, which
     approximates the log residual, is a 3-variable NNLS solved exactly by enumerating supports.
The best starts of each family go on to `loopscale.fit.optimize.multistart`. Big tables are screened on a
fixed subsample of their rows (`screen_subsample`).
"""

from __future__ import annotations

import itertools

import numpy as np

from loopscale.fit.bounds import clip_to_bounds
from loopscale.fit.laws.form import Law, LawData
from loopscale.fit.objective import Loss, batch_objective, chunk_size

# Tables with more rows than this (e.g. one row per logged evaluation, 10^5-10^6 rows) screen their
# ~15k starts, and pre-solve the refined ones, on a seeded random subsample of this many rows: the
# screen only ranks starting points, and its cost would otherwise grow as starts x rows. Every
# refinement and every reported number uses all rows. Sweep-sized tables are untouched.
SCREEN_ROWS = 1024


def classic_grid(law: Law) -> np.ndarray:
    """The classic grid (Hoffmann et al.; Besiroglu et al.), extended by the law's own axes
    (`Law.classic_axes`: phi in {0, 0.5, 1} for the looped laws)."""
    axes = [
        np.linspace(-1, 1, 5),
        np.arange(0, 30, 5.0),
        np.linspace(0, 2, 5),
        np.arange(0, 30, 5.0),
        np.linspace(0, 2, 5),
    ]
    return np.array(list(itertools.product(*axes, *law.classic_axes())), dtype=float)


def projected_starts(law: Law, data: LawData, n_exponent: int = 16) -> np.ndarray:
    """Exponent-grid starts with the best non-negative (E, A, B) solved in closed form.

    For fixed exponents (alpha, beta and the law's own, `Law.projected_axes`: phi, ...) the prediction
    E + A X + B Y (X = N_eff^-alpha, Y = D^-beta) is linear in (E, A, B); minimising
    sum ((pred - L) / L)^2, which approximates the log residual, is a 3-variable NNLS. Its solution is the
    best feasible least-squares solution over the 7 supports (subsets of {E, A, B}), so we solve all 7 for
    every exponent combination in one batched pass. The exponent grid goes through in chunks (`chunk_size`),
    so memory does not grow with rows x starts.
    """
    alphas = np.linspace(0.05, 1.2, n_exponent)
    betas = np.linspace(0.05, 1.2, n_exponent)
    grid = law.projected_grid(alphas, betas, np.linspace(0.0, 1.2, 7))  # rows (alpha, beta, phi, dphi, ...)
    w = 1.0 / data.L**2  # relative-error weights
    if data.sigma is not None:  # standardised by the seed sigma, as the objective is
        w = w / data.sigma**2
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
    family1 = clip_to_bounds(np.vstack([classic, random_pts]), law)  # a law may narrow its box (pin E)
    family2 = clip_to_bounds(projected_starts(law, data), law)
    f1 = batch_objective(family1, law, data, loss)
    f2 = batch_objective(family2, law, data, loss)
    n2 = n_refine - n_refine // 2
    picks = [
        family2[np.argsort(f2, kind="stable")[:n2]],  # projected family first
        family1[np.argsort(f1, kind="stable")[: n_refine - n2]],
    ]
    return np.vstack(picks), len(family1) + len(family2)


def screen_subsample(data: LawData) -> LawData:
    """All rows, or for a table over SCREEN_ROWS rows a fixed random subsample of that many (seed 0:
    the same rows every time, so fits stay reproducible)."""
    if len(data) <= SCREEN_ROWS:
        return data
    rows = np.sort(np.random.default_rng(0).choice(len(data), SCREEN_ROWS, replace=False))
    return data.subset(rows)
