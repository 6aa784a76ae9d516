"""The looped law with a one-off price of looping over several recipes that share the dense model: one phi per
recipe, one kappa (`fit --law looped-entry --joint recipe`; `loopscale power` simulates a looped-entry pilot's
delta-phi with it).

    L = E + A (N_once + m_r,g N_rec)^-alpha + B D^-beta,   m_1 = 1,   m_r,g = kappa r^phi_g for r > 1

kappa, the price a block pays for being shared across passes at all (loopscale/fit/laws/looped_entry.py), is shared
as the dense model is: a recipe's difference is read in the slope across r > 1, delta-phi = phi_g - phi, the
coordinate the verdict profiles (`dphi[g]`, as in the looped-joint law). log m = [r > 1] ln kappa + phi_g ln r is
linear in (phi, dphi, ln kappa), so the looped law's exact Newton steps serve it too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from loopscale.fit.bounds import LOG_KAPPA_BOUNDS
from loopscale.fit.laws.form import LawData, user_value
from loopscale.fit.laws.looped_entry import WARM_LOG_KAPPA, LoopedEntry, entry_price
from loopscale.fit.laws.looped_joint import LoopedJoint, phis_in_range, recipe_phi
from loopscale.fit.laws.registry import register


@register
@dataclass(frozen=True)
class LoopedEntryJoint(LoopedJoint):
    name = "looped-entry-joint"
    formula = "L = E + A (N_once + kappa^[r>1] r^phi_g N_rec)^-alpha + B D^-beta   (g: the run's recipe)"
    recipe_law = LoopedEntry.name
    warm_start = LoopedJoint.name
    looped_at = LoopedEntry.looped_at

    @classmethod
    def check_table(cls, table) -> None:
        LoopedEntry.check_table(table)  # two or more r > 1: phi is a slope across them

    @classmethod
    def predict_table(cls, params, table, recipe_column: str | None = None) -> np.ndarray:
        """L_hat per row, each row at its recipe's phi (`recipe_phi`) and kappa on looped rows."""
        phi = recipe_phi(table, params, recipe_column or "recipe")
        cols = {c: np.asarray(table[c], dtype=float) for c in ("N_once", "N_rec", "r", "D")}
        m = entry_price(params["kappa"], cols["r"]) * cols["r"] ** phi
        n = cols["N_once"] + m * cols["N_rec"]
        return params["E"] + params["A"] * n ** -params["alpha"] + params["B"] * cols["D"] ** -params["beta"]

    def multiplier(self, params, r: float, recipe: str | None = None) -> np.ndarray:
        """kappa r^phi[recipe] for r > 1, 1 at r = 1."""
        return entry_price(params["kappa"], float(r)) * super().multiplier(params, r, recipe)

    def extra_internal_names(self) -> tuple[str, ...]:
        return (*super().extra_internal_names(), "log_kappa")

    def extra_user_names(self) -> tuple[str, ...]:
        return (*super().extra_user_names(), "kappa")

    def extra_bounds(self) -> list[tuple[float, float]]:
        return [*super().extra_bounds(), LOG_KAPPA_BOUNDS]

    def extras_to_user(self, x: np.ndarray) -> dict[str, float]:
        return {**super().extras_to_user(x[:-1]), "kappa": float(np.exp(x[-1]))}

    def from_user(self, params) -> np.ndarray:
        log_kappa = user_value(self.name, params, "kappa", log=True)
        return np.concatenate([super().from_user(params), [log_kappa]])

    def classic_axes(self) -> list[np.ndarray]:
        return [*super().classic_axes(), np.zeros(1)]

    def projected_axes(self, values: np.ndarray) -> list[np.ndarray]:
        return [*super().projected_axes(values), np.zeros(1)]

    def keep_projected(self, grid: np.ndarray) -> np.ndarray:
        """Rows (alpha, beta, phi, dphi..., ln kappa) whose every recipe phi lies in [0, 1.2]."""
        return grid[phis_in_range(grid[:, :-1])]

    def projected_grid(self, alphas: np.ndarray, betas: np.ndarray, values: np.ndarray) -> np.ndarray:
        """looped-joint's grid, ln kappa = 0 on every row (beyond five recipes its chosen rows carry none)."""
        grid = super().projected_grid(alphas, betas, values)
        return grid if grid.shape[1] == 3 + len(self.recipes) else np.column_stack([grid, np.zeros(len(grid))])

    def warm_starts(self, theta: np.ndarray) -> np.ndarray:
        """From the looped-joint optimum (E, A, alpha, B, beta, phi, dphi...): kappa = 1 (the looped-joint law
        itself) and a price either way with the phis kept."""
        return np.array([np.concatenate([theta, [log_kappa]]) for log_kappa in WARM_LOG_KAPPA])

    def log_multiplier(self, thetas: np.ndarray, data: LawData):
        """log m = (phi + dphi[g]) ln r + [r > 1] ln kappa on recipe g's rows: linear in the extras."""
        log_m, dlogm = super().log_multiplier(thetas[:, :-1], data)
        looped = (data.log_r > 0).astype(float)
        return log_m + thetas[:, -1:] * looped, np.column_stack([dlogm, looped])
