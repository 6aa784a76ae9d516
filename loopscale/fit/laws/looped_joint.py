"""The looped law over several recipes that share the dense model: one phi per recipe (`loopscale.fit.joint`).

    L = E + A (N_once + r^phi_g N_rec)^-alpha + B D^-beta,   g = the run's recipe

Recipes (baseline, truncated backprop, ...) share the dense model: their r = 1 runs are the same runs, and
r^phi_g = 1 there whatever g, so an r = 1 row belongs to every recipe at once. Internally the first recipe's
exponent is ``phi`` and every other recipe g has ``dphi[g] = phi_g - phi``, so delta-phi is a coordinate that
the profile machinery can hold fixed; the user-facing names are ``phi[<recipe>]``. Rows carry an integer
recipe code (`LawData.recipe`, the table's RECIPE_CODE column); a fit record's rows are matched to recipes by
the recipe column it names (`recipe_phi`).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pandas as pd

from loopscale.errors import InputError
from loopscale.fit.bounds import BOUNDS, DPHI_BOUNDS
from loopscale.fit.laws.form import Law, LawData, n_eff
from loopscale.fit.laws.looped import Looped
from loopscale.fit.laws.registry import register

# The projected starts screen at most this many combinations of the recipes' phi (3^5: all of them up to
# five recipes on the 3-value axis, `LoopedJoint.projected_grid`).
MAX_PHI_COMBOS = 243

RECIPE_CODE = "_recipe_code"  # column of a joint table (`joint.joint_table`): index into the recipe list


@register
@dataclass(frozen=True)
class LoopedJoint(Law):
    """recipes: the recipe names, the reference (delta-phi = 0) first."""

    name = "looped-joint"
    formula = "L = E + A (N_once + r^phi_g N_rec)^-alpha + B D^-beta   (g: the run's recipe)"
    per_recipe = True
    recipe_law = Looped.name

    recipes: tuple[str, ...] = ()

    @staticmethod
    def recipe_param(recipe: str, delta: bool = False) -> str:
        """The name of one recipe's phi (phi[<recipe>]) or, `delta`, of its difference from the reference's
        (delta_phi[<recipe>]): the names a joint fit's record, its readers and its figures use."""
        return f"{'delta_' if delta else ''}{Looped.profile_param}[{recipe}]"

    def __post_init__(self) -> None:
        if len(self.recipes) < 2:
            raise InputError(f"law 'looped-joint' needs two or more recipes; got {list(self.recipes)}")
        if len(set(self.recipes)) != len(self.recipes):
            raise InputError(f"recipe names must be distinct; got {list(self.recipes)}")

    @classmethod
    def bind(cls, r=None, recipes=()) -> LoopedJoint:
        return cls(tuple(str(g) for g in recipes))

    @classmethod
    def from_params(cls, params) -> LoopedJoint:
        return cls(tuple(k[4:-1] for k in params if k.startswith("phi[")))

    @classmethod
    def data_from_table(cls, table) -> LawData:
        """The looped law's inputs (D from C with this law's `cost_params`: N_pass too for looped-pass-joint) and,
        where the table has it, each row's recipe code (RECIPE_CODE)."""
        d = super().data_from_table(table)
        codes = np.asarray(table[RECIPE_CODE]) if RECIPE_CODE in _keys(table) else None
        return LawData(d.N_once, d.N_rec, d.r, d.D, d.L, codes)

    @classmethod
    def predict_table(cls, params, table, recipe_column: str | None = None) -> np.ndarray:
        """L_hat per row, each row at its recipe's phi (`recipe_phi`, from `recipe_column`)."""
        phi = recipe_phi(table, params, recipe_column or "recipe")
        cols = {c: np.asarray(table[c], dtype=float) for c in ("N_once", "N_rec", "r", "D")}
        n = n_eff(cols["N_once"], cols["N_rec"], cols["r"], phi)  # phi per row
        return params["E"] + params["A"] * n ** -params["alpha"] + params["B"] * cols["D"] ** -params["beta"]

    def separate_law(self) -> Law | str:
        """The law each recipe's separate fit uses: `recipe_law` (a law holding a value of the joint data, e.g. an
        N_ref, holds the joint one there)."""
        return self.recipe_law

    def multiplier(self, params, r: float, recipe: str | None = None) -> np.ndarray:
        """r^phi[recipe] (the reference recipe when None)."""
        recipe = recipe or self.recipes[0]
        if recipe not in self.recipes:
            raise InputError(f"the joint fit has no recipe {recipe!r}; its recipes: {', '.join(self.recipes)}")
        return np.power(float(r), np.asarray(params[self.recipe_param(recipe)], dtype=float))

    def extra_internal_names(self) -> tuple[str, ...]:
        return ("phi",) + tuple(f"dphi[{g}]" for g in self.recipes[1:])

    def extra_user_names(self) -> tuple[str, ...]:
        return tuple(map(self.recipe_param, self.recipes))

    def extra_bounds(self) -> list[tuple[float, float]]:
        return [BOUNDS["phi"]] + [DPHI_BOUNDS] * (len(self.recipes) - 1)

    def extras_to_user(self, x: np.ndarray) -> dict[str, float]:
        phi = float(x[0])
        return {self.recipe_param(g): float(phi + d) for g, d in zip(self.recipes, [0.0, *x[1:]])}

    def from_user(self, params) -> np.ndarray:
        """Every phi[<recipe>] is needed (the first missing one is named)."""
        missing = [k for k in self.user_names if k not in params]
        if missing:
            raise InputError(f"law {self.name!r} needs parameter {missing[0]!r}; got {sorted(params)}")
        phis = [float(params[self.recipe_param(g)]) for g in self.recipes]
        base = Looped().from_user({**params, "phi": phis[0]})
        return np.concatenate([base, np.array(phis[1:]) - phis[0]])

    def classic_axes(self) -> list[np.ndarray]:
        """Every recipe starts at the shared phi in {0, 0.5, 1}; the projected starts spread them."""
        return [self._per_recipe_axis(np.array([0.0, 0.5, 1.0]))] + [np.zeros(1)] * (len(self.recipes) - 1)

    def projected_axes(self, values: np.ndarray) -> list[np.ndarray]:
        """phi of the reference and dphi of the others, so the grid covers every recipe's phi in `values`."""
        per = self._per_recipe_axis(values)
        deltas = np.unique(np.round((per[:, None] - per[None, :]).ravel(), 12))
        return [per] + [deltas] * (len(self.recipes) - 1)

    def _per_recipe_axis(self, values: np.ndarray) -> np.ndarray:
        """`values`, or fewer of them as recipes add up, to keep the grid's product small."""
        k = len(self.recipes)
        return values if k <= 2 else np.linspace(values.min(), values.max(), max(3, int(round(49 ** (1 / k)))))

    def projected_grid(self, alphas: np.ndarray, betas: np.ndarray, values: np.ndarray) -> np.ndarray:
        """Up to five recipes: every combination of the recipes' phi (the product of `projected_axes`, kept by
        `keep_projected`). Beyond, that product grows as 5^k (nine recipes: 3 x 10^8 rows, tens of GB), so the
        phi combinations are chosen instead: every recipe at one shared phi, each recipe alone moved to every
        other value, and a seeded sample of the rest, `MAX_PHI_COMBOS` in all (the refinement that follows
        moves each phi freely; the screen only has to start it in the right basin)."""
        per = self._per_recipe_axis(values)
        k = len(self.recipes)
        if len(per) ** k <= MAX_PHI_COMBOS:
            return super().projected_grid(alphas, betas, values)
        shared = np.repeat(per[:, None], k, axis=1)  # (len(per), k): one phi for every recipe
        alone = [np.where(np.arange(k) == i, v, u) for u in per for i in range(k) for v in per if v != u]
        rng = np.random.default_rng(0)
        sample = per[rng.integers(0, len(per), size=(4 * MAX_PHI_COMBOS, k))]
        candidates = np.vstack([shared, np.array(alone), sample])
        _, first = np.unique(candidates, axis=0, return_index=True)
        phis = candidates[np.sort(first)][:MAX_PHI_COMBOS]  # distinct rows in the order above: (combos, k)
        extras = np.column_stack([phis[:, 0], phis[:, 1:] - phis[:, :1]])  # (phi, dphi[g] = phi_g - phi)
        ab = np.array(list(itertools.product(alphas, betas)))
        return np.column_stack([np.repeat(ab, len(extras), axis=0), np.tile(extras, (len(ab), 1))])

    def keep_projected(self, grid: np.ndarray) -> np.ndarray:
        """Combinations whose every recipe phi lies in [0, 1.2]."""
        return grid[phis_in_range(grid)]

    def log_multiplier(self, thetas: np.ndarray, data: LawData):
        """log m = (phi + dphi[g]) log r on recipe g's rows (dphi of the reference = 0): linear in the extras."""
        if data.recipe is None:
            raise InputError("law 'looped-joint' needs a recipe code per row (LawData.recipe)")
        M = len(thetas)
        dphi = np.concatenate([np.zeros((M, 1)), thetas[:, 6:]], axis=1)
        dlogm = np.stack([data.log_r] + [data.log_r * (data.recipe == g) for g in range(1, len(self.recipes))], 1)
        return (thetas[:, 5:6] + dphi[:, data.recipe]) * data.log_r, dlogm


