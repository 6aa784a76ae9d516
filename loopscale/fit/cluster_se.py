"""Cluster-robust uncertainty of a least-squares fit whose rows are not independent: the points of one loss
curve share the run's seed and drift together (issue 55). The sandwich (Liang & Zeger 1986, "CR1"):

    V = c/(c - 1) H^-1 (sum_g s_g s_g^T) H^-1,   H = J^T J,   s_g = sum_{i in g} e_i J_i

with e the log residuals, J = d log L_hat / d theta (internal coordinates) and g the clusters (runs; a
forked parent with its branches): rows of one cluster may be correlated in any way, clusters are independent.
With one row per cluster it is the heteroskedasticity-robust (HC1) sandwich of a final-point fit. For the l2
loss (an M-estimator with Huber's delta far inside the residuals has no usable curvature). Also the lag-1
autocorrelation of the residuals along each cluster (AR(1) rho), which the fit record reports; the profile's
reference quantile and the pooled sum's expectation under independent noise with Satterthwaite's nu
(`reference_quantile`, `independent_moments`: here, below both `noise_scale` and `curve_worth`, which read them).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import chi2
from scipy.stats import f as f_dist

from loopscale.fit.laws.form import Law, LawData
from loopscale.fit.runs_table import PARENT_COLUMN


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


def noise_clusters(table: pd.DataFrame) -> np.ndarray:
    """The noise a run shares with others: its forked job (parent) and seed; every unforked run alone."""
    if PARENT_COLUMN not in table.columns:
        return np.arange(len(table))
    parent = table[PARENT_COLUMN].fillna("").astype(str).to_numpy()
    seed = table["seed"].astype(str).to_numpy() if "seed" in table.columns else np.zeros(len(table), str)
    key = np.where(parent != "", np.char.add(np.char.add(parent.astype(str), "#"), seed.astype(str)), "")
    own = np.char.add("run#", np.arange(len(table)).astype(str))
    return np.unique(np.where(key != "", key, own), return_inverse=True)[1]


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


CHI2_1_95 = 3.841458820694124  # 95% quantile of chi-square with 1 degree of freedom


def reference_quantile(dof: int | None, level: float = 0.95) -> float:
    """The likelihood-ratio statistic's 95% point: chi2_1 when the noise scale is known, F(1, dof) when it was
    estimated from `dof` degrees of freedom (the square of Student's t: a scale from few repeats is itself
    uncertain, and the interval widens for it)."""
    if dof is None or not np.isfinite(dof):
        return float(chi2.ppf(level, 1)) if level != 0.95 else CHI2_1_95
    return float(f_dist.ppf(level, 1, max(1, int(dof))))


def independent_moments(g: np.ndarray, bread: np.ndarray, W: np.ndarray) -> tuple[float, float] | None:
    """(tr(P C P), tr(P C P)^2 / tr((P C P)^2)) for C = W W^T (W: (n, G), column g the weights on group g's rows)
    and P = I - g bread g^T: the expectation of sum_g (W_g^T x)^2 for x the residuals of a least-squares fit of
    independent unit noise, and Satterthwaite's degrees of freedom for that quadratic form; None where it is 0."""
    PW = W - g @ (bread @ (g.T @ W))  # P W
    K = PW.T @ PW  # (G, G): tr(K) = tr(P C P), sum(K^2) = tr((P C P)^2)
    expected = float(np.trace(K))
    if not expected > 0:
        return None
    return expected, float(expected**2 / np.sum(K * K))
