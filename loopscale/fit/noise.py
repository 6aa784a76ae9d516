"""The noise model of a fit: a table's seed replicates (`loopscale.fit.replicates`), its seed sigma of log L
(`loopscale.fit.seed_sigma`), the fit's data and loss standardised by it, the two-stage bootstrap
(`loopscale.fit.two_stage`), and the record's `noise` block (docs/design.md, "Fitting: the noise model").

`noise_setup` is what `fit_table` and `fit_joint` call: with seed repeats (and noise "auto") each row gets the
sigma of log L of the chosen model (`LawData.sigma`) and the loss becomes Huber at `STANDARDISED_DELTA` on the
standardised residuals z = (log L_hat - log L) / sigma; without them, or with noise "off", data and loss stay as
they were (today's fit) and `noise_block` says that the intervals omit seed noise. `sigma_at` evaluates a fit
record's sigma model on any table (a planned design). Pure functions of a canonical table: nothing here fits a law.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from scipy.stats import norm

from loopscale.errors import InputError
from loopscale.fit.laws.form import LawData
from loopscale.fit.objective import Loss
from loopscale.fit.record_blocks import ABSENT, Noise
from loopscale.fit.replicates import RECIPE_COLUMN, Replicates, replicate_groups
from loopscale.fit.runs_table import PARENT_COLUMN, SEED_COLUMN, is_forked
from loopscale.fit.seed_sigma import (
    SIGMA_RULE,
    SigmaModel,
    choose_sigma_model,
    covariates,
    r_key,
    sigma_candidates,
    tail_factor,
    within_point,
)
from loopscale.fit.two_stage import Hierarchy, hierarchy

# Huber threshold on standardised residuals z = (log L_hat - log L) / sigma: 1.345 gives 95% efficiency at
# Gaussian noise (Huber 1964; Holland & Welsch 1977) and bounds the pull of a run far off the law.
STANDARDISED_DELTA = 1.345
NO_SEED_STATEMENT = (
    "no seed repeats: the seed sigma is not measured, the fit is unweighted and its intervals omit seed "
    "noise (they see only the scatter of single runs about the law, seed noise and misfit together)"
)
# a curve fit weighed by its position sigma (`fit --curve-sigma position`, fit/position_sigma.py) has no seed sigma
# either, but it is not unweighted: the statement says what its weights are
POSITION_STATEMENT = (
    "no seed repeats: the seed sigma is not measured; the fit is weighted by its residuals' sigma by position along "
    "each run (its shape only, estimated from the fit itself), and its intervals omit seed noise (they see the "
    "scatter of single runs about the law)"
)
IDENTICAL_SEEDS_STATEMENT = (
    "seed repeats with identical losses: no seed noise to measure, the fit is unweighted and its intervals "
    "omit seed noise"
)
NOISE_MODES = ("auto", "off")
# Inner stage of the two-stage bootstrap: a drawn point keeps its seeds. Resampling them as well counts the
# seed variance twice (it is already in the points' scatter): measured in benchmarks/bench_calibration.py.
DEFAULT_INNER = "keep"


@dataclass(frozen=True)
class NoiseFit:
    """The seed noise of a table: its replicates, the chosen sigma model (None without seed repeats), every
    candidate, and sigma of log L per row (None: the fit is unweighted)."""

    reps: Replicates
    model: SigmaModel | None
    candidates: tuple[SigmaModel, ...]
    row_sigma: np.ndarray | None


def noise_fit(
    table: pd.DataFrame, seed_column: str | None = SEED_COLUMN, recipe_column: str | None = RECIPE_COLUMN
) -> NoiseFit:
    """Replicate groups, the sigma model chosen by `SIGMA_RULE` and sigma of log L per row of a canonical
    table. Without seed repeats (or with replicates whose losses are all equal) model and row_sigma are None."""
    reps = replicate_groups(table, seed_column, recipe_column)
    models = sigma_candidates(table, reps) if reps.has_repeats else []
    if not models:
        return NoiseFit(reps, None, (), None)
    log_L, cov = np.log(table["L"].to_numpy(dtype=float)), covariates(table)
    model = choose_sigma_model(models, [tail_factor(log_L, reps, m.sigma(cov)) for m in models])
    return NoiseFit(reps, model, tuple(models), model.sigma(covariates(table)))


def sigma_at(noise: Noise | Mapping | None, table: pd.DataFrame) -> np.ndarray:
    """sigma of log L per row of any table (e.g. a planned design) from a fit record's `noise` block: its
    chosen model, evaluated at the rows' budget, N and r. InputError when the record measured no sigma."""
    chosen = (noise or {}).get("model")
    if not chosen:
        raise InputError("the fit measured no seed sigma (no seed repeats): give sigma explicitly")
    model = SigmaModel(chosen["kind"], chosen["params"], chosen["dof"], chosen["loglik"], chosen["n_params"])
    return model.sigma(covariates(table))


