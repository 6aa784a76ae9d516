"""The looped law with a per-pass class (docs/design.md, "Parameter accounting"): parameters used once per pass
(per-pass low-rank adapters, a loop-index embedding: N_pass) count once, as N_once does:

    L = E + A (N_once + N_pass + r^phi N_rec)^-alpha + B D^-beta        (params E, A, alpha, B, beta, phi)

Why once: each token passes through every slice of N_pass exactly once (pass i's slice in pass i), as it passes
through N_once once, while it passes through N_rec r times; r^phi prices the reuse of shared weights, and N_pass
is not reused. The training cost is C = 6 (N_once + N_pass + r N_rec) D. On a table without per-pass parameters
(N_pass = 0) it is the looped law. The alternative treatment, the slices pooled with the block they adapt
(N_once + r^phi (N_rec + N_pass / r)), is a rival form for `loopscale validate`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from loopscale.fit.laws.form import LawData
from loopscale.fit.laws.looped import Looped
from loopscale.fit.laws.registry import register

PASS_COLUMNS = ("N_once", "N_pass", "N_rec", "r")


def with_n_pass(data: LawData, table) -> LawData:
    """`data` with the table's N_pass column in `extra` (kept through resampling)."""
    return LawData(
        data.N_once, data.N_rec, data.r, data.D, data.L, data.recipe, {"N_pass": np.asarray(table["N_pass"])}
    )


def cost_with_n_pass(cols):
    """N_once + N_pass + r N_rec: the N of C = 6 N D."""
    return cols["N_once"] + cols["N_pass"] + cols["r"] * cols["N_rec"]


@register
@dataclass(frozen=True)
class LoopedPass(Looped):
    name = "looped-pass"
    formula = "L = E + A (N_once + N_pass + r^phi N_rec)^-alpha + B D^-beta"
    size_columns = PASS_COLUMNS
    point_columns = ("r", "N_once", "N_pass", "N_rec", "D", "L")
    zero_allowed = ("N_once", "N_pass", "N_rec")
    cost_formula = "N_once + N_pass + r N_rec"

    @classmethod
    def cost_params(cls, cols):
        return cost_with_n_pass(cols)

    @classmethod
    def data_from_table(cls, table) -> LawData:
        return with_n_pass(super().data_from_table(table), table)

    def n_once(self, data: LawData) -> np.ndarray:
        return data.N_once + data.extra.get("N_pass", 0.0)  # 0 when the data has no per-pass class