def phis_in_range(grid: np.ndarray) -> np.ndarray:
    """Which rows (alpha, beta, phi, dphi[g]...) of a projected grid have every recipe's phi in [0, 1.2]."""
    phis = grid[:, 2:3] + np.hstack([np.zeros((len(grid), 1)), grid[:, 3:]])
    return np.all((phis >= -1e-9) & (phis <= 1.2 + 1e-9), axis=1)


def recipe_phi(table: pd.DataFrame, params: dict, column: str) -> np.ndarray:
    """phi per row of a runs table under a joint fit's params: phi[<recipe>] of the row's recipe on
    looped rows; on r = 1 rows (where r^phi = 1) the reference recipe's, which changes nothing."""
    names = [k[4:-1] for k in params if k.startswith("phi[")]
    r = table["r"].to_numpy(dtype=float)
    labels = table[column].astype(str).to_numpy() if column in table else np.full(len(table), names[0])
    unknown = sorted(set(labels[r > 1]) - set(names))
    if unknown:
        raise InputError(f"the joint fit has no phi for {column} = {unknown} (its recipes: {names})")
    return np.array([params[f"phi[{g}]"] if rv > 1 else params[f"phi[{names[0]}]"] for g, rv in zip(labels, r)])


def _keys(table):
    return list(table.columns) if hasattr(table, "columns") else list(table.keys())
