"""The minimum of each iso-FLOP curve of a runs table, and whether it lies inside the sizes sampled at its
budget, judged against the noise of one run (the verdict's "N*/D* extrapolation" check, the conditioning
diagnostics): a law fitted where every minimum is bracketed interpolates N*(C), D*(C); otherwise it extrapolates.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

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
        inside = bool(len(widths) >= 3 and 0 < k < len(widths) - 1)
        margin = None
        if len(widths) >= 3 and not inside:
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
