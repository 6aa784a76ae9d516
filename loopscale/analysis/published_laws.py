"""Published Chinchilla-law parameters and how well each set predicts a table's runs (for `loopscale report`
on a chinchilla fit). The numbers are quoted from the papers, never fitted here."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from loopscale.fit.laws.registry import predict_loss

# Published Chinchilla-law parameters (L = E + A N^-alpha + B D^-beta, N parameters, D tokens, L nats/token),
# quoted from the papers, not fitted here: Hoffmann et al. 2022 ("Training Compute-Optimal Large Language
# Models"), Approach 3, eq. 10; Besiroglu et al. 2024 ("Chinchilla Scaling: A replication attempt", Epoch AI),
# their refit of Approach 3 on the points extracted from Hoffmann et al.'s Figure 4, 5 highest losses dropped.
PUBLISHED_CHINCHILLA = {
    "Hoffmann et al. 2022 (Approach 3)": {"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28},
    "Besiroglu et al. 2024 (replication)": {"E": 1.82, "A": 482.01, "B": 2085.43, "alpha": 0.3478, "beta": 0.3658},
}


def published_comparison(params: dict[str, float], table: pd.DataFrame | None = None) -> tuple[list[str], list[tuple]]:
    """Headers and rows: E, A, B, alpha, beta of `params` (a chinchilla fit) beside each published set, then, when
    the table has N, D and L, each set's RMS of log L - log L_hat over its rows."""
    names = ("E", "A", "B", "alpha", "beta")
    sets: dict[str, dict[str, Any]] = {"this fit": {k: params.get(k, np.nan) for k in names}, **PUBLISHED_CHINCHILLA}
    headers = ["parameter", "this fit", *[f"{k} (published)" for k in PUBLISHED_CHINCHILLA]]
    rows: list[tuple] = [(k, *[v[k] for v in sets.values()]) for k in names]
    if table is not None and len(table) and {"N", "D", "L"} <= set(table.columns):
        cols = {c: table[c].to_numpy(dtype=float) for c in ("N", "D")}
        L = table["L"].to_numpy(dtype=float)
        rms = [
            float(np.sqrt(np.mean((np.log(L) - np.log(predict_loss("chinchilla", v, cols))) ** 2)))
            for v in sets.values()
        ]
        rows.append((f"RMS log residual on these {len(L)} runs", *rms))
    return headers, rows
