"""Fitting a scaling law to a runs table: robust log-space objective, global multi-start, bootstrap,
profile, holdout (docs/design.md, "Fitting").

The method, one module per step:
- `loopscale.fit.objective`: sum_i w_i rho(log L_hat_i - log L_i), rho = Huber(delta = 1e-3) or 0.5 x^2
  (Hoffmann et al. 2022, eq. 10 fitted in log space; Besiroglu et al. 2024), with analytic gradients;
- `loopscale.fit.starts`: the classic grid and exponent-projected starts (the law is linear in (E, A, B)
  for fixed exponents), screened in one vectorised pass;
- `loopscale.fit.optimize`: the best starts refined (batched LM or exact Newton, then L-BFGS-B with tight
  tolerances); the lowest optimum wins and `n_best_basin` counts the refined starts that reached it;
- `loopscale.fit.uncertainty`: bootstrap (rows or clusters), profile intervals and likelihood-ratio tests,
  and the held-out largest budget;
- `loopscale.fit.result`: the record (`FitResult`, its JSON) and what reads it without the optimiser;
  `loopscale.fit.bounds`: the box the search stays in.

Here: `fit_table`, which runs them in order on one table. Each of the names above is imported from the module
that defines it.
"""

from __future__ import annotations

from dataclasses import replace

from loopscale.errors import InputError
from loopscale.fit.laws.form import Law
from loopscale.fit.laws.registry import law_data_from_table
from loopscale.fit.noise import (
    DEFAULT_INNER,
    NO_SEED_STATEMENT,
    POSITION_STATEMENT,
    noise_block,
    noise_setup,
    seed_hierarchy,
)
from loopscale.fit.noise_scale import fit_on_its_scale, residual_tails, with_pilot_noise
from loopscale.fit.objective import Loss
from loopscale.fit.optimize import adopt_optimum, fit_law
from loopscale.fit.position_sigma import CURVE_SIGMA_MODES, refit_by_position, standardised_curve_noise
from loopscale.fit.replicates import replicate_groups
from loopscale.fit.resample import bootstrap, on_one_blas_thread
from loopscale.fit.result import FitResult, data_summary, versions
from loopscale.fit.runs_table import SEED_COLUMN, budget_column, check_clusters, cluster_labels, table_warnings
from loopscale.fit.uncertainty import holdout_largest, holdout_train_rows, percentile_ci, profile_refit
from loopscale.fit.verdict import fit_checks


def check_fit_inputs(table, law: str, n_bootstrap: int = 0, cluster: str | None = None, holdout: bool = False):
    """Every precondition of `fit_table` that depends on the data, checked before the first solve (a bad
    --cluster or --holdout-largest fails in a second, not after the fit): the cluster labels (None
    without a clustered bootstrap), at least MIN_CLUSTERS of them, and enough rows below the largest
    budget for the holdout refit. Raises InputError (one line)."""
    labels = None
    if n_bootstrap > 0 and cluster is not None:
        labels = cluster_labels(table, cluster)
        check_clusters(labels, cluster)
    if holdout:
        holdout_train_rows(budget_column(table), law, table["r"] if "r" in table.columns else None)
    return labels


@on_one_blas_thread
def fit_table(
    table,
    law: str | Law = "looped",
    loss: Loss | None = None,
    seed: int = 0,
    n_bootstrap: int = 0,
    cluster: str | None = None,
    holdout: bool = False,
    profile: bool | None = None,
    n_refine: int = 16,
    jobs: int = 1,
    progress=None,
    noise: str = "auto",
    seed_column: str | None = SEED_COLUMN,
    inner: str = DEFAULT_INNER,
    starts=None,
    curve_sigma: str = "off",
) -> FitResult:
    """Fit a canonical runs table (see `loopscale.fit.runs_table`) and attach the uncertainty steps and the
    conditioning checks (`loopscale.fit.verdict`). law: a registered law's name, or a law instance (one built
    with options of its own, e.g. a pinned E), which the fit, its bootstrap and its holdout use as it is.

    cluster: None (resample rows), "C" (whole compute budgets, grouped by `budget_clusters`), "parent" (the forked
    run of each branch) or any other column (e.g. "width"). profile defaults to True for a law with a
    `profile_param` (phi); a profile that finds a lower objective than the multi-start moves the fit there
    (`profile_refit`, said in the warnings) before the bootstrap starts from it. The bootstrap uses seed + 1, the
    holdout seed: reproducible from `seed` (whatever `jobs`; `progress`: the stream for the progress bar).

    Seeds (`loopscale.fit.noise`): rows of one point (r, N_once, N_rec, D, recipe) with different
    `seed_column` values are replicates. With seed repeats and noise "auto" the seed sigma of log L is
    estimated (`noise.SIGMA_RULE`), the residuals are standardised by it (Huber on z), the profile threshold
    is on that scale and the bootstrap is two-stage (`seed_hierarchy`; `inner`: "keep" or "resample" each
    drawn point's seeds). Without seed repeats, or with noise "off", the fit is today's and the record's
    `noise` block says that its intervals omit seed noise. starts: refined instead of screened (`fit_law`).
    curve_sigma "position": a curve fit weighed by its sigma by position along the run (`position_sigma`)."""
    loss = loss or Loss()
    name = law.name if isinstance(law, Law) else law
    labels = check_fit_inputs(table, name, n_bootstrap, cluster, holdout)
    nf, data, loss = noise_setup(table, law_data_from_table(table, law), loss, noise, seed_column)
    weighted = data.sigma is not None
    result, state = fit_law(data, law, loss, seed, n_refine, starts)
    result, state, position = _by_position(curve_sigma, table, result, state, seed, n_refine)
    data, loss = state.data, state.loss  # the holdout refits on stage 2's weights where there is one
    state, scale = fit_on_its_scale(result, state, nf.reps.point)  # sigma bounded below by the scatter about the law
    result.warnings.extend(table_warnings(table, name) + (_seeds_as_rows(table, seed_column) if noise == "off" else []))
    state = _attach_profile(result, state, profile)
    if n_bootstrap > 0:
        two_stage = seed_hierarchy(table, nf.reps, cluster, labels, inner) if weighted else None
        flat = None if weighted else labels
        boot = bootstrap(state, n_bootstrap, seed + 1, flat, jobs=jobs, progress=progress, hierarchy=two_stage)
        result.bootstrap, result.ci95 = {**boot, "cluster": cluster}, percentile_ci(boot["params"])
    if holdout:
        result.holdout = holdout_largest(data, budget_column(table), law, loss, seed, n_refine)
    result.settings = result.settings.replace(
        n_bootstrap=n_bootstrap, cluster=cluster, law=name, holdout_largest=holdout
    )
    result.versions, result.data = versions(), data_summary(table)
    result.noise = _noise_record(table, nf, state, weighted and n_bootstrap > 0 and inner, noise, scale, position)
    result.conditioning = fit_checks(table, result)  # after the noise block: the checks are judged against it
    return result