def per_r_summary(table: pd.DataFrame, nf: NoiseFit) -> dict[str, dict[str, Any]]:
    """Per r: points, replicated points, degrees of freedom, the pooled sigma of log L from that r's points
    alone (None without replicates), sigma_L in nats (sigma_log x mean L, first order) and the chosen model's
    mean sigma of log L over the r's rows."""
    log_L = np.log(table["L"].to_numpy(dtype=float))
    ss, df = within_point(log_L, nf.reps)
    r_row = covariates(table)["r"]
    r_pt = np.zeros(nf.reps.n_points)
    r_pt[nf.reps.point] = r_row
    out = {}
    for r in np.unique(r_row):
        on = r_pt == r
        dof = int(df[on].sum())
        s = float(np.sqrt(ss[on].sum() / dof)) if dof > 0 else None
        mean_L = float(table["L"].to_numpy(dtype=float)[r_row == r].mean())
        model_s = float(nf.row_sigma[r_row == r].mean()) if nf.row_sigma is not None else None
        out[r_key(r)] = {
            "n_points": int(on.sum()),
            "n_replicated_points": int((df[on] > 0).sum()),
            "dof": dof,
            "sigma_log": s,
            "sigma_L_nats": None if s is None else s * mean_L,
            "model_sigma_log": model_s,
        }
    return out


def noise_block(
    table: pd.DataFrame,
    nf: NoiseFit,
    inner: str | None = None,
    weighted: bool = True,
    scale: dict | None = None,
    tails: dict | None = None,
) -> Noise:
    """The fit record's `noise` block: replicates, the sigma model (kind, parameters, AICc of every candidate,
    the rule), sigma per r, how the fit and its bootstrap used it, and the statement when it is not measured.
    weighted: whether the fit's residuals were standardised by it (False: `--noise off`); scale: what
    `uncertainty.scale_to_scatter` did (S^2 = `lack_of_fit`, the factor on sigma, the reference's dof); tails:
    the residuals' excess kurtosis (`uncertainty.residual_tails`)."""
    seeds = nf.reps.summary()
    if nf.model is None or not weighted:
        return Noise(
            "log L",
            **seeds,
            tails=tails,
            model=None,
            statement=NO_SEED_STATEMENT
            if not nf.reps.has_repeats
            else IDENTICAL_SEEDS_STATEMENT
            if nf.model is None
            else "noise model off (--noise off): the fit is unweighted and its intervals omit seed noise",
            sigma_log_measured=ABSENT if nf.model is None else nf.model.sigma(covariates(table)).mean(),
        )
    sigma = nf.row_sigma
    return Noise(
        "log L",
        **seeds,
        tails=tails,
        model=nf.model.to_json(),
        candidates=[m.to_json() for m in nf.candidates],
        rule=SIGMA_RULE,
        sigma_log=float(np.sqrt(np.mean(sigma**2))),
        sigma_L_nats=float(np.sqrt(np.mean((sigma * table["L"].to_numpy(dtype=float)) ** 2))),
        per_r=per_r_summary(table, nf),
        weights=f"residuals standardised by the seed sigma of log L per row; Huber delta {STANDARDISED_DELTA} on z",
        bootstrap=None
        if inner is None
        else f"two-stage: outer clusters with replacement, each point's seeds {_INNER_TEXT[inner]}",
        statement=None,
        lack_of_fit=None if scale is None else scale["lack_of_fit"],
        scale=scale,
    )


_INNER_TEXT = {"keep": "kept whole (Ren et al. 2010)", "resample": "resampled with replacement"}


