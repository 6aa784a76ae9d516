"""Iso-FLOP curves and their minima, in one place (a run's budget: `runs_table.budgets`, the rule everything groups
by): the measured minimum of each curve and whether it lies inside the sizes sampled at
its budget, judged against the noise of one run (`isoflop_minima`: the verdict's "N*/D* extrapolation" check, the
conditioning diagnostics; a law fitted where every minimum is bracketed interpolates N*(C), D*(C), otherwise it
extrapolates); the vertex of a parabola in ln N through the points near one curve's minimum (`window_vertex`,
Approach 2 of Hoffmann et al. 2022 as practitioners run it: `validate`'s and `loopscale isoflop`'s cross-check,
fit/validation/approach2.py); and the fitted law's own N*, D* (`compute_optimal_curve`, the figure's)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from loopscale.fit.derived import optimal_size
from loopscale.fit.laws.registry import law_class
from loopscale.fit.result import FitResult
from loopscale.fit.runs_table import budget_column

Z_LEVEL = 1.959963984540054  # scipy.stats.norm.ppf(0.975): the two-sided 95% level of every check


def isoflop_minima(
    table: pd.DataFrame, r: int = 1, size: str | None = None, sigma_log: float = 0.0
) -> list[dict[str, Any]]:
    """Per compute budget, this r's sizes (`width` where the table has it, else N) with the mean log loss of
    each over its seeds, the size of the lowest mean, whether it lies strictly inside the sizes sampled at that
    budget (three or more), and whether an edge minimum is within the noise: below the best interior size by
    no more than z_0.975 sigma_log sqrt(1/n_edge + 1/n_interior) (sigma_log: one run's noise in log L; 0:
    strict). `bracketed` is inside or within the noise."""
    size = size or ("width" if "width" in table.columns else "N")
    rows = table[table["r"].to_numpy(dtype=float) == r].copy() if "r" in table.columns else table.copy()
    if not len(rows) or size not in rows.columns:
        return []
    rows["budget"] = budget_column(rows)
    rows["log_L"] = np.log(rows["L"].to_numpy(dtype=float))
    out = []
    for budget, group in rows.groupby("budget"):
        per_size = group.groupby(size)["log_L"].agg(["mean", "count"]).sort_index()
        widths = per_size.index.to_numpy(dtype=float)
        means, counts = per_size["mean"].to_numpy(), per_size["count"].to_numpy()
        k = int(np.argmin(means))
        inside = window_of(means)[0] is not None  # a bracketed minimum: the one rule, `window_of`
        margin = None
        if len(widths) >= MIN_SIZES and not inside:
            j = 1 + int(np.argmin(means[1:-1]))  # the best interior size
            margin = float(means[j] - means[k])  # how far the edge lies below it, in log L
            within = margin <= Z_LEVEL * sigma_log * math.sqrt(1 / counts[k] + 1 / counts[j])
        out.append(
            {
                "budget": float(budget),
                "widths": widths.tolist(),
                "n_seeds": counts.tolist(),
                "best_width": float(widths[k]),
                "inside": inside,
                "edge_margin_log": margin,
                "bracketed": bool(inside or (margin is not None and within)),
            }
        )
    return out


MIN_SIZES = 3
WINDOW_NEIGHBOURS = 2  # sizes on each side of the lowest one in a budget's window
WINDOW_RULE = (
    f"the lowest size's mean log L and its {WINDOW_NEIGHBOURS} nearest sizes on each side (3 to "
    f"{2 * WINDOW_NEIGHBOURS + 1} points), a parabola of log L in ln N through them; N* at its vertex"
)


def window_of(y: np.ndarray) -> tuple[slice | None, str | None]:
    """The window around the lowest of a budget's size means y (sorted by N), or (None, why there is none)."""
    if len(y) < MIN_SIZES:
        return None, f"{len(y)} size(s), a parabola needs {MIN_SIZES}"
    k = int(np.argmin(y))
    if k in (0, len(y) - 1):
        return None, "the lowest loss is at an edge of the sizes trained (no bracketed minimum)"
    return slice(max(0, k - WINDOW_NEIGHBOURS), min(len(y), k + WINDOW_NEIGHBOURS + 1)), None


def vertex(x: np.ndarray, y: np.ndarray, weights: np.ndarray | None = None) -> tuple[float | None, str | None]:
    """(x of the vertex of the least-squares parabola y = c0 + c1 x + c2 x^2, None), or (None, why not): it must
    open upwards and its vertex lie within the points' x."""
    c2, c1, _ = np.polyfit(x, y, 2, w=None if weights is None else np.sqrt(weights))
    if not c2 > 0:
        return None, "the window's losses do not curve upwards (no minimum)"
    v = -c1 / (2 * c2)
    if not x.min() <= v <= x.max():
        return None, f"the window's parabola has its minimum N* = {np.exp(v):.3g} outside the window"
    return float(v), None


def budget_curve(log_n: np.ndarray, log_L: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x = ln N of each size, sorted; the mean log L over its runs; the runs per size)."""
    frame = pd.DataFrame({"x": np.round(log_n, 9), "y": log_L}).groupby("x")["y"].agg(["mean", "count"])
    return frame.index.to_numpy(float), frame["mean"].to_numpy(float), frame["count"].to_numpy(float)


def window_vertex(x, y, n) -> tuple[float | None, slice | None, str | None]:
    """(ln N*, the window, None) of one budget's curve, or (None, window or None, why)."""
    win, why = window_of(y)
    if win is None:
        return None, None, why
    v, why = vertex(x[win], y[win], n[win])
    return v, win, why


def compute_optimal_curve(table: pd.DataFrame, fit: FitResult, r: float, C: np.ndarray):
    """(N*, D*) at budgets C for models with r recurrences, from the fitted law.

    At fixed r the architecture family fixes N_eff = c N (`Law.effective_size`: N_once + m_r N_rec) and the
    training cost per token F = f N (c, f: medians over that r's runs). With D = C / F the law is
    L(N) = E + A (c N)^-alpha + B (C / (f N))^-beta; setting dL/dN = 0 gives the closed form
        N* = (alpha A c^-alpha / (beta B))^(1/(alpha+beta)) * (C / f)^(beta/(alpha+beta)),
        D* = C / (f N*).
    """
    p = fit.params
    g = table[table["r"].to_numpy(dtype=float) == r]
    N = g["N"].to_numpy(dtype=float)
    F = g["C"].to_numpy(dtype=float) / g["D"].to_numpy(dtype=float)
    c = float(np.median(law_class(fit.law).from_params(p).effective_size(p, g) / N))
    f = float(np.median(F / N))
    C = np.asarray(C, dtype=float)
    N_star = optimal_size(p, C, c, f)
    return N_star, C / (f * N_star)
