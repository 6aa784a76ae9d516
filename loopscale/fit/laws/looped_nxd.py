"""The looped law with an N x D interaction (a rival form of `loopscale validate`, in the spirit of Farseer,
arXiv 2506.10972, whose data exponent is a function of the model size): the data exponent moves with log N_eff.

    L = E + A N_eff^-alpha + B D^-(beta + gamma ln(N_eff / N_0)),   N_eff = N_once + r^phi N_rec
                                                              (params E, A, alpha, B, beta, phi, gamma; N_0 held)

gamma = 0 is the looped law. N_0 centres the interaction so beta stays the exponent at a typical size (as a rival
N_0 is the geometric mean of the data's N_once + N_rec; 1 otherwise); it is recorded with the parameters and
held, not fitted. Starts from the looped optimum with gamma in {0, +-0.01} (`warm_starts`); log L is not linear
in the extras, so no exact Hessian (LM and L-BFGS-B steps).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from loopscale.fit.laws.form import LawData, user_value
from loopscale.fit.laws.looped import Looped
from loopscale.fit.laws.lse import lse_and_weights
from loopscale.fit.laws.registry import register

GAMMA_BOUNDS = (-0.2, 0.2)  # the data exponent may move by up to 0.2 per e-fold of N_eff


@register
@dataclass(frozen=True)
class LoopedNxD(Looped):
    name = "looped-nxd"
    formula = "L = E + A N_eff^-alpha + B D^-(beta + gamma ln(N_eff / N_0)),  N_eff = N_once + r^phi N_rec"
    rival = "N x D term (Farseer-like)"
    has_hessian = False
    compute_optimal = False  # N*(C) of this form has no closed form the figure could draw
    warm_start = Looped.name

    log_n0: float = 0.0

    @classmethod
    def from_params(cls, params) -> LoopedNxD:
        return cls(log_n0=float(np.log(params.get("N_0", 1.0))))

    @classmethod
    def rival_law(cls, data: LawData, reference) -> LoopedNxD:
        return cls(log_n0=float(np.mean(np.log(data.N_once + data.N_rec))))

    def extra_internal_names(self) -> tuple[str, ...]:
        return ("phi", "gamma")

    def extra_user_names(self) -> tuple[str, ...]:
        return ("phi", "gamma")

    def extra_bounds(self) -> list[tuple[float, float]]:
        return [*super().extra_bounds(), GAMMA_BOUNDS]

    def extras_to_user(self, x: np.ndarray) -> dict[str, float]:
        return {"phi": float(x[0]), "gamma": float(x[1]), "N_0": float(np.exp(self.log_n0))}

    def extras_from_user(self, params) -> list[float]:
        return [user_value(self.name, params, "phi", log=False), user_value(self.name, params, "gamma", log=False)]

    def classic_axes(self) -> list[np.ndarray]:
        return [*super().classic_axes(), np.array([0.0])]

    def projected_axes(self, values: np.ndarray) -> list[np.ndarray]:
        return [values, np.array([0.0])]

    def warm_starts(self, theta: np.ndarray) -> np.ndarray:
        """From the looped optimum (E, A, alpha, B, beta, phi): gamma = 0 (the looped law itself) and +-0.01."""
        return np.array([np.concatenate([theta[:6], [g]]) for g in (0.0, 0.01, -0.01)])

    def log_predict_batch(self, thetas: np.ndarray, data: LawData) -> np.ndarray:
        return self._terms(np.atleast_2d(np.asarray(thetas, dtype=float)), data, jac=False)[0]

    def log_predict_and_jac_batch(self, thetas: np.ndarray, data: LawData):
        return self._terms(np.atleast_2d(np.asarray(thetas, dtype=float)), data, jac=True)

    def _terms(self, thetas: np.ndarray, data: LawData, jac: bool):
        """log L_hat = LSE(t1, t2, e) with t1 = a - alpha l_N, t2 = b - (beta + gamma (l_N - l_0)) log D, and,
        with jac, its Jacobian: the softmax weights w_i times each term's derivative (phi through l_N in both
        terms: d l_N / d phi = r^phi N_rec log r / N_eff)."""
        e, a, alpha, b, beta, phi, gamma = (thetas[:, i : i + 1] for i in range(7))
        log_m = phi * data.log_r
        m_rec = np.exp(log_m) * data.N_rec
        n_eff = data.N_once + m_rec
        l_n = np.log(n_eff)
        centred = l_n - self.log_n0
        t1 = a - alpha * l_n
        t2 = b - (beta + gamma * centred) * data.log_D
        if not jac:
            return np.logaddexp(np.logaddexp(t1, t2), e), None
        log_pred, (w1, w2, w3) = lse_and_weights(t1, t2, e)
        dl_dphi = m_rec * data.log_r / n_eff
        J = np.empty((len(thetas), len(data), 7))
        J[:, :, 0] = w3
        J[:, :, 1] = w1
        J[:, :, 2] = -w1 * l_n
        J[:, :, 3] = w2
        J[:, :, 4] = -w2 * data.log_D
        J[:, :, 5] = (-alpha * w1 - w2 * gamma * data.log_D) * dl_dphi
        J[:, :, 6] = -w2 * centred * data.log_D
        return log_pred, J
