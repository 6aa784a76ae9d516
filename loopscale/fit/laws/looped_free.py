"""The looped law with a free multiplier per r: a diagnostic of the r^phi form (does k_r follow a power of r?).

    L = E + A (N_once + k_r N_rec)^-alpha + B D^-beta,   k_1 = 1        (params E, A, alpha, B, beta, k_<r>)

One k_<r> per r > 1 in the data (internally log k_r, in which log m is linear); the r = 1 runs anchor the
multipliers, so the table needs them. Its fit starts from the looped law's optimum with k_r = r^phi_hat,
k_r = 1 and k_r = r (`warm_starts`) instead of screening a grid.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from loopscale.errors import InputError
from loopscale.fit.bounds import LOG_K_BOUNDS
from loopscale.fit.laws.form import Law, LawData, r_label, user_value
from loopscale.fit.laws.looped import Looped
from loopscale.fit.laws.registry import register


@register
@dataclass(frozen=True)
class LoopedFree(Law):
    """r_values: the distinct r > 1 that get a free multiplier."""

    name = "looped-free"
    formula = "L = E + A (N_once + k_r N_rec)^-alpha + B D^-beta   (k_1 = 1)"
    per_r_multipliers = True
    compute_optimal = False  # k_r says nothing between or beyond the r it was fitted at
    warm_start = Looped.name
    rival = "k_r per r (free multiplier)"

    r_values: tuple[float, ...] = ()

    @classmethod
    def bind(cls, r=None, recipes=()) -> LoopedFree:
        if r is None:
            raise InputError("looped-free needs the r values of the data")
        return cls(tuple(float(v) for v in np.unique(np.asarray(r, dtype=float)) if v != 1.0))

    @classmethod
    def from_params(cls, params) -> LoopedFree:
        return cls(tuple(float(k[2:]) for k in params if k.startswith("k_")))

    @classmethod
    def check_table(cls, table) -> None:
        super().check_table(table)
        if 1.0 not in np.unique(table["r"].to_numpy(dtype=float)):
            raise InputError("law 'looped-free' needs r = 1 runs (k_1 = 1 anchors the multipliers)")

    @classmethod
    def predict_table(cls, params, table, recipe_column: str | None = None) -> np.ndarray:
        """L_hat per row: every r > 1 in the table needs its k_<r> in params."""
        data = cls.data_from_table(table)
        law = cls.bind(data.r)
        return np.exp(law.log_predict(law.from_user(params), data))

    def multiplier(self, params, r: float, recipe: str | None = None) -> np.ndarray:
        """k_r (1 at r = 1); InputError for an r the fit has no multiplier for."""
        if r == 1:
            return np.ones_like(np.asarray(params["E"], dtype=float))
        have = sorted(int(float(k[2:])) for k in params if k.startswith("k_"))
        key = f"k_{r_label(r)}"
        if key not in params:
            raise InputError(f"the looped-free fit has a multiplier k_r for r in {have} only: pass --r among 1,{have}")
        return np.asarray(params[key], dtype=float)

    def extra_internal_names(self) -> tuple[str, ...]:
        return tuple(f"log_k_{r_label(r)}" for r in self.r_values)

    def extra_user_names(self) -> tuple[str, ...]:
        return tuple(f"k_{r_label(r)}" for r in self.r_values)

    def extra_bounds(self) -> list[tuple[float, float]]:
        return [LOG_K_BOUNDS] * len(self.r_values)

    def extras_to_user(self, x: np.ndarray) -> dict[str, float]:
        return {name: float(np.exp(v)) for name, v in zip(self.extra_user_names(), x)}

    def extras_from_user(self, params) -> list[float]:
        return [user_value(self.name, params, name, log=True) for name in self.extra_user_names()]

    def warm_starts(self, theta: np.ndarray) -> np.ndarray:
        """From the looped optimum (E, A, alpha, B, beta, phi): k_r = r^phi_hat, k_r = 1 and k_r = r."""
        log_r = np.log(np.array(self.r_values))
        return np.array([np.concatenate([theta[:5], s * log_r]) for s in (theta[5], 0.0, 1.0)])

    def log_multiplier(self, thetas: np.ndarray, data: LawData):
        """log k_r on the rows of r (log m = 0 on r = 1 rows): linear in the log k."""
        M, n = len(thetas), len(data)
        log_m = np.zeros((M, n))
        dlogm = np.zeros((n, len(self.r_values)))
        for j, r in enumerate(self.r_values):
            log_m[:, data.r == r] = thetas[:, 5 + j : 6 + j]
            dlogm[data.r == r, j] = 1.0
        return log_m, dlogm
