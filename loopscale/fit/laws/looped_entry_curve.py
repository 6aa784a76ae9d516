"""looped-entry at every evaluation of every run's loss curve: the one-off price of looping with the schedule's terms.

    L(t) = E + A (N_once + m_r N_rec)^-alpha + B S1(t)^-beta - K S2(t),   m_1 = 1,   m_r = kappa r^phi for r > 1
                                                                  (params E, A, alpha, B, beta, phi, kappa, K)

The multiplier is looped-entry's (`looped_entry.py`: kappa < 1 a fixed price of sharing a block's weights across
passes, phi the worth of one more doubling among the looped models), the data term looped-curve's (`looped_curve.py`:
S1 the lr-weighted tokens, S2 the annealing area, K the loss a full anneal takes off; lambda held at its 0). Where
the schedule's terms vanish (a run at its peak lr to the end: S1 = D, S2 = 0) it is looped-entry; at the end of
loopscale's wsd run it is looped-entry with E' = E - K and B' = B 0.9^-beta (`final_point_params`), the law
`power` and `curve_worth` read. kappa's box is looped-entry's (`bounds.LOG_KAPPA_BOUNDS`). Fitted as looped-curve
is (`fit CURVES.csv --law looped-entry-curve --loss-col val_loss`: multi-start from looped-curve's optimum, phi
profiled, the bootstrap clustered by run or parent); it needs two or more r > 1, as looped-entry does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from loopscale.fit.bounds import BOUNDS, LOG_KAPPA_BOUNDS
from loopscale.fit.laws.form import LawData, user_value
from loopscale.fit.laws.looped_curve import K_BOUNDS, LoopedCurve
from loopscale.fit.laws.looped_entry import WARM_LOG_KAPPA, LoopedEntry
from loopscale.fit.laws.registry import register


@register
@dataclass(frozen=True)
class LoopedEntryCurve(LoopedCurve):
    name = "looped-entry-curve"
    formula = "L(t) = E + A (N_once + kappa^[r>1] r^phi N_rec)^-alpha + B S1(t)^-beta - K S2(t)"
    warm_start = LoopedCurve.name
    final_law = LoopedEntry.name
    looped_at = LoopedEntry.looped_at

    @classmethod
    def check_table(cls, table) -> None:
        LoopedEntry.check_table(table)  # phi is a slope across two or more r > 1

    def extra_internal_names(self) -> tuple[str, ...]:
        return ("phi", "log_kappa", "k")

    def extra_user_names(self) -> tuple[str, ...]:
        return ("phi", "kappa", "K")

    def extra_bounds(self) -> list[tuple[float, float]]:
        return [BOUNDS["phi"], LOG_KAPPA_BOUNDS, K_BOUNDS]

    def extras_to_user(self, x: np.ndarray) -> dict[str, float]:
        return {"phi": float(x[0]), "kappa": float(np.exp(x[1])), "K": float(np.exp(x[2])), "lambda": self.decay}

    def extras_from_user(self, params) -> list[float]:
        return [*LoopedEntry.extras_from_user(self, params), user_value(self.name, params, "K", log=True)]

    def multiplier(self, params, r: float, recipe: str | None = None) -> np.ndarray:
        return LoopedEntry.multiplier(self, params, r, recipe)

    def log_multiplier(self, thetas: np.ndarray, data: LawData):
        """log m = phi ln r + [r > 1] ln kappa (internal coordinates 5 and 6; ln K, the 7th, is the anneal's)."""
        return LoopedEntry.log_multiplier(self, thetas, data)

    def classic_axes(self) -> list[np.ndarray]:
        return [np.array([0.0, 0.5, 1.0]), np.array([0.0, -0.7]), np.log([0.01, 0.3, 3.0])]

    def projected_axes(self, values: np.ndarray) -> list[np.ndarray]:
        return [values, np.array([0.0, -0.7]), np.log([0.01, 0.3, 3.0])]

    def warm_starts(self, theta: np.ndarray) -> np.ndarray:
        """From looped-curve's optimum (E, A, alpha, B, beta, phi, ln K): kappa = 1 (looped-curve itself) and a price
        either way, phi and K kept; and phi = 0.5 with kappa = 0.5 (where r^phi's phi ran to a bound, the optimum it
        gives is a poor start for phi)."""
        starts = [np.concatenate([theta[:6], [log_kappa], theta[6:]]) for log_kappa in WARM_LOG_KAPPA]
        starts.append(np.concatenate([theta[:5], [0.5, np.log(0.5)], theta[6:]]))
        return np.array(starts)
