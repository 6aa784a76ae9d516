"""The looped law with an exponent that runs with log r: is one more doubling of passes worth the same as the last?

    L = E + A (N_once + r^(phi + psi ln(r / 4)) N_rec)^-alpha + B D^-beta    (params E, A, alpha, B, beta, phi, psi)

The exponent a looped block earns at r passes, phi_r = ln m_r / ln r = phi + psi ln(r / 4), is a line in ln r: psi = 0
is the looped law (r^phi), psi > 0 says later passes pay more than the first ones, psi < 0 that they saturate. phi is
the exponent at r = 4, the middle of the published r in {2, 4, 8} (where r = 1 is, phi_r is not defined: m_1 = 1 for
every phi_r, so a phi read at r -> 1 would be an extrapolation that runs to the box on data that bend). It sits
between r^phi (one number for every r) and the free k_r (one per r): with r in {1, 2, 4, 8} it has one parameter
fewer than k_r, so `validate`'s AICc can tell "phi runs with r" from "k_r follows no smooth form". It needs two or
more r > 1 (psi is a slope across them). log m = phi ln r + psi ln r ln(r / 4) is linear in (phi, psi), so the exact
Newton steps of the looped law serve it too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from loopscale.errors import InputError
from loopscale.fit.bounds import BOUNDS, PSI_BOUNDS
from loopscale.fit.laws.form import Law, LawData, user_value
from loopscale.fit.laws.looped import Looped
from loopscale.fit.laws.registry import register


@register
@dataclass(frozen=True)
class LoopedLogR(Law):
    name = "looped-logr"
    formula = "L = E + A (N_once + r^(phi + psi ln(r/4)) N_rec)^-alpha + B D^-beta"
    profile_param = "phi"
    warm_start = Looped.name
    rival = "r^(phi + psi ln(r/4))"
    departure = "phi runs with r"
    looped_at = {"psi": 0.0}
    r_ref: ClassVar[float] = 4.0  # where phi is read (phi_r at r = r_ref)

    @classmethod
    def check_table(cls, table) -> None:
        super().check_table(table)
        looped = np.unique(table["r"].to_numpy(dtype=float))
        if np.count_nonzero(looped > 1) < 2:
            raise InputError(
                f"law {cls.name!r} needs runs at two or more r > 1 (psi is the slope of phi across them); "
                f"the table has r = {', '.join(f'{v:g}' for v in looped)}"
            )

    def extra_internal_names(self) -> tuple[str, ...]:
        return ("phi", "psi")

    def extra_user_names(self) -> tuple[str, ...]:
        return ("phi", "psi")

    def extra_bounds(self) -> list[tuple[float, float]]:
        return [BOUNDS["phi"], PSI_BOUNDS]

    def extras_to_user(self, x: np.ndarray) -> dict[str, float]:
        return {"phi": float(x[0]), "psi": float(x[1])}

    def extras_from_user(self, params) -> list[float]:
        return [user_value(self.name, params, name, log=False) for name in ("phi", "psi")]

    def multiplier(self, params, r: float, recipe: str | None = None) -> np.ndarray:
        """m_r = r^(phi + psi ln(r / r_ref)), for figures and advice."""
        log_r = np.log(float(r))
        phi, psi = (np.asarray(params[k], dtype=float) for k in ("phi", "psi"))
        return np.exp((phi + psi * (log_r - np.log(self.r_ref))) * log_r)

    def warm_starts(self, theta: np.ndarray) -> np.ndarray:
        """From the looped optimum (E, A, alpha, B, beta, phi): psi = 0 (the looped law itself) and a slope either
        way, phi_r at r_ref kept where the looped fit put it."""
        return np.array([np.concatenate([theta[:5], [theta[5], psi]]) for psi in (0.0, -0.25, 0.25)])

    def log_multiplier(self, thetas: np.ndarray, data: LawData):
        """log m = phi ln r + psi ln r ln(r / r_ref), and its derivatives: linear in (phi, psi)."""
        dlogm = np.stack([data.log_r, data.log_r * (data.log_r - np.log(self.r_ref))], axis=1)  # (rows, 2)
        return thetas[:, 5:7] @ dlogm.T, dlogm
