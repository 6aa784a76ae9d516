"""How many runs does it take? The precision of phi and delta-phi that a sweep design will give, by simulation
(`loopscale power`; docs/design.md, "Power").

A design is a points table: one row per training run the sweep trains, with the columns of a runs table (r,
N_once, N_rec, N_pass, N, D, C, C_budget, width, recipe, seed and, in a forked sweep, `parent`: the job whose stable
phase its branches share). A design with parameters used once per pass (N_pass > 0: per-pass adapters, a
loop-index embedding) is drawn from and fitted with the looped-pass law (N_once + N_pass + r^phi N_rec), as
`loopscale fit --law looped-pass` fits its runs; any other with the looped law (`design_law`).
`loopscale.launch.design` builds it from a sweep's expansion with exact accounting. From a law (a pilot fit's
parameters, or stated ones) and the seed sigma of log L (`Truth`), `simulate_design` draws n_sims sweeps of the
design,

    log L = log L_law + eps,   eps = sigma (sqrt(rho) z_parent + sqrt(1 - rho) z_run),

(rho: the share of a run's noise that the branches of one forked job share, as `synthetic.seeded_sweep` draws
it; each seed is its own parent), and fits each as `loopscale fit` does: the table's noise model first
(`noise.noise_setup`: with seed repeats the seed sigma is estimated and the residuals standardised by it),
then the fitter's fast path, the bootstrap replicate's (`resample.solve_chunk`): one batched Levenberg-Marquardt
pass from the truth (the noise-free optimum) and the best screened starts, exact Newton, tight L-BFGS-B (`full`:
the multi-start of `fit_law` instead, ~10x slower). Two fits per
sweep: the looped law on the design (phi), and the joint law on the design plus a second recipe's copy of its
looped runs (the r = 1 runs shared, as a probe reuses the baseline's), with phi + delta planted (delta-phi).

From the n_sims estimates: se (their standard deviation), bias (mean - truth), the expected 95% interval width
2 z_0.975 se (what a calibrated interval of one sweep spans), the minimum detectable delta-phi

    MDE = (z_0.975 + z_0.80) se(delta-phi)   (`verdict.MDE_FACTOR`, 2.80),

and the share of sweeps in which the planted delta is detected (|delta_hat| > z_0.975 se). Reproducible from
`seed` whatever `jobs` (chunk k of a design draws from its own generator, seeded by (seed, k)).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from loopscale.errors import InputError
from loopscale.fit.bounds import clip_to_bounds
from loopscale.fit.laws.form import Law, per_pass_rows
from loopscale.fit.laws.looped import Looped
from loopscale.fit.laws.looped_joint import RECIPE_CODE
from loopscale.fit.laws.looped_pass import LoopedPass
from loopscale.fit.laws.registry import law_data_from_table, make_law, per_recipe_form
from loopscale.fit.noise import noise_setup
from loopscale.fit.objective import Loss
from loopscale.fit.optimize import fit_law, lm_batch, newton, refine
from loopscale.fit.resample import PROGRESS_DELAY_S, on_one_blas_thread
from loopscale.fit.result import load_fit
from loopscale.fit.runs_table import PARENT_COLUMN
from loopscale.fit.starts import screen_starts
from loopscale.fit.synthetic import law_loss
from loopscale.fit.task_pool import run_tasks
from loopscale.fit.verdict import MDE_FACTOR, Z_LEVEL, Z_POWER

DENSE = ("E", "A", "alpha", "B", "beta")
CANDIDATE = "candidate"  # the second recipe of a simulated comparison
BASELINE = "baseline"  # the recipe whose r = 1 runs a recipe without its own shares
SIMS_PER_TASK = 8  # simulated sweeps per chunk: a worker's unit of work
N_SCREENED_STARTS = 2  # screened starts beside the noise-free optimum, as the bootstrap's replicates use


@dataclass(frozen=True)
class Truth:
    """The law the simulated sweeps are drawn from: E, A, alpha, B, beta, phi; the seed sigma of log L; the
    share of a forked job's noise its branches share (parent_share); where sigma came from (said in outputs)."""

    params: Mapping[str, float]
    sigma_log: float
    parent_share: float = 1.0
    sigma_source: str = "stated"

    def __post_init__(self):
        missing = [k for k in (*DENSE, "phi") if k not in self.params]
        if missing:
            raise InputError(f"the law needs {', '.join(missing)} (E, A, alpha, B, beta, phi)")
        if not (np.isfinite(self.sigma_log) and self.sigma_log > 0):
            raise InputError(f"the seed sigma of log L must be > 0; got {self.sigma_log}")
        if not 0 <= self.parent_share <= 1:
            raise InputError(f"the parent share of the noise must be in [0, 1]; got {self.parent_share}")


