"""The lr drops of a schedule as seen from each evaluation: what the multi-power law's loss-drop term sums.

Luo et al. 2025 (arXiv 2503.12811, eq. for LD): with S_k(t) = sum_{tau=k}^{t} eta_tau,

    LD(t) = B sum_{k=1}^{t} (eta_{k-1} - eta_k) G(eta_k^-gamma S_k(t)),    G(x) = 1 - (C x + 1)^-beta,

k counted after the warmup (eta_0 the lr at the warmup's end). Summed step by step that is O(E T) per
curve (E evaluations, T steps): 4 x 10^7 terms for one 72k-step cosine, at every objective evaluation. Here
the sum is split at t - W: the W most recent steps (the drops G is still rising on) exactly, step by step, and
the older ones in bins of b steps, each bin one atom at its drop-weighted centre (the bin's summed drop, its
|drop|-weighted mean ln lr and mean area before it). G is smooth and slowly varying that far back (t - k >= W =
8 b), so a bin's error is second order, (b / W)^2 / 24 of its share; tests/unit/test_curve_laws.py checks the
sum against the exact step-by-step one (on the public 400M curves: within 1e-6 nats). With b = sqrt(T / 9) a
curve costs at most E x 6 sqrt(T) terms (O(E sqrt(T)): 1,600 per evaluation for T = 72k), b = 1 (exact) for
T <= 9 steps, and only the pairs with a drop are kept (a constant stretch costs nothing).

`drop_atoms` returns the (evaluation, atom) pairs flat: the drop, the lr area from the atom to the evaluation
(S_k(t)) and ln eta_k; every schedule-aware law reads these.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

WINDOW_BINS = 8  # the exact window W, in bins: W = 8 b
LR_FLOOR = 1e-4  # the smallest lr eta^-gamma reads, as a share of the peak (a decay to 0 would be infinite)


@dataclass(frozen=True)
class DropAtoms:
    """The (evaluation, atom) pairs whose drop counts, flat: sums over atoms are `per_row`'s bincounts, so a
    curve costs its live pairs only (no masked zeros)."""

    row: np.ndarray  # (n,) the evaluation each pair belongs to
    drop: np.ndarray  # (n,) eta_{k-1} - eta_k, summed over a bin's steps
    area: np.ndarray  # (n,) S_k(t): the lr area from the atom's step to the evaluation, inclusive
    log_eta: np.ndarray  # (n,) ln eta_k at the atom (its |drop|-weighted mean of ln eta for a bin)
    rows: int  # E

    def per_row(self, values: np.ndarray) -> np.ndarray:
        """(E,) the sum of `values` (n,) over each evaluation's atoms."""
        return np.bincount(self.row, weights=values, minlength=self.rows)


def step_drops(eta: np.ndarray, warmup_end: int) -> np.ndarray:
    """(T + 1,) d_k = eta_{k-1} - eta_k for k after the warmup's end, 0 before (and at k = 0)."""
    d = np.zeros_like(eta)
    d[1:] = eta[:-1] - eta[1:]
    d[: warmup_end + 1] = 0.0
    return d


def bin_steps(span: int, window_bins: int = WINDOW_BINS) -> int:
    """The far bins' width b: E (span / b + (window_bins + 1) b) pairs is least at b = sqrt(span / 9)."""
    return max(1, int(np.ceil(np.sqrt(max(span, 1) / (window_bins + 1)))))


