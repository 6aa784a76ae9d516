"""How many runs does it take? The precision of phi and delta-phi that a sweep design will give, by simulation
(`loopscale power`; docs/design.md, "Power").

A design is a points table: one row per training run the sweep trains, with the columns of a runs table (r,
N_once, N_rec, N_pass, N, D, C, C_budget, width, recipe, seed and, in a forked sweep, `parent`: the job whose stable
phase its branches share). A design with parameters used once per pass (N_pass > 0: per-pass adapters, a
loop-index embedding) is drawn from and fitted with the looped-pass law (N_once + N_pass + r^phi N_rec), as
`loopscale fit --law looped-pass` fits its runs; any other with the looped law (`design_law`), or with the pilot's
own law where it has parameters beyond r^phi (looped-entry: m_r = kappa r^phi for r > 1, its kappa drawn per sweep
from the pilot's uncertainty of it, `pilot.params_draw`; its delta-phi with the law's per-recipe form).
`loopscale.launch.design` builds it from a sweep's expansion with exact accounting. From a law and the noise a pilot
shows (`loopscale.fit.pilot.Truth`: seed sigma with its degrees of freedom, misfit at a point, tails),
`simulate_design` draws n_sims sweeps of the design,

    log L = log L_law + f (sigma (sqrt(rho) u_parent + sqrt(1 - rho) u_run) + tau u_point),

(rho: the share of a run's noise that the branches of one forked job share; u of unit variance, Student-t where
the pilot's tails are heavy; u_point shared by a point's seeds; f a draw of sigma's own uncertainty; a pilot
without seed repeats: sigma and tau a draw of the split of its whole noise: `pilot`),
and fits each as `loopscale fit` does: the table's noise model (`noise.noise_setup`), the fitter's fast path,
the bootstrap replicate's (`resample.solve_chunk`): one batched Levenberg-Marquardt pass from the truth (the
noise-free optimum) and the best screened starts, exact Newton, tight L-BFGS-B (`full`: the multi-start of
`fit_law` instead, ~10x slower), then the scale bounded by the scatter about the law (`noise_scale`), and reads
the interval the verdict reads: the profile's (`uncertainty.profile_interval`). Two fits per sweep: the looped
law on the design (phi), and the joint law on the design plus a second recipe's copy of its looped runs (the r = 1
runs shared, as a probe reuses the baseline's), with phi + delta planted (delta-phi).

From the n_sims sweeps: se (the estimates' standard deviation), bias (mean - truth), the verdict interval's
median width, its coverage, and the minimum detectable delta-phi (`verdict_mde`): the smallest |delta| whose
interval excludes 0 in 80% of sweeps, beside it at sigma's estimate and its 95% upper end, with its Monte-Carlo
error; the share of sweeps whose interval excludes 0 at the planted delta (`detected_share`). Reproducible from
`seed` whatever `jobs` (chunk k of a design draws from its own generator, seeded by (seed, k)).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from loopscale.errors import InputError
from loopscale.fit.bounds import clip_to_bounds
from loopscale.fit.cluster_se import noise_clusters
from loopscale.fit.laws.form import Law, per_pass_rows
from loopscale.fit.laws.looped import Looped
from loopscale.fit.laws.looped_joint import RECIPE_CODE, LoopedJoint
from loopscale.fit.laws.looped_pass import LoopedPass
from loopscale.fit.laws.registry import law_class, law_data_from_table, per_recipe_form, warm_law
from loopscale.fit.noise import noise_setup
from loopscale.fit.noise_scale import scale_to_scatter
from loopscale.fit.objective import Loss
from loopscale.fit.optimize import FitState, fit_law, lm_batch, newton, refine
from loopscale.fit.pilot import (
    Truth,
    bound_law,
    check_in_box,
    draw_noise,
    params_draw,
    scale_draw,
    share_draw,
    simulated_law,
    split_draw,
)
from loopscale.fit.power_summary import Simulation, detected_share, summarise, verdict_mde, width_rule
from loopscale.fit.replicates import point_keys
from loopscale.fit.resample import PROGRESS_DELAY_S, on_one_blas_thread
from loopscale.fit.runs_table import PARENT_COLUMN
from loopscale.fit.starts import screen_starts
from loopscale.fit.task_pool import run_tasks
from loopscale.fit.uncertainty import profile_interval

CANDIDATE = "candidate"  # the second recipe of a simulated comparison
BASELINE = "baseline"  # the recipe whose r = 1 runs a recipe without its own shares
SIMS_PER_TASK = 8  # simulated sweeps per chunk: a worker's unit of work
N_SCREENED_STARTS = 2  # screened starts beside the noise-free optimum, as the bootstrap's replicates use


# ----------------------------------------------------------------------------------------------
# The simulated tables
# ----------------------------------------------------------------------------------------------
def comparison_design(design: pd.DataFrame, recipe: str = CANDIDATE) -> pd.DataFrame:
    """The design plus a second recipe's copy of its looped (r > 1) runs, each copy its own job (a probe trains
    its own looped runs and reuses the baseline's r = 1 runs); RECIPE_CODE 0 for the design's rows, 1 for the
    copy's (the joint law's recipe codes)."""
    base = design.assign(**{RECIPE_CODE: 0})
    looped = design[design["r"].to_numpy(dtype=float) > 1]
    if looped.empty or (design["r"].to_numpy(dtype=float) == 1).sum() == 0:
        raise InputError("a delta-phi design needs r = 1 runs and looped (r > 1) runs")
    copy = looped.assign(recipe=recipe, **{RECIPE_CODE: 1})
    if PARENT_COLUMN in copy.columns:
        copy[PARENT_COLUMN] = copy[PARENT_COLUMN].astype(str).map(lambda p: f"{p}@{recipe}" if p else p)
    return pd.concat([base, copy], ignore_index=True)


def law_log_loss(
    table: pd.DataFrame, params: Mapping[str, float], delta_phi: float = 0.0, law: str = Looped.name
) -> np.ndarray:
    """log L of the law (a registered law's prediction, `Law.predict_table`) per row, phi + delta_phi on the rows of
    the second recipe (RECIPE_CODE 1)."""
    code = table[RECIPE_CODE].to_numpy() if RECIPE_CODE in table.columns else np.zeros(len(table), int)
    predict = law_class(law).predict_table
    L = predict(params, table)
    if delta_phi and (code == 1).any():
        L = np.where(code == 1, predict({**params, "phi": params["phi"] + delta_phi}, table), L)
    return np.log(L)


# ----------------------------------------------------------------------------------------------
# Fitting one simulated sweep, as `fit` does (the fast path)
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Problem:
    """What every simulated sweep of one design shares: the table (L filled per sweep), the law, its starts,
    the true log L, the noise clusters (forked jobs) and points (the misfit's), and the truth; `single`: the law the
    truth's parameters are of (the design's law; per sweep its log L again where the truth draws kappa), `delta_phi`
    the difference planted; `full`: the
    multi-start of `fit_law` instead of the fast path; `param`: the parameter read off each fit (phi), or two
    whose difference is (phi[candidate], phi[reference]: delta-phi), and `internal`, the coordinate whose
    profile interval the verdict reads (phi, or dphi[candidate])."""

    table: pd.DataFrame
    law: Law
    starts: np.ndarray
    log_L: np.ndarray
    clusters: np.ndarray
    truth: Truth
    param: tuple[str, ...]
    loss: Loss
    full: bool = False
    points: np.ndarray | None = None
    internal: str = "phi"
    single: str = Looped.name
    delta_phi: float = 0.0


def fit_simulated(problem: Problem, L: np.ndarray) -> tuple[float, float, float]:
    """(estimate, profile interval's low and high end) of problem.param from one simulated sweep, fitted as `fit`
    does (the noise model, the scale bounded by the scatter: `noise_scale.scale_to_scatter`) and read as the
    verdict reads it (the profile interval: `uncertainty.profile_interval`; an open end is NaN)."""
    table = problem.table.assign(L=L)
    _, data, loss = noise_setup(table, law_data_from_table(table, problem.law), problem.loss)
    law = problem.law
    if problem.full:
        state = fit_law(data, law, loss)[1]
    else:
        th, fv = lm_batch(law, data, loss, problem.starts)
        best = int(np.nanargmin(fv))
        theta = newton(law, data, loss, th[best])[0] if law.has_hessian else th[best]
        state = FitState(law, data, loss, refine(theta, law, data, loss), problem.starts)
    state, _ = scale_to_scatter(state)
    params = law.to_user(state.best.theta)
    values = [float(params[name]) for name in problem.param]
    lo, hi = profile_interval(state, problem.internal)
    return (
        values[0] if len(values) == 1 else values[0] - values[1],
        np.nan if lo is None else lo,
        np.nan if hi is None else hi,
    )


def solve_sims(problem: Problem, task: tuple) -> np.ndarray:
    """One chunk of simulated sweeps: (seed, k, size) -> (size, 4) rows of (estimate, interval low, high, the
    noise scale's draw f), drawn from the generator (seed, k): each sweep's noise is the pilot's scaled by f
    (`scale_draw`), with its misfit and tails."""
    seed, k, size = task
    rng = np.random.default_rng([seed, k])
    out = np.full((size, 4), np.nan)
    t = problem.truth
    for i in range(size):
        f = scale_draw(rng, t.sigma_dof)
        sigma, misfit = split_draw(rng, t)
        share = share_draw(rng, t)
        pools = (t.seed_units, t.point_units)
        eps = f * draw_noise(rng, problem.clusters, sigma, share, problem.points, misfit, t.tail_dof, *pools)
        log_L = problem.log_L
        if t.params_se:  # the law's own parameters (kappa) as unsure as the pilot's estimate of them
            log_L = law_log_loss(problem.table, params_draw(rng, t), problem.delta_phi, problem.single)
        out[i, 3] = f
        try:
            with np.errstate(all="ignore"):
                out[i, :3] = fit_simulated(problem, np.exp(log_L + eps))
        except (ValueError, np.linalg.LinAlgError, FloatingPointError):
            pass
    return out


def design_law(table: pd.DataFrame, law: str = Looped.name) -> str:
    """The law a design's runs are drawn from and fitted with: for the looped law's parameters (`pilot.simulated_law`)
    looped-pass where some run has parameters used once per pass (N_pass > 0), else looped (the two agree where
    N_pass = 0); another law (looped-entry) itself, when the design can identify it (`Law.check_table`)."""
    if simulated_law(law) == Looped.name:
        return LoopedPass.name if per_pass_rows(table) else Looped.name
    law_class(law).check_table(table)
    return law


def screened_starts(law: Law, data, loss: Loss, n: int) -> np.ndarray:
    """The best n screened starts of a law on a noise-free table (`starts.screen_starts`); a law that starts from
    another's optimum (`Law.warm_start`: looped-entry from looped) the warm starts of that law's best n."""
    rng = np.random.default_rng(0)
    if law.warm_start is None:
        return screen_starts(law, data, loss, 2 * n, rng)[0][:n]
    base = screen_starts(warm_law(law, data.r), data, loss, 2 * n, rng)[0][:n]
    return np.vstack([law.warm_starts(theta) for theta in base])


def recipe_rows(table: pd.DataFrame, recipe: str | None) -> pd.DataFrame:
    """A runs table's rows that make one recipe's design: the recipe's own runs, and the baseline's r = 1 runs when
    it has none of its own (a recipe that is the baseline at r = 1 shares them: sweeps/experiment/designs_cpu.yaml).
    recipe None: the table as it is, which may hold the looped runs of one recipe only (a design has one phi)."""
    names = table["recipe"].astype(str) if "recipe" in table.columns else None
    if recipe is None:
        looped = [] if names is None else sorted(set(names[table["r"].to_numpy(float) > 1]))
        if len(looped) > 1:
            raise InputError(
                f"the table holds the looped runs of {len(looped)} recipes ({', '.join(looped)}): a design is one "
                "recipe's runs; choose one (--recipe NAME)"
            )
        return table
    if names is None:
        raise InputError(f"recipe {recipe!r} asked for, but the table has no `recipe` column")
    own = table[names == recipe]
    if own.empty:
        raise InputError(f"the table has no runs of recipe {recipe!r}; it has {', '.join(sorted(set(names)))}")
    if (own["r"].to_numpy(float) == 1).any():
        return own
    shared = table[(names == BASELINE) & (table["r"].to_numpy(float) == 1)]
    if shared.empty:
        raise InputError(f"recipe {recipe!r} has no r = 1 runs, and the table no {BASELINE!r} r = 1 runs to share")
    return pd.concat([shared, own], ignore_index=True)


def make_problem(
    design: pd.DataFrame, truth: Truth, joint: bool, delta_phi: float = 0.0, full: bool = False
) -> Problem:
    """The problem of one design: for phi (joint False) the design's law (`design_law`) on the design; for
    delta-phi its per-recipe form on `comparison_design` with delta_phi planted. Its starts, as a bootstrap
    replicate's: the truth (the optimum of the noise-free sweep, as the full-data optimum is a replicate's) and
    the best screened starts."""
    check_in_box(truth.params, delta_phi, truth.law)
    table = comparison_design(design) if joint else design.reset_index(drop=True)
    ref = str(design["recipe"].iloc[0]) if "recipe" in design.columns else "baseline"
    name = design_law(design, truth.law)
    log_L = law_log_loss(table, truth.params, delta_phi, name)
    user = dict(truth.params)
    if joint:
        phi = user.pop("phi")
        user.update({LoopedJoint.recipe_param(ref): phi, LoopedJoint.recipe_param(CANDIDATE): phi + delta_phi})
    # bound to the truth's parameters (`pilot.bound_law`): a looped-logn fit reads phi at the pilot's N_ref, as the
    # truth states it, not at the design's own geometric N_c
    law = bound_law(per_recipe_form(name).name if joint else name, user)
    loss = Loss()
    clean = law_data_from_table(table.assign(L=np.exp(log_L)), law)
    screened = screened_starts(law, clean, loss, N_SCREENED_STARTS)
    starts = clip_to_bounds(np.vstack([law.from_user(user), screened]), law)
    param = tuple(map(LoopedJoint.recipe_param, (CANDIDATE, ref))) if joint else ("phi",)
    keys = point_keys(table)
    points = keys.groupby(list(keys.columns), sort=False, dropna=False).ngroup().to_numpy()
    internal = f"dphi[{CANDIDATE}]" if joint else "phi"
    clusters = noise_clusters(table)
    return Problem(table, law, starts, log_L, clusters, truth, param, loss, full, points, internal, name, delta_phi)


# ----------------------------------------------------------------------------------------------
# Simulating a design
# ----------------------------------------------------------------------------------------------
@on_one_blas_thread
def simulate_design(
    design: pd.DataFrame,
    truth: Truth,
    n_sims: int = 200,
    seed: int = 0,
    delta_phi: float = 0.0,
    what: tuple[str, ...] = ("phi", "delta_phi"),
    jobs: int = 1,
    progress=None,
    label: str = "power",
    full: bool = False,
) -> Simulation:
    """n_sims simulated sweeps of `design` from `truth`, each fitted as `fit` would (module docstring): the
    Precision of phi and of delta-phi (with its MDE, detected share, planted value), for what is asked, and the
    raw estimates. delta_phi: the difference planted in the second recipe."""
    if n_sims < 2:
        raise InputError(f"power needs at least 2 simulated sweeps; got {n_sims}")
    out = Simulation(int(len(design)))
    for key in what:
        joint = key == "delta_phi"
        problem = make_problem(design, truth, joint, delta_phi if joint else 0.0, full)
        tasks = [(seed, k, min(SIMS_PER_TASK, n_sims - lo)) for k, lo in enumerate(range(0, n_sims, SIMS_PER_TASK))]
        sims = np.concatenate(
            run_tasks(
                solve_sims,
                problem,
                tasks,
                jobs,
                progress,
                f"{label}: {key}",
                "sweep",
                [t[2] for t in tasks],
                PROGRESS_DELAY_S,
            )
        )
        true_value = delta_phi if joint else truth.params["phi"]
        summary = summarise(sims, true_value)
        rule = width_rule(sims)
        summary = summary.replace(**(rule if not joint else {"width95_mc_se": rule["width95_mc_se"]}))
        if joint:
            low, high = truth.sigma_interval()
            summary = summary.replace(
                planted=float(delta_phi),
                detected_share=detected_share(sims),
                sigma_interval=[low, high],
                **verdict_mde(sims, delta_phi, high / truth.sigma_log),
            )
        out = replace(out, **{key: summary})
        out.estimates[key], out.intervals[key] = sims[:, 0], sims[:, 1:3]
    return out
