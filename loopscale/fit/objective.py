"""The fitter's objective: a robust loss of the log residuals (docs/design.md, "Fitting").

Hoffmann et al. 2022, eq. 10, fitted in log space (Besiroglu et al. 2024):

    sum_i w_i * rho(z_i),   z_i = (log L_hat_i - log L_i) / sigma_i,   rho = Huber(delta) or 0.5 x^2

with w_i = 1 for a plain fit and bootstrap counts for a replicate. sigma_i is 1 (residuals in log units,
delta = 1e-3 by default) unless the data carry a seed sigma per row (`LawData.sigma`, `loopscale.fit.noise`):
then z is the standardised residual and delta is on that scale (`noise.STANDARDISED_DELTA`). Here: the
loss (`Loss`: rho, its derivative psi and psi'), the objective with its analytic gradient (and exact Hessian
for laws that have one), and the objective at many parameter vectors at once, in chunks of bounded memory
(`chunk_size`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from loopscale.errors import InputError
from loopscale.fit.laws.form import Law, LawData

DEFAULT_DELTA = 1e-3
# Elements (rows x starts x ...) one vectorised pass may hold: bounds memory on big tables
# (2^22 float64 = 32 MiB per array).
CHUNK_ELEMENTS = 1 << 22


@dataclass(frozen=True)
class Loss:
    """Per-residual loss: ``huber`` with threshold `delta` (in log units) or plain ``l2`` (0.5 x^2)."""

    kind: str = "huber"
    delta: float = DEFAULT_DELTA

    def __post_init__(self) -> None:
        if self.kind not in ("huber", "l2"):
            raise InputError(f"loss must be 'huber' or 'l2'; got {self.kind!r}")
        if self.kind == "huber" and not (np.isfinite(self.delta) and self.delta > 0):
            raise InputError(
                f"Huber delta must be a finite number > 0; got {self.delta} (use loss 'l2' for plain least squares)"
            )

    def rho(self, x: np.ndarray) -> np.ndarray:
        if self.kind == "l2":
            return 0.5 * x * x
        ax = np.abs(x)
        return np.where(ax <= self.delta, 0.5 * x * x, self.delta * (ax - 0.5 * self.delta))

    def psi(self, x: np.ndarray) -> np.ndarray:
        """d rho / d x."""
        return x if self.kind == "l2" else np.clip(x, -self.delta, self.delta)

    def psi_prime(self, x: np.ndarray) -> np.ndarray:
        return np.ones_like(x) if self.kind == "l2" else (np.abs(x) <= self.delta).astype(float)


def residuals(log_pred: np.ndarray, data: LawData) -> np.ndarray:
    """The objective's residuals: log L_hat - log L, divided by the row's seed sigma when the data carry one
    (`log_pred`: one row of predictions, or a batch (M, rows))."""
    res = log_pred - data.log_L
    return res if data.sigma is None else res / data.sigma


def scaled_jacobian(J: np.ndarray, data: LawData) -> np.ndarray:
    """d residuals / d theta from d log L_hat / d theta (rows x params, or a batch (M, rows, params))."""
    return J if data.sigma is None else J / data.sigma[:, None]


def objective(theta, law: Law, data: LawData, loss: Loss, weights=None) -> float:
    """Sum of rho(residual), weighted by bootstrap counts when given."""
    res = residuals(law.log_predict(theta, data), data)
    r = loss.rho(res)
    return float(r.sum() if weights is None else weights @ r)


def objective_and_grad(theta, law: Law, data: LawData, loss: Loss, weights=None):
    """(objective, gradient in internal coordinates): grad = sum_i w_i psi(res_i) d log L_hat_i."""
    log_pred, J = law.log_predict_and_jac(theta, data)
    res, J = residuals(log_pred, data), scaled_jacobian(J, data)
    rho, psi = loss.rho(res), loss.psi(res)
    if weights is not None:
        rho, psi = weights * rho, weights * psi
    return float(rho.sum()), psi @ J


def chunk_size(n_rows: int, per_row: int = 1, cap: int = 2048) -> int:
    """How many problems (starts, replicates) one vectorised pass takes so that problems x rows x
    per_row stays within CHUNK_ELEMENTS: memory bounded whatever the table's size."""
    return int(max(1, min(cap, CHUNK_ELEMENTS // max(1, n_rows * per_row))))


def batch_objective(thetas: np.ndarray, law: Law, data: LawData, loss: Loss, chunk: int | None = None):
    """Objective at many parameter vectors (M, n_params) -> (M,), vectorised in chunks."""
    chunk = chunk or chunk_size(len(data), 4)
    out = np.empty(len(thetas))
    for lo in range(0, len(thetas), chunk):
        res = residuals(law.log_predict_batch(thetas[lo : lo + chunk], data), data)
        out[lo : lo + chunk] = loss.rho(res).sum(axis=1)
    return np.where(np.isfinite(out), out, np.inf)


def objective_grad_hess(theta, law: Law, data: LawData, loss: Loss, weights=None):
    """(objective, gradient, exact Hessian, IRLS curvature) in internal coordinates, for laws with
    `Law.has_hessian`.

    Exact: H = sum_i w_i [psi'(res_i) J_i J_i^T + psi(res_i) d^2 log L_hat_i], the Gauss-Newton
    part from the rows inside the Huber threshold (psi' = 1 there, 0 outside), the second part the
    model's curvature weighted by psi (`Law.log_predict_jac_hess`). IRLS: sum_i w_i
    min(1, delta / |res_i|) J_i J_i^T, positive semi-definite and a majoriser (as in `lm_batch`). With a seed
    sigma, J and the model's curvature are those of the standardised residual (both divided by sigma_i).
    """
    log_pred, J, hess = law.log_predict_jac_hess(theta, data)
    res, J = residuals(log_pred, data), scaled_jacobian(J, data)
    rho, psi, dpsi = loss.rho(res), loss.psi(res), loss.psi_prime(res)
    curv = np.ones_like(res) if loss.kind == "l2" else np.minimum(1.0, loss.delta / np.maximum(np.abs(res), 1e-300))
    if weights is not None:
        rho, psi, dpsi, curv = weights * rho, weights * psi, weights * dpsi, weights * curv
    model_psi = psi if data.sigma is None else psi / data.sigma  # d^2 z_i = d^2 log L_hat_i / sigma_i
    return (float(rho.sum()), np.einsum("n,np->p", psi, J), (J.T * dpsi) @ J + hess(model_psi), (J.T * curv) @ J)