def drop_atoms(
    eta: np.ndarray, warmup_end: int, steps: np.ndarray, b: int | None = None, window_bins: int = WINDOW_BINS
) -> DropAtoms:
    """The drops before each evaluation step in `steps` (E,), near ones exact and far ones in bins of `b`
    steps (default `bin_steps`; b = 1 is the exact sum). An lr of 0 (a decay to zero) enters eta^-gamma as
    LR_FLOOR of the peak: G is 1 there anyway."""
    eta = np.asarray(eta, dtype=float)
    lr_floor = LR_FLOOR * max(float(eta.max()), np.finfo(float).tiny)
    T = len(eta) - 1
    area = np.cumsum(eta)  # P[t]; S_k(t) = P[t] - P[k - 1]
    before = np.concatenate([[0.0], area[:-1]])  # P[k - 1]
    d = step_drops(eta, warmup_end)
    t = np.asarray(steps, dtype=np.int64)
    first = warmup_end + 1  # the first step whose drop counts
    b = b or bin_steps(T - warmup_end, window_bins)
    window = window_bins * b
    n_far = np.maximum(0, (t - first + 1 - window) // b)  # whole bins ending at or before t - W
    parts = []

    # far: bin j holds steps first + j b .. first + (j + 1) b - 1; one atom each, at its drop-weighted centre
    n_bins = int(n_far.max()) if len(t) else 0
    if n_bins:
        k = first + np.arange(n_bins * b).reshape(n_bins, b)
        wk = np.abs(d[k])
        weight = wk.sum(axis=1)
        live = np.flatnonzero(weight > 0)  # bins with any drop: a constant stretch costs nothing
        w = wk[live] / weight[live, None]
        bin_drop = d[k[live]].sum(axis=1)
        bin_log_eta = (w * np.log(np.maximum(eta[k[live]], lr_floor))).sum(axis=1)  # a geometric mean
        bin_before = (w * before[k[live]]).sum(axis=1)
        row, j = np.nonzero(live[None, :] < n_far[:, None])  # the bin ends before t - W
        parts.append((row, bin_drop[j], area[t[row]] - bin_before[j], bin_log_eta[j]))

    # near: steps first + n_far b .. t, exactly
    start = first + n_far * b
    width = int(np.max(t - start + 1, initial=0))
    if width > 0:
        k = start[:, None] + np.arange(width)[None, :]  # (E, width)
        inside = k <= t[:, None]
        k = np.minimum(k, T)
        row, col = np.nonzero(inside & (d[k] != 0))
        kk = k[row, col]
        parts.append((row, d[kk], area[t[row]] - before[kk], np.log(np.maximum(eta[kk], lr_floor))))
    if not parts:
        empty = np.zeros(0)
        return DropAtoms(np.zeros(0, dtype=np.int64), empty, empty, empty, len(t))
    row, drop, area_from, log_eta = (np.concatenate(p) for p in zip(*parts))
    return DropAtoms(row, drop, area_from, log_eta, len(t))


def annealing_area(eta: np.ndarray, warmup_end: int, steps: np.ndarray, decay: float) -> np.ndarray:
    """(E,) S2(t) = sum_{k<=t} m_k, m_k = decay m_{k-1} + (eta_{k-1} - eta_k): the LR-annealing law's
    momentum-weighted annealing area (Tissue et al. 2024, arXiv 2408.11029), drops after the warmup only.
    O(T): m is a first-order recursion over the steps with a drop (a constant stretch only decays m, in one
    power per stretch)."""
    d = step_drops(np.asarray(eta, dtype=float), warmup_end)
    m = np.zeros_like(d)
    live = np.flatnonzero(d)
    last, value = 0, 0.0
    for k in live:  # m between drops decays geometrically: m_j = m_last decay^(j - last)
        value = value * decay ** (k - last) + d[k]
        m[k], last = value, k
    filled = np.zeros_like(d)
    if len(live):
        # m at every step: the value at the last drop at or before it, decayed since
        idx = np.searchsorted(live, np.arange(len(d)), side="right") - 1
        has = idx >= 0
        src = live[np.maximum(idx, 0)]
        since = np.maximum(np.arange(len(d)) - src, 0)  # steps since that drop (0 before the first)
        filled = np.where(has, m[src] * decay**since, 0.0)
    return np.cumsum(filled)[np.asarray(steps, dtype=np.int64)]