def truth_from_fit(fit, sigma_log: float | None = None, parent_share: float = 1.0) -> Truth:
    """A pilot fit's law (a looped fit's phi; a joint fit's reference phi) with its noise: `sigma_log` when
    given, else the seed sigma the fit measured from its seed repeats (`noise.sigma_log`), else its RMS residual
    in log L corrected for the p fitted parameters (an upper bound on the seed noise: it holds the law's misfit
    too)."""
    fit = load_fit(fit)
    params = {k: fit.params[k] for k in DENSE if k in fit.params}
    ref = (fit.joint or {}).get("reference")
    phi = fit.params.get("phi", fit.params.get(f"phi[{ref}]") if ref else None)
    if phi is None or len(params) < len(DENSE):
        raise InputError(f"a pilot fit needs the looped law's E, A, alpha, B, beta and phi; got law {fit.law!r}")
    params["phi"] = phi
    if sigma_log is not None:
        return Truth(params, float(sigma_log), parent_share, "stated (--sigma)")
    measured = (fit.noise or {}).get("sigma_log")
    if measured:
        return Truth(params, float(measured), parent_share, "the pilot's seed repeats")
    n, p = fit.n_rows, len(fit.params)
    if not fit.residual_rms_log or n <= p:
        raise InputError(
            "the pilot fit records no noise (no seed sigma, no residual RMS over n > p rows): give --sigma"
        )
    # the RMS residual of n rows about p fitted parameters underestimates sigma by sqrt((n - p) / n)
    sigma = float(fit.residual_rms_log) * math.sqrt(n / (n - p))
    return Truth(
        params, sigma, parent_share, f"the pilot's RMS residual x sqrt(n / (n - p)), n = {n}, p = {p} (no seed repeats)"
    )


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


def noise_clusters(table: pd.DataFrame) -> np.ndarray:
    """The noise a run shares with others: its forked job (parent) and seed; every unforked run alone."""
    if PARENT_COLUMN not in table.columns:
        return np.arange(len(table))
    parent = table[PARENT_COLUMN].fillna("").astype(str).to_numpy()
    seed = table["seed"].astype(str).to_numpy() if "seed" in table.columns else np.zeros(len(table), str)
    key = np.where(parent != "", np.char.add(np.char.add(parent.astype(str), "#"), seed.astype(str)), "")
    own = np.char.add("run#", np.arange(len(table)).astype(str))
    return np.unique(np.where(key != "", key, own), return_inverse=True)[1]


def law_log_loss(table: pd.DataFrame, params: Mapping[str, float], delta_phi: float = 0.0) -> np.ndarray:
    """log L of the law per row, phi + delta_phi on the rows of the second recipe (RECIPE_CODE 1)."""
    code = table[RECIPE_CODE].to_numpy() if RECIPE_CODE in table.columns else np.zeros(len(table), int)
    L = law_loss(table, params, params["phi"])
    if delta_phi and (code == 1).any():
        L = np.where(code == 1, law_loss(table, params, params["phi"] + delta_phi), L)
    return np.log(L)


