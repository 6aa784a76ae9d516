"""A curve fit's residual scale by position along the run: `fit --curve-sigma position` (issue 55 item 3;
docs/design.md, "A curve fit's position sigma").

A curve law misses a run's first evaluations by far more than its cooldown (the tuned demo's looped-entry-curve fit:
RMS of log L 0.069 in each run's first 2% of steps, 0.048 at 2-10%, 0.015 at 10-50%, 0.0105 in the cooldowns), yet
its fit weighs every evaluation alike (Huber on log residuals, one scale), so the loudest rows set the fit and its
interval. Two stages (weighted least squares with an estimated variance function: Carroll & Ruppert 1988, ch. 2-3):

1. the fit as it is (`fit_law`: Huber at the given delta in log units);
2. sigma of log L per row as a function of the evaluation's position s = step / the last step of its job (a forked
   parent's longest branch; a run's own last step otherwise), estimated by maximum likelihood from stage 1's
   residuals (each ~ N(0, sigma(s)^2)) under one of

       constant               sigma = s0                                               (1 parameter)
       log-linear in share    log sigma = a + b (ln s - mean), ln s clipped to its range (2)
       per band               sigma = s_b for POSITION_BANDS[b] <= s < POSITION_BANDS[b + 1]   (one per band)

   chosen by `POSITION_RULE` (`seed_sigma.choose_sigma_model`, the seed sigma's rule, with each model's likelihood
   gain divided by the AR(1) design effect of a variance along a curve); then the fit again with the residuals
   standardised by it (Huber at `noise.STANDARDISED_DELTA` on z), the seed sigma's path (`LawData.sigma`), from
   stage 1's refined optima.

The position sigma is estimated from the fit's own residuals, not measured from replicates as a seed sigma is: it
sets the rows' relative weights and nothing else. `LawData.sigma_estimated` says so to the scale rules: the profile
reads the pooled scale of the standardised residuals over its expectation with the weighted fit's leverage, on
F(1, nu) (`uncertainty._unweighted_threshold`, a curve fit's rule without a sigma), never the known-scale chi2_1 of a
seed sigma, its scatter floor (`noise_scale.scale_to_scatter`) or its per-parameter sandwich; the weights stay those
of stage 2 in the bootstrap's refits. A table with a measured seed sigma is refused (the seed sigma already weighs
its rows).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from loopscale.errors import InputError
from loopscale.fit.cluster_se import residual_rho
from loopscale.fit.noise import STANDARDISED_DELTA
from loopscale.fit.objective import Loss
from loopscale.fit.optimize import FitState, fit_law
from loopscale.fit.seed_sigma import MIN_SIGMA_LOG, SigmaModel, _log_linear, _loglik, choose_sigma_model

CURVE_SIGMA_MODES = ("off", "position")
# the bands of an evaluation's share of its job's steps (the bands the demo's residual RMS was read in: issue 55)
POSITION_BANDS = (0.0, 0.02, 0.1, 0.5, 1.0 + 1e-9)
MIN_BAND_ROWS = 5  # the per-band model is offered only where every band holds this many rows
POSITION_RULE = (
    "sigma of log L by the evaluation's share s of its job's steps: the lowest AICc among constant, log-linear in "
    "ln s and per band of s (bands " + ", ".join(f"{b:g}" for b in POSITION_BANDS[1:-1]) + "), fitted to the "
    "unweighted fit's log residuals (Gaussian, n = rows); a model other than constant must beat it by 2, its "
    "likelihood gain divided by (1 + rho^2) / (1 - rho^2), rho the lag-1 autocorrelation along each run of the "
    "residuals it standardises (a variance from an AR(1) series is that much noisier)"
)


def position_share(table: pd.DataFrame) -> np.ndarray:
    """(rows,) each evaluation's step as a share of its job's last step: a forked parent's longest branch (its
    stable-phase rows are one curve in every branch), else its run's."""
    job = table["parent"].astype(str) if "parent" in table.columns else table["run"].astype(str)
    step = table["step"].astype(float)
    last = step.groupby(job.to_numpy()).transform("max").to_numpy(dtype=float)
    return step.to_numpy(dtype=float) / np.maximum(last, 1.0)


