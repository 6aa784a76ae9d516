"""Cluster-robust uncertainty of a least-squares fit whose rows are not independent: the points of one loss
curve share the run's seed and drift together (issue 55). The sandwich (Liang & Zeger 1986, "CR1"):

    V = c/(c - 1) H^-1 (sum_g s_g s_g^T) H^-1,   H = J^T J,   s_g = sum_{i in g} e_i J_i

with e the log residuals, J = d log L_hat / d theta (internal coordinates) and g the clusters (runs; a
forked parent with its branches): rows of one cluster may be correlated in any way, clusters are independent.
With one row per cluster it is the heteroskedasticity-robust (HC1) sandwich of a final-point fit. For the l2
loss (an M-estimator with Huber's delta far inside the residuals has no usable curvature). Also the lag-1
autocorrelation of the residuals along each cluster (AR(1) rho), which the fit record reports.
"""

from __future__ import annotations

import numpy as np

from loopscale.fit.laws.form import Law, LawData


def cluster_robust_cov(law: Law, theta: np.ndarray, data: LawData, clusters) -> np.ndarray:
    """(P, P) covariance of the internal parameters at the l2 optimum `theta`, clustered by `clusters` (one
    label per row)."""
    log_pred, J = law.log_predict_and_jac(np.asarray(theta, dtype=float), data)
    e = log_pred - data.log_L
    labels, index = np.unique(np.asarray(clusters).astype(str), return_inverse=True)
    scores = np.zeros((len(labels), J.shape[1]))
    np.add.at(scores, index, e[:, None] * J)
    bread = np.linalg.pinv(J.T @ J)
    c = len(labels)
    return c / max(c - 1, 1) * bread @ (scores.T @ scores) @ bread


def residual_rho(residuals: np.ndarray, clusters, order) -> float:
    """The lag-1 autocorrelation of residuals within clusters, each in `order` (e.g. the step): pooled over
    every consecutive pair of one cluster, residuals centred by their cluster's mean (the run's offset)."""
    res = np.asarray(residuals, dtype=float)
    labels = np.asarray(clusters).astype(str)
    pairs_a, pairs_b = [], []
    for g in np.unique(labels):
        rows = np.flatnonzero(labels == g)
        rows = rows[np.argsort(np.asarray(order)[rows], kind="stable")]
        r = res[rows] - res[rows].mean()
        pairs_a.append(r[:-1])
        pairs_b.append(r[1:])
    a, b = np.concatenate(pairs_a), np.concatenate(pairs_b)
    denom = np.sqrt((a * a).sum() * (b * b).sum())
    return float((a * b).sum() / denom) if denom > 0 else float("nan")
