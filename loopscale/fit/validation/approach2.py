"""Approach 2 of Hoffmann et al. 2022 as a cross-check of the r = 1 exponents: per compute budget, a parabola
of L in ln N through the r = 1 runs gives the budget's compute-optimal size N*(C); a line through
(ln C, ln N*) gives the exponent a of N* ~ C^a. The law fitted by Approach 3 implies a = beta / (alpha + beta)
(C = 6 N D at r = 1). Two methods on one table that disagree by more than their errors say the law's
exponents are not what the iso-FLOP minima show (DESIGN.md, "Trusting a fitted phi": Approach 2 vs 3).

A budget counts when it has 3 or more distinct sizes and its parabola opens upwards with its vertex inside
the sizes it was fitted on (a minimum not bracketed by the grid is extrapolated, and left out).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from loopscale.fit.runs_table import budget_clusters, budget_column

MIN_SIZES = 3


def budget_minimum(log_n: np.ndarray, L: np.ndarray) -> tuple[float | None, str | None]:
    """(ln N* of the parabola L = c0 + c1 x + c2 x^2 in x = ln N, None) or (None, why it has none)."""
    if len(np.unique(log_n)) < MIN_SIZES:
        return None, f"{len(np.unique(log_n))} size(s), a parabola needs {MIN_SIZES}"
    c2, c1, _ = np.polyfit(log_n, L, 2)
    if not c2 > 0:
        return None, "the losses do not curve upwards (no minimum)"
    vertex = -c1 / (2 * c2)
    if not log_n.min() <= vertex <= log_n.max():
        return None, f"the minimum N* = {np.exp(vertex):.3g} lies outside the sizes trained"
    return float(vertex), None


def iso_flop_exponent(table, law_params: dict[str, float] | None = None) -> dict[str, Any]:
    """{"budgets": [{C, N_star or None, reason}], "a", "a_se" (None below 3 minima), "a_law", "reason"} from the
    r = 1 rows (every row of a dense table); "a" is None, with the reason, below two budgets with a minimum."""
    r = table["r"].to_numpy(dtype=float) if "r" in table.columns else np.ones(len(table))
    dense = r == 1
    N = (table["N_once"] + table["N_rec"]).to_numpy(dtype=float) if "N_once" in table.columns else table["N"]
    N = np.asarray(N, dtype=float)
    labels = budget_clusters(budget_column(table))
    C_spent = table["C"].to_numpy(dtype=float)
    L = table["L"].to_numpy(dtype=float)
    rows, points = [], []
    for budget in np.unique(labels[dense]):
        at = dense & (labels == budget)
        vertex, why = budget_minimum(np.log(N[at]), L[at])
        C = float(np.exp(np.mean(np.log(C_spent[at]))))
        rows.append({"C": C, "N_star": None if vertex is None else float(np.exp(vertex)), "reason": why})
        if vertex is not None:
            points.append((np.log(C), vertex))
    out: dict[str, Any] = {"budgets": rows, "a": None, "a_se": None, "a_law": None, "reason": None}
    if law_params and {"alpha", "beta"} <= law_params.keys():
        out["a_law"] = float(law_params["beta"] / (law_params["alpha"] + law_params["beta"]))
    if not dense.any():
        out["reason"] = "the table has no r = 1 runs"
    elif len(points) < 2:
        out["reason"] = f"{len(points)} budget(s) with a bracketed minimum: a slope needs 2"
    else:
        x, y = np.array(points).T
        slope, intercept = np.polyfit(x, y, 1)
        out["a"] = float(slope)
        if len(points) >= 3:
            res = y - (slope * x + intercept)
            out["a_se"] = float(np.sqrt(res @ res / (len(x) - 2) / np.sum((x - x.mean()) ** 2)))
    return out
