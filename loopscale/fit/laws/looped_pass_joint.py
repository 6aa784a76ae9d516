"""The looped-pass law over several recipes that share the dense model: one phi per recipe, N_pass counted once
(`fit --law looped-pass --joint recipe`, loopscale/fit/joint.py):

    L = E + A (N_once + N_pass + r^phi_g N_rec)^-alpha + B D^-beta,   g = the run's recipe

The joint fit of the loop designs (docs/results.md, "Loop designs"): recipes with per-pass adapters (lora,
loop_index) and without (N_pass = 0) in one fit, each with its phi.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from loopscale.fit.laws.form import LawData, n_eff
from loopscale.fit.laws.looped_joint import LoopedJoint, recipe_phi
from loopscale.fit.laws.looped_pass import PASS_COLUMNS, LoopedPass, cost_with_n_pass, with_n_pass
from loopscale.fit.laws.registry import register


@register
@dataclass(frozen=True)
class LoopedPassJoint(LoopedJoint):
    name = "looped-pass-joint"
    formula = "L = E + A (N_once + N_pass + r^phi_g N_rec)^-alpha + B D^-beta   (g: the run's recipe)"
    recipe_law = LoopedPass.name
    size_columns = PASS_COLUMNS
    point_columns = LoopedPass.point_columns
    zero_allowed = LoopedPass.zero_allowed
    cost_formula = LoopedPass.cost_formula

    @classmethod
    def cost_params(cls, cols):
        return cost_with_n_pass(cols)

    @classmethod
    def data_from_table(cls, table) -> LawData:
        return with_n_pass(super().data_from_table(table), table)

    @classmethod
    def predict_table(cls, params, table, recipe_column: str | None = None) -> np.ndarray:
        """L_hat per row, each row at its recipe's phi, N_pass with N_once."""
        phi = recipe_phi(table, params, recipe_column or "recipe")
        cols = {c: np.asarray(table[c], dtype=float) for c in ("N_once", "N_pass", "N_rec", "r", "D")}
        n = n_eff(cols["N_once"] + cols["N_pass"], cols["N_rec"], cols["r"], phi)
        return params["E"] + params["A"] * n ** -params["alpha"] + params["B"] * cols["D"] ** -params["beta"]

    def n_once(self, data: LawData) -> np.ndarray:
        return data.N_once + data.extra.get("N_pass", 0.0)  # 0 when the data has no per-pass class
