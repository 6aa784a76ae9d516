"""The seed sigma of log L: pooled from the within-point deviations of a table's replicates, under one of four
models chosen by a stated rule (docs/design.md, "Fitting: the noise model").

Of log L, not of L: the fit is in log space (`loopscale.fit.objective`), so its residuals are standardised by
sigma_log; sigma_L = sigma_log * L to first order. Each point g with n_g seeds gives SS_g, the squared deviations
of its seeds' log L from their mean, ~ sigma_g^2 chi2(n_g - 1) (one-way ANOVA, REML). The models:

    constant            sigma_g = s                                      (1 parameter)
    log-linear in C     log sigma_g = a + b (log C_g - mean)             (2)
    log-linear in N     log sigma_g = a + b (log N_g - mean)             (2)
    per r               sigma_g = s_r                                    (one per r with replicates)

fitted by maximum likelihood; `choose_sigma_model` applies `SIGMA_RULE`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from loopscale.fit.replicates import Replicates
from loopscale.fit.runs_table import budget_column

# The sigma model: the lowest AICc (n = the pooled degrees of freedom); a model with more parameters than the
# constant one must beat it by AICC_MARGIN (so a trend is claimed only with evidence: Burnham & Anderson 2002).
AICC_MARGIN = 2.0
SIGMA_RULE = (
    f"lowest AICc among constant, log-linear in C, log-linear in N and per-r sigma of log L (Gaussian "
    f"within-point deviations, n = pooled degrees of freedom); a model other than constant must beat the "
    f"constant by {AICC_MARGIN:g}, its likelihood gain divided by 1 + kappa (n - 1) / (2 n) where the seed noise's "
    f"excess kurtosis kappa makes variances noisier than Gaussian (Box 1953)"
)
# A pooled sigma of log L below this is rounding, not noise (replicates that train deterministically)
MIN_SIGMA_LOG = 1e-9
MIN_TREND_VALUES = 3  # a log-linear sigma needs replicated points at this many distinct C (N) values


@dataclass(frozen=True)
class SigmaModel:
    """A fitted seed-sigma model of log L (module docstring). kind: "constant", "log-linear in C",
    "log-linear in N" or "per r"; params: {"sigma"} / {"a", "b", "x_mean", "x_range"} / {"sigma_r": {r:
    sigma}, "sigma": pooled}; dof: pooled degrees of freedom. A curve fit's position sigma
    (`loopscale.fit.position_sigma`) is one too: "log-linear in share" or "per band" ({"covariate", "edges",
    "sigma_band"}: sigma_band[b] on edges[b] <= x < edges[b + 1])."""

    kind: str
    params: dict[str, Any]
    dof: int
    loglik: float
    n_params: int

    @property
    def aicc(self) -> float:
        k, n = self.n_params, self.dof
        return -2 * self.loglik + 2 * k + (2 * k * (k + 1) / (n - k - 1) if n - k - 1 > 0 else np.inf)

    def sigma(self, covariates: dict[str, np.ndarray]) -> np.ndarray:
        """sigma of log L at points with these covariates ("log_C", "log_N", "r": arrays); a log-linear trend
        is not extrapolated: x is clipped to the range of the replicated points."""
        n = len(next(iter(covariates.values())))
        if self.kind == "constant":
            return np.full(n, self.params["sigma"])
        if self.kind == "per r":
            by_r = {float(k): v for k, v in self.params["sigma_r"].items()}
            return np.array([by_r.get(float(r), self.params["sigma"]) for r in covariates["r"]])
        if self.kind == "per band":  # a curve's position sigma (`position_sigma`): bands of one covariate
            edges, band_sigma = self.params["edges"], np.asarray(self.params["sigma_band"], dtype=float)
            band = np.searchsorted(edges, covariates[self.params["covariate"]], side="right") - 1
            return band_sigma[np.clip(band, 0, len(band_sigma) - 1)]
        lo, hi = self.params["x_range"]
        x = np.clip(covariates[self.params["covariate"]], lo, hi) - self.params["x_mean"]
        return np.exp(self.params["a"] + self.params["b"] * x)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "params": self.params,
            "dof": self.dof,
            "loglik": self.loglik,
            "n_params": self.n_params,
            "aicc": self.aicc,
        }


def covariates(table: pd.DataFrame) -> dict[str, np.ndarray]:
    """Per row: log of the compute budget (`budget_column`), log N (N_once + N_rec, or N) and r."""
    N = (table["N_once"] + table["N_rec"]) if "N_once" in table.columns else table["N"]
    r = table["r"].to_numpy(dtype=float) if "r" in table.columns else np.ones(len(table))
    return {"log_C": np.log(budget_column(table)), "log_N": np.log(N.to_numpy(dtype=float)), "r": r}


def within_point(log_L: np.ndarray, reps: Replicates) -> tuple[np.ndarray, np.ndarray]:
    """(SS_g, df_g) per point: the sum of squared deviations of its seeds' log L from their mean, and its seeds
    - 1. A seed's rows (a duplicate) count once, at their mean."""
    n_units = reps.unit.max() + 1
    unit_sum = np.bincount(reps.unit, weights=log_L, minlength=n_units)
    unit_n = np.bincount(reps.unit, minlength=n_units)
    unit_y = unit_sum / np.maximum(unit_n, 1)
    unit_point = np.zeros(n_units, dtype=int)
    unit_point[reps.unit] = reps.point
    point_mean = np.bincount(unit_point, weights=unit_y, minlength=reps.n_points) / np.maximum(reps.seeds, 1)
    ss = np.bincount(unit_point, weights=(unit_y - point_mean[unit_point]) ** 2, minlength=reps.n_points)
    return ss, reps.seeds - 1