def draw_noise(rng: np.random.Generator, clusters: np.ndarray, sigma_log: float, share: float) -> np.ndarray:
    """eps per row: sigma (sqrt(share) z_cluster + sqrt(1 - share) z_run) (module docstring)."""
    shared = rng.standard_normal(int(clusters.max()) + 1)[clusters]
    own = rng.standard_normal(len(clusters))
    return sigma_log * (math.sqrt(share) * shared + math.sqrt(1 - share) * own)


# ----------------------------------------------------------------------------------------------
# Fitting one simulated sweep, as `fit` does (the fast path)
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Problem:
    """What every simulated sweep of one design shares: the table (L filled per sweep), the law, its starts,
    the true log L, the noise clusters and the truth; `full`: the multi-start of `fit_law` instead of the
    fast path; `param`: the parameter read off each fit (phi), or two whose difference is (phi[candidate],
    phi[reference]: delta-phi)."""

    table: pd.DataFrame
    law: Law
    starts: np.ndarray
    log_L: np.ndarray
    clusters: np.ndarray
    truth: Truth
    param: tuple[str, ...]
    loss: Loss
    full: bool = False


def fit_simulated(problem: Problem, L: np.ndarray) -> float:
    """The estimate of problem.param from one simulated sweep (NaN when the fit fails)."""
    table = problem.table.assign(L=L)
    _, data, loss = noise_setup(table, law_data_from_table(table, problem.law), problem.loss)
    if problem.full:
        params = fit_law(data, problem.law, loss)[0].params
    else:
        th, fv = lm_batch(problem.law, data, loss, problem.starts)
        best = int(np.nanargmin(fv))
        theta = newton(problem.law, data, loss, th[best])[0] if problem.law.has_hessian else th[best]
        params = problem.law.to_user(refine(theta, problem.law, data, loss).theta)
    values = [float(params[name]) for name in problem.param]
    return values[0] if len(values) == 1 else values[0] - values[1]


def solve_sims(problem: Problem, task: tuple) -> np.ndarray:
    """One chunk of simulated sweeps: (seed, k, size) -> `size` estimates, drawn from the generator (seed, k)."""
    seed, k, size = task
    rng = np.random.default_rng([seed, k])
    out = np.empty(size)
    t = problem.truth
    for i in range(size):
        eps = draw_noise(rng, problem.clusters, t.sigma_log, t.parent_share)
        try:
            with np.errstate(all="ignore"):
                out[i] = fit_simulated(problem, np.exp(problem.log_L + eps))
        except (ValueError, np.linalg.LinAlgError, FloatingPointError):
            out[i] = np.nan
    return out


def design_law(table: pd.DataFrame) -> str:
    """The law a design's runs are fitted with: looped-pass where some run has parameters used once per pass
    (N_pass > 0), else looped (the two agree where N_pass = 0)."""
    return LoopedPass.name if per_pass_rows(table) else Looped.name


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
    table = comparison_design(design) if joint else design.reset_index(drop=True)
    ref = str(design["recipe"].iloc[0]) if "recipe" in design.columns else "baseline"
    name = design_law(design)
    law = (
        make_law(per_recipe_form(name).name, recipes=(ref, CANDIDATE))
        if joint
        else make_law(name, table["r"].to_numpy(float))
    )
    log_L = law_log_loss(table, truth.params, delta_phi)
    user = dict(truth.params)
    if joint:
        phi = user.pop("phi")
        user.update({f"phi[{ref}]": phi, f"phi[{CANDIDATE}]": phi + delta_phi})
    loss = Loss()
    clean = law_data_from_table(table.assign(L=np.exp(log_L)), law)
    screened, _ = screen_starts(law, clean, loss, 2 * N_SCREENED_STARTS, np.random.default_rng(0))
    starts = clip_to_bounds(np.vstack([law.from_user(user), screened[:N_SCREENED_STARTS]]), law)
    param = (f"phi[{CANDIDATE}]", f"phi[{ref}]") if joint else ("phi",)
    return Problem(table, law, starts, log_L, noise_clusters(table), truth, param, loss, full)