def _by_position(curve_sigma: str, table, result: FitResult, state, seed: int, n_refine: int):
    """(result, state, the record's position_sigma entry): stage 2 of `--curve-sigma position`
    (`position_sigma.refit_by_position`), or the fit as it is with None ("off", or residuals all ~0)."""
    if curve_sigma not in CURVE_SIGMA_MODES:
        raise InputError(f"curve_sigma must be one of {CURVE_SIGMA_MODES}; got {curve_sigma!r}")
    refit = None if curve_sigma == "off" else refit_by_position(table, state, seed, n_refine)
    if refit is None:
        return result, state, None
    result, state, entry = refit
    result.settings = result.settings.replace(curve_sigma=curve_sigma)
    return result, state, entry


def _noise_record(table, nf, state, inner, noise: str, scale, position):
    """The record's noise block (`noise.noise_block`; inner: what a seed-weighted bootstrap did with the seeds, else
    falsy) with what `power` draws from a pilot (`with_pilot_noise`), in log units (a position sigma's fit read
    unweighted), and the position sigma's entry."""
    logs = state if position is None else replace(state, data=replace(state.data, sigma=None, sigma_estimated=False))
    block = noise_block(table, nf, inner or None, noise != "off", scale, residual_tails(logs))
    block = with_pilot_noise(block, logs, table, nf.row_sigma, nf.reps.point)
    if position is None:
        return block
    said = POSITION_STATEMENT if block.statement == NO_SEED_STATEMENT else block.statement
    position = {**position, "curve_standardised": standardised_curve_noise(state, table)}  # what `power` weighs by
    return block.replace(position_sigma=position, statement=said)


def _attach_profile(result: FitResult, state, profile: bool | None):
    """The profile of the law's `profile_param` (phi) on `result` (default: when the law has one), and the state
    to continue from: a profile that finds a lower objective than the multi-start moves the fit there
    (`profile_refit`, said in the warnings)."""
    param = state.law.profile_param  # the coordinate the record's `profile_phi` holds (phi), or None
    if profile is None:
        profile = param is not None
    if not (profile and param is not None):
        return state
    old = result.objective
    result.profile_phi, better = profile_refit(state, param)  # its grid "x" is written under the param's name
    if better is not None:
        note = (
            f"the {param} profile found a lower objective than the multi-start ({better.objective:.8g} < "
            f"{old:.8g}): refitted from the profile's lowest point ({param} {result.params[param]:.4g} -> "
            f"{state.law.to_user(better.theta)[param]:.4g})"
        )
        state = adopt_optimum(result, state, better, note)
    if result.profile_phi.warning:
        result.warnings.append(result.profile_phi.warning)
    return state


def _seeds_as_rows(table, seed_column: str | None) -> list[str]:
    """noise "off" on a table with seed repeats: each seed's run is a row of its own, so the intervals count seed
    copies as independent data (three near-identical seeds called phi measured at 0.103 wide); said in the fit's
    warnings."""
    reps = replicate_groups(table, seed_column)
    repeated = int((reps.seeds > 1).sum())
    if not repeated:
        return []
    return [
        f"--noise off with seed repeats ({repeated} of {len(reps.seeds)} points, {len(table)} rows): each seed's run "
        "counts as an independent row, so the intervals treat seed copies as new data and are too narrow; fit with "
        "--noise auto (the seed sigma measured and the points bootstrapped with their seeds)"
    ]