def _loglik(ss: np.ndarray, df: np.ndarray, sigma: np.ndarray) -> float:
    """Gaussian log-likelihood of within-point deviations: sum -df log sigma - SS / (2 sigma^2) - df/2 log 2 pi."""
    return float(np.sum(-df * np.log(sigma) - ss / (2 * sigma**2) - 0.5 * df * np.log(2 * np.pi)))


def _log_linear(ss, df, x, covariate: str) -> SigmaModel | None:
    """log sigma_g = a + b (x_g - mean), maximum likelihood by Newton steps (the negative log-likelihood
    sum df (a + b x) + SS exp(-2 (a + b x)) / 2 is convex in (a, b)); None without MIN_TREND_VALUES x values."""
    keep = df > 0
    ss, df, x = ss[keep], df[keep], x[keep]
    if len(np.unique(np.round(x, 9))) < MIN_TREND_VALUES:
        return None
    x_mean = float(np.average(x, weights=df))
    xc = x - x_mean
    theta = np.array([0.5 * np.log(ss.sum() / df.sum()), 0.0])
    X = np.column_stack([np.ones_like(xc), xc])

    def nll(t):
        eta = X @ t
        return float(np.sum(df * eta + 0.5 * ss * np.exp(-2 * eta)))

    f = nll(theta)
    for _ in range(100):
        eta = X @ theta
        w = ss * np.exp(-2 * eta)
        g = X.T @ (df - w)
        H = (X.T * (2 * w)) @ X
        try:
            step = -np.linalg.solve(H + 1e-12 * np.eye(2), g)
        except np.linalg.LinAlgError:
            break
        t = 1.0
        while t > 1e-8 and not nll(theta + t * step) <= f:
            t /= 2
        if t <= 1e-8:
            break
        theta, f_new = theta + t * step, nll(theta + t * step)
        if f - f_new < 1e-14 * max(1.0, abs(f)):
            f = f_new
            break
        f = f_new
    a, b = (float(v) for v in theta)
    sigma = np.exp(a + b * xc)
    params = {"covariate": covariate, "a": a, "b": b, "x_mean": x_mean, "x_range": [float(x.min()), float(x.max())]}
    return SigmaModel(f"log-linear in {covariate[4:]}", params, int(df.sum()), _loglik(ss, df, sigma), 2)


