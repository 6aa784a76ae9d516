"""The looped law whose exponent runs with the size over several recipes that share the dense model: one phi per
recipe read at one reference size, one psi (`fit --law looped-logn --joint recipe`; `loopscale power` simulates a
looped-logn pilot's delta-phi with it).

    L = E + A (N_once + r^(phi_g + psi ln(N_c / N_ref)) N_rec)^-alpha + B D^-beta,   N_c = N_once + r N_rec

psi, how fast a pass loses worth as the model widens (loopscale/fit/laws/looped_logn.py), is shared as the dense
model is, so a recipe's difference is a shift of its exponent at every size: delta-phi = phi_g - phi, the coordinate
the verdict profiles (`dphi[g]`, as in the looped-joint law). Every recipe's phi is read at the same N_ref, the
joint table's geometric N_c (`with_data`), and each recipe's separate fit is read there too (`separate_law`): a
separate fit binding its own N_ref would compare phis at two sizes. log m = (phi + dphi[g]) ln r + psi ln r
ln(N_c / N_ref) is linear in the extras, so the looped law's exact Newton steps serve it too.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from loopscale.fit.bounds import PSI_BOUNDS
from loopscale.fit.laws.form import LawData, user_value
from loopscale.fit.laws.looped_joint import LoopedJoint, phis_in_range, recipe_phi
from loopscale.fit.laws.looped_logn import PSI_STARTS, LoopedLogN, log_size, reference_size
from loopscale.fit.laws.registry import register


@register
@dataclass(frozen=True)
class LoopedLogNJoint(LoopedJoint):
    name = "looped-logn-joint"
    formula = "L = E + A (N_once + r^(phi_g + psi ln(N_c/N_ref)) N_rec)^-alpha + B D^-beta   (g: the run's recipe)"
    recipe_law = LoopedLogN.name
    looped_at = LoopedLogN.looped_at

    N_ref: float | None = None  # where every recipe's phi is read; None: not yet bound to a table

    @classmethod
    def from_params(cls, params) -> LoopedLogNJoint:
        return replace(super().from_params(params), N_ref=float(params["N_ref"]) if "N_ref" in params else None)

    @classmethod
    def check_table(cls, table) -> None:
        LoopedLogN.check_table(table)  # sizes 1.5x apart or more: psi is a slope across them

    def with_data(self, data: LawData) -> LoopedLogNJoint:
        """N_ref: the joint table's geometric N_c, shared by every recipe, unless the law holds one."""
        return self if self.N_ref is not None else replace(self, N_ref=reference_size(data))

    def single(self) -> LoopedLogN:
        """The single-recipe law at this N_ref (its `_ref` refuses an unbound law)."""
        return LoopedLogN(N_ref=self.N_ref)

    def separate_law(self) -> LoopedLogN:
        """Each recipe's separate fit: looped-logn read at the joint N_ref, so the separate phis compare at it."""
        return self.single()

    def bounds(self) -> list[tuple[float, float]]:
        self.single().bounds()  # refuses an unbound N_ref in one line
        return super().bounds()

    @classmethod
    def predict_table(cls, params, table, recipe_column: str | None = None) -> np.ndarray:
        """L_hat per row: each row's recipe phi (`recipe_phi`) plus psi ln(N_c / N_ref)."""
        phi = recipe_phi(table, params, recipe_column or "recipe")
        cols = {c: np.asarray(table[c], dtype=float) for c in ("N_once", "N_rec", "r", "D")}
        size = log_size(cols["N_once"], cols["N_rec"], cols["r"], cls.from_params(params).single()._ref())
        n = cols["N_once"] + cols["r"] ** (phi + params["psi"] * size) * cols["N_rec"]
        return params["E"] + params["A"] * n ** -params["alpha"] + params["B"] * cols["D"] ** -params["beta"]

    def multiplier(self, params, r: float, recipe: str | None = None) -> np.ndarray:
        return self.single().multiplier(params, r, recipe)  # refused: m reads the size too

    def multiplier_scaling(self, params, r: float, recipe: str | None = None):
        """looped-logn's at recipe `recipe`'s phi (the reference's when None) and the shared psi."""
        recipe = recipe or self.recipes[0]
        return self.single().multiplier_scaling({**params, "phi": params[self.recipe_param(recipe)]}, r)

    def effective_size(self, params, cols, recipe: str | None = None) -> np.ndarray:
        """N_eff per row at recipe `recipe`'s phi (the reference's when None)."""
        recipe = recipe or self.recipes[0]
        return self.single().effective_size({**params, "phi": params[self.recipe_param(recipe)]}, cols)

    def to_user(self, theta: np.ndarray) -> dict[str, float]:
        """The user parameters and N_ref (held: a record rebuilds the law from it, `from_params`)."""
        return {**super().to_user(theta), "N_ref": self.single()._ref()}

    def extra_internal_names(self) -> tuple[str, ...]:
        return (*super().extra_internal_names(), "psi")

    def extra_user_names(self) -> tuple[str, ...]:
        return (*super().extra_user_names(), "psi")

    def extra_bounds(self) -> list[tuple[float, float]]:
        return [*super().extra_bounds(), PSI_BOUNDS]

    def extras_to_user(self, x: np.ndarray) -> dict[str, float]:
        return {**super().extras_to_user(x[:-1]), "psi": float(x[-1])}

    def from_user(self, params) -> np.ndarray:
        return np.concatenate([super().from_user(params), [user_value(self.name, params, "psi", log=False)]])

    def classic_axes(self) -> list[np.ndarray]:
        return [*super().classic_axes(), PSI_STARTS]

    def projected_axes(self, values: np.ndarray) -> list[np.ndarray]:
        return [*super().projected_axes(values), PSI_STARTS]

    def keep_projected(self, grid: np.ndarray) -> np.ndarray:
        """Rows (alpha, beta, phi, dphi..., psi) whose every recipe phi lies in [0, 1.2]."""
        return grid[phis_in_range(grid[:, :-1])]

    def projected_grid(self, alphas: np.ndarray, betas: np.ndarray, values: np.ndarray) -> np.ndarray:
        """looped-joint's grid with psi at 0 on every row beyond five recipes (up to five: the product, psi's
        starts included)."""
        grid = super().projected_grid(alphas, betas, values)
        return grid if grid.shape[1] == 3 + len(self.recipes) else np.column_stack([grid, np.zeros(len(grid))])

    def log_multiplier(self, thetas: np.ndarray, data: LawData):
        """log m = (phi + dphi[g]) ln r + psi ln r ln(N_c / N_ref): linear in the extras."""
        log_m, dlogm = super().log_multiplier(thetas[:, :-1], data)
        slope = data.log_r * log_size(data.N_once, data.N_rec, data.r, self.single()._ref())
        return log_m + thetas[:, -1:] * slope, np.column_stack([dlogm, slope])
