"""The log-sum-exp form's numbers: log(e^t1 + e^t2 + e^t3) with its softmax weights, and the exact Hessian of
log L_hat = LSE(a - alpha log N_eff, b - beta log D, e) for a law whose log multiplier is linear in its extras
(`form.Law.log_predict_jac_hess`, used by the exact-Newton solver `optimize.newton`)."""

from __future__ import annotations

import numpy as np


def lse_and_weights(t1, t2, t3):
    """log(e^t1 + e^t2 + e^t3) and the softmax weights (w1, w2, w3), shifted by the largest term
    so that nothing overflows."""
    top = np.maximum(np.maximum(t1, t2), t3)
    x1, x2, x3 = np.exp(t1 - top), np.exp(t2 - top), np.exp(t3 - top)
    total = x1 + x2 + x3
    return top + np.log(total), (x1 / total, x2 / total, x3 / total)


def lse_jac_hess(law, theta: np.ndarray, data):
    """log L_hat (rows,), J (rows, P; a column-major view) and a function c -> sum_i c_i d^2 log L_hat_i (P, P)
    for `law` (a `form.Law`) at internal vector theta.

    log L_hat = LSE(t) with t = (a - alpha log N_eff, b - beta log D, e), so its Hessian is
    sum_k w_k (grad t_k)(grad t_k)^T - J J^T + w_1 d^2 t_1 (the softmax weights w as in
    `log_predict_and_jac`). Only t_1 is curved, through the extras x (phi; phi and dphi[g]; log k_r), in
    which log m is linear: with p = m N_rec / N_eff, d log N_eff / dx_j = p dlogm_j, so
    d^2 t_1 / (d alpha dx_j) = -p dlogm_j and d^2 t_1 / (dx_j dx_k) = -alpha p (1 - p) dlogm_j dlogm_k
    (the looped law: -alpha s (ln r - s), s = p ln r).
    """
    e, a, alpha, b, beta = theta[:5]
    log_n, dlogn = law.log_n_eff_batch(theta[None, :], data)
    log_n = log_n[0]
    log_pred, (w1, w2, w3) = lse_and_weights(a - alpha * log_n, b - beta * data.log_D, e)
    # grad t_1 over (a, alpha, extras) and grad t_2 over (b, beta); t_3 = e has gradient 1 on e
    n_params = law.n_params
    n_extra = n_params - 5
    dn = dlogn[0]  # (rows, extras): d log N_eff / d extra = p d log m / d extra, p = m N_rec / N_eff
    g1 = [np.ones_like(log_n), -log_n] + [-alpha * dn[:, j] for j in range(n_extra)]
    if n_extra:
        log_m, dlogm = law.log_multiplier(theta[None, :], data)
        scaled = np.exp(log_m[0]) * data.N_rec
        p_rec = scaled / (law.n_once(data) + scaled)
    # Parameter-major arrays (P, rows): the Gram products below are single (P, rows) x (rows, P)
    # BLAS calls, several times faster than on row-major (rows, P) arrays. Plain dot products go
    # through einsum: a threaded BLAS dot on a busy machine burns CPU time waiting for threads.
    G1, G2 = np.array(g1), np.array([np.ones_like(log_n), -data.log_D])
    i1 = [1, 2] + list(range(5, n_params))
    JT = np.empty((n_params, len(data)))
    JT[0] = w3
    JT[i1] = w1 * G1
    JT[3:5] = w2 * G2

    def hess(c: np.ndarray) -> np.ndarray:
        H = -(JT * c) @ JT.T
        H[0, 0] += np.einsum("n,n->", c, w3)
        cw1 = c * w1
        H[np.ix_(i1, i1)] += (G1 * cw1) @ G1.T
        H[3:5, 3:5] += (G2 * (c * w2)) @ G2.T
        if n_extra:  # log m is linear in the extras, so d2 log N_eff = p (1 - p) dlogm dlogm^T
            cross = -np.einsum("n,nj->j", cw1, dn)
            H[2, 5:] += cross
            H[5:, 2] += cross
            H[5:, 5:] -= alpha * (dlogm.T * (cw1 * p_rec * (1 - p_rec))) @ dlogm
        return H

    return log_pred, JT.T, hess