def sigma_candidates(table: pd.DataFrame, reps: Replicates, log_L: np.ndarray | None = None) -> list[SigmaModel]:
    """Every sigma model the data support (constant first); [] without seed repeats or with identical
    replicate losses (no sigma to measure). log_L defaults to log of the table's L."""
    log_L = np.log(table["L"].to_numpy(dtype=float)) if log_L is None else np.asarray(log_L, dtype=float)
    ss, df = within_point(log_L, reps)
    if df.sum() <= 0 or ss.sum() <= MIN_SIGMA_LOG**2 * df.sum():
        return []
    pooled = float(np.sqrt(ss.sum() / df.sum()))
    dof = int(df.sum())
    models = [SigmaModel("constant", {"sigma": pooled}, dof, _loglik(ss, df, np.full(len(ss), pooled)), 1)]
    cov = covariates(table)
    first = np.zeros(reps.n_points, dtype=int)
    first[reps.point[::-1]] = np.arange(len(reps.point))[::-1]  # a row of each point
    for name in ("log_C", "log_N"):
        model = _log_linear(ss, df, cov[name][first], name)
        if model is not None:
            models.append(model)
    r_pt = cov["r"][first]
    r_rep = np.unique(r_pt[df > 0])
    if len(r_rep) >= 2:
        sigma_r = {}
        for r in r_rep:
            on = (r_pt == r) & (df > 0)
            sigma_r[r_key(r)] = float(np.sqrt(ss[on].sum() / df[on].sum())) if ss[on].sum() > 0 else pooled
        sig = np.array([sigma_r.get(r_key(r), pooled) for r in r_pt])
        models.append(SigmaModel("per r", {"sigma_r": sigma_r, "sigma": pooled}, dof, _loglik(ss, df, sig), len(r_rep)))
    return models


def choose_sigma_model(models: list[SigmaModel], evidence_factors=None) -> SigmaModel:
    """The rule `SIGMA_RULE`: lowest AICc, the constant model unless another beats it by AICC_MARGIN. Each model's
    log-likelihood gain over the constant is divided by its evidence factor first (one per model, default 1:
    `tail_factor` of the deviations that model standardises; heavy-tailed seed noise makes Gaussian variance
    comparisons see trends that are not there, Box 1953)."""
    constant = models[0]
    factors = dict(zip(map(id, models), evidence_factors or [1.0] * len(models)))

    def aicc(m: SigmaModel) -> float:
        return m.aicc + 2 * (m.loglik - constant.loglik) * (1 - 1 / factors[id(m)])

    others = [m for m in models[1:] if np.isfinite(m.aicc) and aicc(m) <= constant.aicc - AICC_MARGIN]
    return min(others, key=aicc) if others else constant


def tail_factor(log_L: np.ndarray, reps: Replicates, row_sigma: np.ndarray | None = None) -> float:
    """How much heavier than Gaussian the seed noise's tails make a variance comparison's evidence: the variance of
    a point's s^2 is sigma^4 (2 / (n - 1) + kappa / n), kappa the noise's excess kurtosis, so a likelihood gain is
    worth 1 / (1 + kappa (n - 1) / (2 n)) of a Gaussian one (dof-weighted over the points; Box 1953). kappa from
    the within-point deviations, whose excess kurtosis is kappa ((n - 1)^3 + 1) / (n^2 (n - 1)) (kappa / 2 for 2 or
    3 seeds), each divided by its row's sigma under the model judged (a real trend leaves no kurtosis once its sigma
    has divided it out; a pattern of variance that is not there leaves the tails heavy); never below 1."""
    n_units = reps.unit.max() + 1
    unit_y = np.bincount(reps.unit, weights=log_L, minlength=n_units) / np.maximum(np.bincount(reps.unit), 1)
    unit_point = np.zeros(n_units, dtype=int)
    unit_point[reps.unit] = reps.point
    n = reps.seeds[unit_point].astype(float)
    d = unit_y - np.bincount(unit_point, weights=unit_y, minlength=reps.n_points)[unit_point] / n
    if row_sigma is not None:
        d = d / (np.bincount(reps.unit, weights=row_sigma, minlength=n_units) / np.maximum(np.bincount(reps.unit), 1))
    d = d[n >= 2]
    n = n[n >= 2]
    if len(d) < 8 or not np.any(d):
        return 1.0
    kappa = (np.mean(d**4) / np.mean(d**2) ** 2 - 3) / np.mean(((n - 1) ** 3 + 1) / (n**2 * (n - 1)))
    return float(max(1.0, np.average(1 + kappa * (n - 1) / (2 * n), weights=n - 1)))


def r_key(r: float) -> str:
    """The name of r in JSON keys: '4' for 4.0, '1.5' for 1.5."""
    return str(int(r)) if float(r).is_integer() else repr(float(r))
