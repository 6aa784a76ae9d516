"""The looped law (docs/design.md, "The question"): a block looped r times is worth r^phi unique blocks.

    L = E + A (N_once + r^phi N_rec)^-alpha + B D^-beta        (params E, A, alpha, B, beta, phi)

phi = 1: looping is worth r unique blocks; phi = 0: worth one. Its fit profiles phi (the robust
likelihood-ratio interval, `fit_table`'s `profile_phi`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from loopscale.fit.bounds import BOUNDS
from loopscale.fit.laws.form import Law, LawData, user_value
from loopscale.fit.laws.registry import register


@register
@dataclass(frozen=True)
class Looped(Law):
    name = "looped"
    formula = "L = E + A (N_once + r^phi N_rec)^-alpha + B D^-beta"
    profile_param = "phi"
    rival = "r^phi (the law)"

    def extra_internal_names(self) -> tuple[str, ...]:
        return ("phi",)

    def extra_user_names(self) -> tuple[str, ...]:
        return ("phi",)

    def extra_bounds(self) -> list[tuple[float, float]]:
        return [BOUNDS["phi"]]

    def extras_to_user(self, x: np.ndarray) -> dict[str, float]:
        return {"phi": float(x[0])}

    def extras_from_user(self, params) -> list[float]:
        return [user_value(self.name, params, "phi", log=False)]

    def multiplier(self, params, r: float, recipe: str | None = None) -> np.ndarray:
        return np.power(float(r), np.asarray(params["phi"], dtype=float))

    def classic_axes(self) -> list[np.ndarray]:
        """phi in {0, 0.5, 1}: the classic grid (Hoffmann et al.; Besiroglu et al.) extended."""
        return [np.array([0.0, 0.5, 1.0])]

    def projected_axes(self, values: np.ndarray) -> list[np.ndarray]:
        return [values]

    def log_multiplier(self, thetas: np.ndarray, data: LawData):
        """log r^phi = phi log r, linear in phi."""
        return thetas[:, 5:6] * data.log_r, data.log_r[:, None]
