"""The break-even memory budget of `loopscale advise`: the cap M on unique parameters below which some r > 1
beats r = 1 at the budget C (docs/design.md, "Advice").

Capping the unique parameters at M gives the optimum L*_r(M) = L(min(d*_r, d_r(M))) (L is unimodal in the
width d along a family, `loopscale.analysis.advise.optimum`), so the break-even is a one-dimensional root
of Delta(M) = L*_1(M) - min_r L*_r(M), found per parameter set (the point estimate and each bootstrap
replicate): the record holds the point value and the replicates' interval.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from loopscale.analysis.advise.family import Family
from loopscale.analysis.advise.law_sets import LawSets
from loopscale.analysis.advise.optimum import N_BISECT, Constraints, loss, solve

N_BREAK_GRID = 128  # log-M grid of the break-even search


def capped_loss(sets: LawSets, family: Family, r: int, cons: Constraints, d_free: np.ndarray, cap) -> np.ndarray:
    """L*_r(M): the optimum under a unique-parameter cap M per set, L(min(d*_r, d_r(M))) (unimodal L);
    inf where even the smallest width exceeds the cap."""
    d_cap = family.width_for("N_unique", r, cap)
    d = np.minimum(d_free, d_cap)
    out = loss(sets, family, r, d[:, None], cons)[:, 0]
    return np.where(d_cap >= family.width_step, out, np.inf)


def break_even(
    sets: LawSets, family: Family, cons: Constraints, d_free: Mapping[int, np.ndarray], looped: Sequence[int]
) -> np.ndarray:
    """Per parameter set, the cap M_be on unique parameters below which the best of the `looped` r beats
    r = 1 at budget C (the other constraints kept): the largest root of
        Delta(M) = L*_1(M) - min_r L*_r(M)
    on a log-M grid from the smallest r = 1 model to twice the largest free optimum, refined by bisection.
    inf where looping wins at every cap (also without one), nan where it never wins. d_free[r]: the
    optimum widths without a cap (`continuous_optimum` under cons.without_cap())."""
    lo = float(family.value("N_unique", 1, family.width_step))
    hi = 2 * max(float(np.max(family.value("N_unique", r, d_free[r]))) for r in [1, *looped])
    grid = np.geomspace(lo, max(hi, 2 * lo), N_BREAK_GRID)

    def delta(cap):  # cap: (sets,)
        best_looped = np.min([capped_loss(sets, family, r, cons, d_free[r], cap) for r in looped], axis=0)
        return capped_loss(sets, family, 1, cons, d_free[1], cap) - best_looped

    wins = np.stack([delta(np.full(len(sets), m)) > 0 for m in grid], axis=1)
    out = np.full(len(sets), np.nan)
    out[wins[:, -1]] = np.inf
    crossing = wins.any(axis=1) & ~wins[:, -1]
    last = np.where(crossing, N_BREAK_GRID - 1 - np.argmax(wins[:, ::-1], axis=1), 0)
    low, high = np.log(grid[last]), np.log(grid[np.minimum(last + 1, N_BREAK_GRID - 1)])
    for _ in range(N_BISECT):
        mid = 0.5 * (low + high)
        looping = delta(np.exp(mid)) > 0
        low, high = np.where(looping, mid, low), np.where(looping, high, mid)
    out[crossing] = np.exp(0.5 * (low + high))[crossing]
    return out


# ----------------------------------------------------------------------------------------------------
# the record


def _break_even_entry(point_M: float, rep_M: np.ndarray | None, level: float) -> dict:
    out = {"M": point_M if np.isfinite(point_M) else None, "looping_always_wins": bool(point_M == np.inf)}
    out["looping_never_wins"] = bool(np.isnan(point_M))
    if rep_M is not None:
        finite = np.where(np.isnan(rep_M), 0.0, rep_M)  # never wins: the break-even is below every model
        tail = 100 * (1 - level) / 2
        ends = [float(np.percentile(finite, q, method="nearest")) for q in (tail, 100 - tail)]
        out["interval"] = [e if np.isfinite(e) else None for e in ends]
        out["share_always"] = float(np.mean(rep_M == np.inf))
        out["share_never"] = float(np.mean(np.isnan(rep_M)))
    return out


def break_even_record(point, reps, family, cons, r_values, level) -> dict | None:
    """The break-even cap for the best r > 1 (overall) and for each r > 1, at the point estimate and
    per replicate (free optima under every constraint but the cap)."""
    looped = [r for r in r_values if r > 1]
    if 1 not in r_values or not looped:
        return None
    free = cons.without_cap()
    solved = {r: solve(point, family, r, free) for r in [1, *looped]}
    looped = [r for r in looped if not isinstance(solved[r], str)]
    if isinstance(solved[1], str) or not looped:
        return None
    out = {"compute_flops": cons.compute_flops, "looped": looped, "level": level}
    sets = [(point, {r: solved[r][1] for r in [1, *looped]})]
    if reps is not None:
        sets.append((reps, {r: solve(reps, family, r, free)[1] for r in [1, *looped]}))
    for label, group in [("overall", looped), *[(f"r={r}", [r]) for r in looped]]:
        values = [break_even(s, family, free, d_free, group) for s, d_free in sets]
        out[label] = _break_even_entry(float(values[0][0]), values[1] if reps is not None else None, level)
    return out
