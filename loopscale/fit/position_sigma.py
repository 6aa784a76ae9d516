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

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from loopscale.errors import InputError
from loopscale.fit.cluster_se import residual_rho
from loopscale.fit.curve_worth import CurveNoise, curve_noise, design_jacobian, job_noise_cov
from loopscale.fit.laws.form import LawData
from loopscale.fit.noise import STANDARDISED_DELTA, huber_moments
from loopscale.fit.objective import Loss
from loopscale.fit.optimize import FitState, fit_law, multistart
from loopscale.fit.seed_sigma import MIN_SIGMA_LOG, SigmaModel, _log_linear, _loglik, choose_sigma_model

CURVE_SIGMA_MODES = ("off", "position")
# the bands of an evaluation's share of its job's steps (the bands the demo's residual RMS was read in: issue 55)
POSITION_BANDS = (0.0, 0.02, 0.1, 0.5, 1.0 + 1e-9)
DEFAULT_STAGE1 = Loss()  # `fit`'s loss (Huber at 1e-3 in log units): stage 1 where a record does not say its own
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
    stable-phase rows are one curve in every branch), else its run's (a row with an empty parent is its run's)."""
    run = table["run"].astype(str)
    job = run
    if "parent" in table.columns:
        parent = table["parent"].fillna("").astype(str).str.strip()
        job = ("parent " + parent).where(parent != "", "run " + run)
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


def choose_position_sigma(
    res: np.ndarray, table: pd.DataFrame, share: np.ndarray | None = None
) -> tuple[SigmaModel, list[SigmaModel]] | None:
    """(the chosen model, every candidate) by `POSITION_RULE`; None where the residuals are all ~0. share: the
    rows' shares where `table` is part of the fitted table (a validation fold's training rows: a row's place in
    its run is the run's, not the fold's), else `position_share(table)`."""
    share = position_share(table) if share is None else np.asarray(share, dtype=float)
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


def stage1_loss_of(position: Mapping | None) -> Loss:
    """Stage 1's loss as a record's `noise.position_sigma` block states it (`refit_by_position`'s `stage1_loss`);
    Huber at 1e-3, `fit`'s own, where it says none."""
    stage1 = (position or {}).get("stage1_loss") or {}
    return Loss(stage1.get("kind", "huber"), stage1.get("delta") or 1e-3)


def position_weights(model: SigmaModel, share: np.ndarray) -> np.ndarray:
    """(rows,) stage 2's sigma of log L per row: the model at the rows' shares, floored."""
    return np.maximum(model.sigma(position_covariates(np.asarray(share, dtype=float))), MIN_SIGMA_LOG)


def stage2_loss(loss: Loss) -> Loss:
    """Stage 2's loss: Huber at `STANDARDISED_DELTA` on z after a Huber stage 1 (its delta was in log units), else
    stage 1's (least squares)."""
    return Loss(loss.kind, STANDARDISED_DELTA) if loss.kind == "huber" else loss


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
    weighted = replace(data, sigma=position_weights(model, position_share(table)), sigma_estimated=True)
    starts = np.array([r.theta for r in state.refined])
    result, state2 = fit_law(weighted, state.law, stage2_loss(state.loss), seed, n_refine, starts)
    entry = {
        "model": model.to_json(),
        "candidates": [m.to_json() for m in models],
        "rule": POSITION_RULE,
        "stage1_loss": {"kind": state.loss.kind, "delta": state.loss.delta},
        "weights": f"stage 2: residuals standardised by the position sigma; Huber delta {STANDARDISED_DELTA} on z",
        "scale": "estimated: the profile reads the pooled scale of z over its expectation (F(1, nu)), no seed sigma",
    }
    return result, state2, entry


def refit_fold_by_position(law, train: LawData, loss: Loss, starts: np.ndarray, table: pd.DataFrame, share):
    """`validate`'s two stages on a fold's training rows `train` (their `table` rows, their shares in the whole
    table): stage 1 refined from `starts` (`multistart`, the folds' fast path), the position sigma chosen from
    stage 1's residuals on these rows only, stage 2 from stage 1's optimum and `starts`. (best, the fold's model
    or None where its residuals are all ~0). The weights are re-estimated here rather than carried from the whole
    table's fit: that fit's sigma was read off residuals that include the held-out rows, so a fold weighing its
    rows by it would let the rows it is scored on choose its weights (tests/unit/test_validate_position.py)."""
    best, _ = multistart(law, train, loss, starts)
    res = law.log_predict(best.theta, train) - train.log_L
    chosen = choose_position_sigma(res, table, share)
    if chosen is None:
        return best, None
    weighted = replace(train, sigma=position_weights(chosen[0], share), sigma_estimated=True)
    best, _ = multistart(law, weighted, stage2_loss(loss), np.vstack([best.theta[None], starts]))
    return best, chosen[0]


def standardised_curve_noise(state: FitState, table: pd.DataFrame) -> dict | None:
    """Stage 2's standardised residuals z = (log residual) / (position sigma) split into a run offset and an AR(1)
    along the curve (`curve_worth.curve_noise`, in units of z): the shape of the noise `position_gain` weighs a
    design by (the record's `noise.position_sigma.curve_standardised`); None where it cannot be split."""
    res = state.law.log_predict(state.best.theta, state.data) - state.data.log_L
    found = curve_noise(res / state.data.sigma, table["run"], table["step"], state.law.n_params)
    return None if found is None else dict(found.to_json())


def sigma_model_from_json(block: Mapping) -> SigmaModel:
    """The `SigmaModel` a record's `position_sigma.model` holds."""
    return SigmaModel(
        block["kind"], dict(block["params"]), int(block["dof"]), float(block["loglik"]), block["n_params"]
    )


@dataclass(frozen=True)
class PositionGain:
    """What weighing a design's curves by a pilot's position sigma may narrow phi's estimate by, linearised at the
    pilot's law (`position_gain`): variance = Var(phi | the unweighted fit) / Var(phi | the two-stage fit), each the
    M-estimator's sandwich with its own loss; se_ratio = its inverse square root, the factor on phi's standard
    error."""

    variance: float

    @property
    def se_ratio(self) -> float:
        return float(self.variance**-0.5) if self.variance > 0 else float("nan")


def _m_sandwich(J: np.ndarray, rows: pd.DataFrame, noise: CurveNoise, sd: np.ndarray, loss: Loss, k: int) -> float:
    """phi's sandwich variance B^-1 (J' Cov(psi) J) B^-1, B = J' diag(E psi') J, of an M-estimator with `loss` on
    residuals e ~ N(0, sd_a sd_b cov) per job (`curve_worth.job_noise_cov`), linearised at the truth. Per row at its
    variance v: E psi' and E psi^2 (`noise.huber_moments` at delta / sqrt(v), times v; 1 and v for l2); between two
    rows Price's first-order term E psi'_a E psi'_b Cov(e_a, e_b), which understates a clipped psi's covariance at a
    strong correlation (sign(x): 2/pi arcsin(rho) against 2/pi rho)."""
    labels = np.unique(rows["job"].to_numpy(), return_inverse=True)[1]
    p = J.shape[1]
    bread, meat = np.zeros((p, p)), np.zeros((p, p))
    for g in range(int(labels.max()) + 1):
        on = labels == g
        cov = job_noise_cov(rows.loc[on], noise) * np.outer(sd[on], sd[on])
        v = np.diag(cov)
        moments = np.array([huber_moments(loss.kind, loss.delta / np.sqrt(x)) for x in v])
        psi2, dpsi = v * moments[:, 0], moments[:, 1]
        c_psi = np.outer(dpsi, dpsi) * cov
        np.fill_diagonal(c_psi, psi2)
        bread += (J[on].T * dpsi) @ J[on]
        meat += J[on].T @ c_psi @ J[on]
    inv = np.linalg.pinv(bread)
    return float((inv @ meat @ inv)[k, k])


def position_gain(
    design: pd.DataFrame,
    curve_params: Mapping[str, float],
    law_class,
    model: SigmaModel,
    noise: CurveNoise,
    eval_steps: Callable,
    stage1: Loss = DEFAULT_STAGE1,
) -> PositionGain:
    """`PositionGain` on a design (its curves as `curve_worth` builds them): each row's log noise is sd(s) z, sd the
    position sigma `model` at the row's share of its job (`position_share`), z the pilot's standardised noise
    (`noise`: run offset and AR(1) in units of z, one path per job). The unweighted fit: `stage1` on log L
    (Jacobian J, noise sd_a sd_b cov_z); the two-stage fit: `stage2_loss(stage1)` on z (J / sd, noise cov_z), its
    weights taken as known (their own noise, from the pilot's residuals, is not in it). Each an M-estimator's
    sandwich (`_m_sandwich`); not the intervals as the fits report them, and not simulated: `power` prints it as
    what the option may add, not as a promise."""
    _, curves, c_law, J = design_jacobian(design, curve_params, law_class, eval_steps)
    sd = position_weights(model, position_share(curves))
    k = c_law.internal_names.index("phi")
    off = _m_sandwich(J, curves, noise, sd, stage1, k)
    on = _m_sandwich(J / sd[:, None], curves, noise, np.ones(len(sd)), stage2_loss(stage1), k)
    return PositionGain(off / on)