# ----------------------------------------------------------------------------------------------
# Summaries
# ----------------------------------------------------------------------------------------------
def summarise(estimates: np.ndarray, true_value: float) -> dict[str, Any]:
    """se, bias and the expected 95% interval width of n_sims estimates (NaN: failed fits, counted)."""
    ok = estimates[np.isfinite(estimates)]
    se = float(np.std(ok, ddof=1)) if len(ok) >= 2 else float("nan")
    return {
        "true": float(true_value),
        "mean": float(np.mean(ok)) if len(ok) else float("nan"),
        "bias": float(np.mean(ok) - true_value) if len(ok) else float("nan"),
        "se": se,
        "width95": 2 * Z_LEVEL * se,
        "n_sims": int(len(estimates)),
        "n_failed": int(len(estimates) - len(ok)),
    }


def power_at(delta: float, se: float) -> float:
    """The probability that a two-sided 5% test of delta = 0 rejects when the truth is `delta` and the estimate
    is normal with standard error se: Phi(delta / se - z) + Phi(-delta / se - z)."""
    if not se > 0:
        return float("nan")
    z = delta / se
    return float(0.5 * (math.erfc(-(z - Z_LEVEL) / math.sqrt(2)) + math.erfc(-(-z - Z_LEVEL) / math.sqrt(2))))


def detected_share(estimates: np.ndarray, se: float) -> float:
    """The share of simulated sweeps whose estimate lies beyond z_0.975 se from 0 (a 5% test rejects)."""
    ok = estimates[np.isfinite(estimates)]
    return float(np.mean(np.abs(ok) > Z_LEVEL * se)) if len(ok) else float("nan")


def seeds_needed(se: float, seeds: int, target: float, max_seeds: int = 64) -> int | None:
    """Seeds per point that bring MDE = 2.80 se down to `target`, at se ~ 1 / sqrt(seeds) (each point's mean
    over k seeds has noise sigma / sqrt(k)); None beyond max_seeds."""
    if not (se > 0 and target > 0):
        return None
    k = math.ceil(seeds * (MDE_FACTOR * se / target) ** 2 - 1e-9)
    k = max(k, 1)
    return k if k <= max_seeds else None


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
) -> dict[str, Any]:
    """n_sims simulated sweeps of `design` from `truth`, each fitted as `fit` would (module docstring).
    Returns {"phi": summary, "delta_phi": summary with mde, detected_share, planted}, for what is asked; the
    raw estimates under "estimates". delta_phi: the difference planted in the second recipe."""
    if n_sims < 2:
        raise InputError(f"power needs at least 2 simulated sweeps; got {n_sims}")
    out: dict[str, Any] = {"n_runs": int(len(design)), "estimates": {}}
    for key in what:
        joint = key == "delta_phi"
        problem = make_problem(design, truth, joint, delta_phi if joint else 0.0, full)
        tasks = [(seed, k, min(SIMS_PER_TASK, n_sims - lo)) for k, lo in enumerate(range(0, n_sims, SIMS_PER_TASK))]
        est = np.concatenate(
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
        summary = summarise(est, true_value)
        if joint:
            summary.update(
                planted=float(delta_phi),
                mde=MDE_FACTOR * summary["se"],
                detected_share=detected_share(est, summary["se"]),
            )
        out[key] = summary
        out["estimates"][key] = est
    return out


def mde_formula() -> str:
    return (
        f"MDE = (z_0.975 + z_0.80) se(Δφ) = ({Z_LEVEL:.3f} + {Z_POWER:.3f}) se = {MDE_FACTOR:.2f} se, se = the "
        "standard deviation of Δφ over the simulated sweeps"
    )
