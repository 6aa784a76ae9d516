"""The looped law with a one-off price of looping: is a looped block worth less than unique layers before any pass pays?

    L = E + A (N_once + m_r N_rec)^-alpha + B D^-beta,   m_1 = 1,   m_r = kappa r^phi for r > 1
                                                          (params E, A, alpha, B, beta, phi, kappa)

kappa = 1 is the looped law (r^phi). kappa < 1 says that sharing a block's weights across passes costs a fixed share
of its worth whatever r is (the weights must serve every pass; the state injection must learn to read the state),
and phi is then the worth of one more doubling of passes among the looped models alone: m_4 / m_2 = m_8 / m_4 =
2^phi. Where r^phi reads the step from r = 1 (a plain stack) to r = 2 and the steps between r > 1 as one exponent, this
law gives them a parameter each, so a run of looped models that keeps pace with itself but sits below the plain
stack by a constant is told from one whose passes stop paying. It has one parameter fewer than the free k_r with
r in {1, 2, 4, 8} (so `validate`'s AICc can rank it), the same count as looped-logr (which bends phi with ln r
instead), and needs two or more r > 1 (phi is a slope across them). log m = [r > 1] ln kappa + phi ln r is linear
in (phi, ln kappa), so the exact Newton steps of the looped law serve it too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from loopscale.fit.bounds import BOUNDS, LOG_KAPPA_BOUNDS
from loopscale.fit.laws.form import Law, LawData, user_value
from loopscale.fit.laws.looped import Looped
from loopscale.fit.laws.looped_logr import LoopedLogR
from loopscale.fit.laws.registry import register

WARM_LOG_KAPPA = (0.0, -0.7, 0.7)  # warm starts in ln kappa: no price (the r^phi optimum), and a price either way


def entry_price(kappa, r) -> np.ndarray:
    """kappa^[r > 1]: the one-off price a looped row pays (1 at r = 1), per row of r."""
    return np.where(np.asarray(r, dtype=float) > 1, np.asarray(kappa, dtype=float), 1.0)


@register
@dataclass(frozen=True)
class LoopedEntry(Law):
    name = "looped-entry"
    formula = "L = E + A (N_once + kappa^[r>1] r^phi N_rec)^-alpha + B D^-beta"
    profile_param = "phi"
    warm_start = Looped.name
    rival = "kappa r^phi (r > 1)"
    departure = "looping has a one-off price"
    looped_at = {"kappa": 1.0}

    @classmethod
    def check_table(cls, table) -> None:
        LoopedLogR.check_table(table)  # the same need: two or more r > 1

    def extra_internal_names(self) -> tuple[str, ...]:
        return ("phi", "log_kappa")

    def extra_user_names(self) -> tuple[str, ...]:
        return ("phi", "kappa")

    def extra_bounds(self) -> list[tuple[float, float]]:
        return [BOUNDS["phi"], LOG_KAPPA_BOUNDS]

    def extras_to_user(self, x: np.ndarray) -> dict[str, float]:
        return {"phi": float(x[0]), "kappa": float(np.exp(x[1]))}

    def extras_from_user(self, params) -> list[float]:
        return [user_value(self.name, params, "phi", log=False), user_value(self.name, params, "kappa", log=True)]

    def multiplier(self, params, r: float, recipe: str | None = None) -> np.ndarray:
        """m_r = kappa r^phi for r > 1 and 1 at r = 1, for figures and advice."""
        return entry_price(params["kappa"], r) * float(r) ** np.asarray(params["phi"], dtype=float)

    def warm_starts(self, theta: np.ndarray) -> np.ndarray:
        """From the looped optimum (E, A, alpha, B, beta, phi): kappa = 1 (the looped law itself) and a price either
        way with phi kept."""
        return np.array([np.concatenate([theta[:6], [log_kappa]]) for log_kappa in WARM_LOG_KAPPA])

    def log_multiplier(self, thetas: np.ndarray, data: LawData):
        """log m = phi ln r + [r > 1] ln kappa, and its derivatives: linear in (phi, ln kappa)."""
        dlogm = np.stack([data.log_r, (data.log_r > 0).astype(float)], axis=1)  # (rows, 2)
        return thetas[:, 5:7] @ dlogm.T, dlogm