# ----------------------------------------------------------------------------------------------
# Standardised residuals: the profile's likelihood scale
# ----------------------------------------------------------------------------------------------
def huber_moments(kind: str, delta: float) -> tuple[float, float]:
    """(E psi(z)^2, E psi'(z)) for z ~ N(0, 1): the Huber loss's (kind "huber", threshold delta) or 1, 1 (l2).
    Their ratio scales the likelihood-ratio threshold of standardised residuals (Schrader & Hettmansperger
    1980 with the scale known)."""
    if kind != "huber":
        return 1.0, 1.0
    c = float(delta)
    inside = 2 * norm.cdf(c) - 1
    e_psi2 = inside - 2 * c * norm.pdf(c) + 2 * c * c * norm.sf(c)
    return float(e_psi2), float(inside)


# ----------------------------------------------------------------------------------------------
# What a fit does with it
# ----------------------------------------------------------------------------------------------
def noise_setup(
    table,
    data: LawData,
    loss: Loss,
    noise: str = "auto",
    seed_column: str | None = SEED_COLUMN,
    recipe_column: str | None = RECIPE_COLUMN,
):
    """(NoiseFit, data, loss) for a fit: the table's seed noise (`noise.noise_fit`) and, when it measures a
    sigma and `noise` is "auto", the data with each row's sigma of log L (and its degrees of freedom) and the
    loss on standardised residuals (Huber at `STANDARDISED_DELTA`, or l2); otherwise data and loss as given
    ("off": today's fit). Either way the data carry the rows' dependence groups (`dependence_groups`), which
    the profile's scale factor sums over."""
    if noise not in NOISE_MODES:
        raise InputError(f"noise must be one of {NOISE_MODES}; got {noise!r}")
    nf = noise_fit(table, seed_column, recipe_column)
    groups = dependence_groups(table, nf.reps)
    if noise == "off" or nf.model is None:
        return nf, replace(data, noise_group=groups), loss
    std_loss = Loss(loss.kind, STANDARDISED_DELTA) if loss.kind == "huber" else loss
    return nf, replace(data, sigma=nf.row_sigma, noise_group=groups, sigma_dof=nf.model.dof), std_loss


def draw_groups(table: pd.DataFrame) -> np.ndarray | None:
    """Integer labels of the rows that share one draw of seed noise: a forked sweep's parent job (a row without a
    parent is its own draw), and in a curves table (`run` and `step` columns: evaluations along runs, issue 55)
    a run's evaluations (its parent's, for a forked branch: one curve is one draw); None for an unforked runs
    table (every row its own run)."""
    curves = "run" in table.columns and "step" in table.columns
    if not is_forked(table) and not curves:
        return None
    label = np.array(["row " + str(i) for i in range(len(table))], dtype=object)
    if curves:
        label = ("run " + table["run"].astype(str)).to_numpy(dtype=object)
    if is_forked(table):
        parent = table[PARENT_COLUMN]
        present = (parent.notna() & (parent.astype(str).str.strip() != "")).to_numpy()
        label = np.where(present, "parent " + parent.astype(str).to_numpy(), label)
    return pd.Series(label).factorize()[0]


def dependence_groups(table: pd.DataFrame, reps: Replicates) -> np.ndarray:
    """Integer labels of the rows whose noise is not independent: a point's runs share the law's misfit at that
    point (seeds do not average it away), a forked job's branches share its stable phase; the groups are the
    connected components of both relations (in a forked sweep, a model with all its parents and budgets). The
    profile's scale factor sums the standardised residuals within a group before squaring (a cluster-robust
    variance), so a misfit shared by a point's seeds widens the interval as one draw, not as n_g independent."""
    draws = draw_groups(table)
    if draws is None:
        return reps.point.copy()
    n_points, n_draws = reps.n_points, int(draws.max()) + 1
    edges = coo_matrix(
        (np.ones(len(draws)), (reps.point, n_points + draws)), shape=(n_points + n_draws, n_points + n_draws)
    )
    _, component = connected_components(edges, directed=False)
    return np.unique(component[reps.point], return_inverse=True)[1]


def seed_hierarchy(table: pd.DataFrame, reps: Replicates, cluster: str | None, labels, inner: str) -> Hierarchy:
    """The two-stage bootstrap of a weighted fit (`two_stage.hierarchy`): outer clusters are the points, or the
    --cluster labels when given; a forked sweep's default, its parents, are its seeds (each parent with all its
    branches: measured better calibrated than its models as clusters, docs/results.md, "Calibration")."""
    return hierarchy(table, reps, None if cluster is None else labels, inner)
