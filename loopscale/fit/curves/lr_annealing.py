"""The LR-annealing law (Tissue et al. 2024, arXiv 2408.11029), the multi-power law's rival:

    L(t) = L0 + A S1(t)^-alpha - C S2(t),    S2(t) = sum_{k<=t} m_k,   m_k = lambda m_{k-1} + (eta_{k-1} - eta_k),

S1 the forward area under the lr (with the warmup's, as the multi-power law counts it), S2 the
momentum-weighted annealing area with the published decay lambda = 0.999 held fixed (the paper's default;
`decay` on the instance), drops after the warmup only. Four parameters, linear in L0, A and C: O(T) per curve.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from loopscale.fit.curves.drops import annealing_area
from loopscale.fit.curves.law import CurveLaw, linear_starts
from loopscale.fit.curves.registry import register
from loopscale.fit.curves.table import Curve

PUBLISHED_DECAY = 0.999


@dataclass(frozen=True)
class AnnealingFeatures:
    area: np.ndarray  # (E,) S1
    annealing: np.ndarray  # (E,) S2


@register
class LRAnnealing(CurveLaw):
    name = "lr-annealing"
    formula = "L(t) = L0 + A S1(t)^-alpha - C S2(t), S2 = sum_k m_k, m_k = 0.999 m_{k-1} + (eta_{k-1} - eta_k)"
    params = ("L0", "A", "alpha", "C")
    log_params = frozenset({"A"})
    decay = PUBLISHED_DECAY

    def features(self, curve: Curve) -> AnnealingFeatures:
        return AnnealingFeatures(
            curve.area[curve.steps], annealing_area(curve.eta, curve.warmup_end, curve.steps, self.decay)
        )

    def bounds(self, curves):
        # L0, the constant-lr asymptote, may lie above an annealed or noisy point: boxed by the highest loss
        max_loss = max(float(c.loss.max()) for c in curves)
        return [(0.0, max_loss), (-30.0, 30.0), (1e-3, 3.0), (0.0, np.inf)]

    def predict_and_jac(self, theta, feats: AnnealingFeatures):
        L0, lnA, alpha, C = theta
        power = np.exp(lnA) * feats.area**-alpha
        J = np.column_stack([np.ones_like(power), power, -power * np.log(feats.area), -feats.annealing])
        return L0 + power - C * feats.annealing, J

    def starts(self, curves, feats):
        index = {id(c): f for c, f in zip(curves, feats)}

        def columns(point, curve):
            f = index[id(curve)]
            return np.column_stack([np.ones_like(f.area), f.area ** -point["alpha"], -f.annealing])

        def assemble(point, coef):
            return [coef[0], np.log(coef[1]), point["alpha"], coef[2]]

        return linear_starts(curves, columns, {"alpha": np.linspace(0.1, 1.5, 15)}, assemble, keep=16)