def position_candidates(res: np.ndarray, share: np.ndarray) -> list[SigmaModel]:
    """The position sigma models of log residuals `res` at shares `share` (module docstring), constant first;
    [] where the residuals are all ~0 (nothing to weigh)."""
    ss, df = np.asarray(res, dtype=float) ** 2, np.ones(len(res))
    if ss.sum() <= MIN_SIGMA_LOG**2 * len(ss):
        return []
    pooled = float(np.sqrt(ss.mean()))
    models = [SigmaModel("constant", {"sigma": pooled}, len(ss), _loglik(ss, df, np.full(len(ss), pooled)), 1)]
    trend = _log_linear(ss, df, np.log(np.maximum(share, 1e-12)), "log_share")
    if trend is not None:
        models.append(trend)
    edges = list(POSITION_BANDS)
    band = np.clip(np.searchsorted(edges, share, side="right") - 1, 0, len(edges) - 2)
    counts = np.bincount(band, minlength=len(edges) - 1)
    if counts.min() >= MIN_BAND_ROWS:
        band_sigma = np.maximum(np.sqrt(np.bincount(band, weights=ss) / counts), MIN_SIGMA_LOG)
        params = {"covariate": "share", "edges": edges, "sigma_band": [float(v) for v in band_sigma]}
        loglik = _loglik(ss, df, band_sigma[band])
        models.append(SigmaModel("per band", params, len(ss), loglik, len(band_sigma)))
    return models


def position_covariates(share: np.ndarray) -> dict[str, np.ndarray]:
    """What `SigmaModel.sigma` reads of a position sigma model: the share and its log."""
    return {"share": share, "log_share": np.log(np.maximum(share, 1e-12))}


def choose_position_sigma(res: np.ndarray, table: pd.DataFrame) -> tuple[SigmaModel, list[SigmaModel]] | None:
    """(the chosen model, every candidate) by `POSITION_RULE`; None where the residuals are all ~0."""
    share = position_share(table)
    models = position_candidates(res, share)
    if not models:
        return None
    cov = position_covariates(share)
    factors = []
    for m in models:
        rho = residual_rho(res / np.maximum(m.sigma(cov), MIN_SIGMA_LOG), table["run"], table["step"])
        rho2 = min(rho * rho, 0.98) if np.isfinite(rho) else 0.0
        factors.append((1 + rho2) / (1 - rho2))
    return choose_sigma_model(models, factors), models


def refit_by_position(table: pd.DataFrame, state: FitState, seed: int = 0, n_refine: int = 16):
    """Stage 2 (module docstring) after stage 1's `state`: (FitResult, FitState, the record's `position_sigma`
    entry), or None where stage 1's residuals are all ~0. The rows of `table` are the fit's (its run and step)."""
    data = state.data
    if data.sigma is not None:
        raise InputError(
            "--curve-sigma position weighs a curve fit without a seed sigma; this table's seed repeats measured one "
            "(fit with --noise off to weigh its evaluations by position instead)"
        )
    if not ({"run", "step"} <= set(table.columns)) or not state.law.reads_curves:
        raise InputError("--curve-sigma position weighs a curve law's fit of a curves table (run, step per row)")
    res = state.law.log_predict(state.best.theta, data) - data.log_L
    chosen = choose_position_sigma(res, table)
    if chosen is None:
        return None
    model, models = chosen
    sigma = np.maximum(model.sigma(position_covariates(position_share(table))), MIN_SIGMA_LOG)
    weighted = replace(data, sigma=sigma, sigma_estimated=True)
    loss = Loss(state.loss.kind, STANDARDISED_DELTA) if state.loss.kind == "huber" else state.loss
    starts = np.array([r.theta for r in state.refined])
    result, state2 = fit_law(weighted, state.law, loss, seed, n_refine, starts)
    entry = {
        "model": model.to_json(),
        "candidates": [m.to_json() for m in models],
        "rule": POSITION_RULE,
        "stage1_loss": {"kind": state.loss.kind, "delta": state.loss.delta},
        "weights": f"stage 2: residuals standardised by the position sigma; Huber delta {STANDARDISED_DELTA} on z",
        "scale": "estimated: the profile reads the pooled scale of z over its expectation (F(1, nu)), no seed sigma",
    }
    return result, state2, entry
