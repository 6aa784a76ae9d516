"""The Chinchilla law of dense models (Hoffmann et al. 2022, eq. 10): N_eff = N, no recurrence.

    L = E + A N^-alpha + B D^-beta        (params E, A, alpha, B, beta)

It reads N (or N_once + N_rec when the table has no N) and D, or C with D = C / (6 N). The published
parameters (`loopscale.analysis.published_laws`) are of this law, so a report compares them with its fit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from loopscale.errors import InputError
from loopscale.fit.laws.form import Law, LawData, _float_columns, _tokens_from_compute
from loopscale.fit.laws.registry import register


@register
@dataclass(frozen=True)
class Chinchilla(Law):
    name = "chinchilla"
    formula = "L = E + A N^-alpha + B D^-beta"
    size_columns = ("N",)
    derivable = {"N": ("N_once", "N_rec")}
    point_columns = ("N", "D", "L")
    cost_formula = "N"
    dense = True

    @classmethod
    def check_table(cls, table) -> None:
        """Any table of N, D and L identifies the law (r is not read)."""

    @classmethod
    def invalid_rows(cls, table) -> None:
        """N > 0 is checked with its column."""
        return None

    @classmethod
    def cost_params(cls, cols) -> np.ndarray:
        return cols["N"]

    @classmethod
    def data_from_table(cls, table) -> LawData:
        """N (or N_once + N_rec) and D (or C, D = C / (6 N)) as a looped table of r = 1, N_rec = 0."""
        cols = _float_columns(table, ("N", "N_once", "N_rec", "D", "C", "L"))
        if "N" in cols:
            N = cols["N"]
        elif "N_once" in cols and "N_rec" in cols:
            N = cols["N_once"] + cols["N_rec"]
        else:
            raise InputError("chinchilla law needs column 'N' (or 'N_once' and 'N_rec')")
        D = cols["D"] if "D" in cols else _tokens_from_compute(cols, N)
        return LawData(N, np.zeros_like(N), np.ones_like(N), D, cols.get("L"))

    def multiplier(self, params, r: float, recipe: str | None = None) -> np.ndarray:
        """m = 1: N_eff = N_once + N_rec, the unique parameters, whatever r (the law says nothing about what a
        recurrence is worth, so it advises r = 1 only: `dense`)."""
        return np.ones_like(np.asarray(params["E"], dtype=float))

    def log_n_eff_batch(self, thetas: np.ndarray, data: LawData, jac: bool = True):
        """N_eff = N: no multiplier to apply."""
        log_n = np.broadcast_to(np.log(data.N_once + data.N_rec), (len(thetas), len(data)))
        return log_n, (np.empty((len(thetas), len(data), 0)) if jac else None)
