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
from scipy.stats import chi2

from loopscale.errors import InputError
from loopscale.fit.bounds import BOUNDS, DPHI_BOUNDS, clip_to_bounds
from loopscale.fit.laws.form import Law, per_pass_rows
from loopscale.fit.laws.looped import Looped
from loopscale.fit.laws.looped_joint import RECIPE_CODE
from loopscale.fit.laws.looped_pass import LoopedPass
from loopscale.fit.laws.registry import law_data_from_table, make_law, per_recipe_form
from loopscale.fit.noise import noise_setup
from loopscale.fit.objective import Loss
from loopscale.fit.optimize import FitState, fit_law, lm_batch, newton, refine
from loopscale.fit.replicates import point_keys
from loopscale.fit.resample import PROGRESS_DELAY_S, on_one_blas_thread
from loopscale.fit.result import load_fit
from loopscale.fit.runs_table import PARENT_COLUMN
from loopscale.fit.starts import screen_starts
from loopscale.fit.synthetic import law_loss
from loopscale.fit.task_pool import run_tasks
from loopscale.fit.uncertainty import profile_interval, scale_to_scatter
from loopscale.fit.verdict import MDE_FACTOR, POWER, Z_LEVEL

DENSE = ("E", "A", "alpha", "B", "beta")
CANDIDATE = "candidate"  # the second recipe of a simulated comparison
BASELINE = "baseline"  # the recipe whose r = 1 runs a recipe without its own shares
SIMS_PER_TASK = 8  # simulated sweeps per chunk: a worker's unit of work
N_SCREENED_STARTS = 2  # screened starts beside the noise-free optimum, as the bootstrap's replicates use


@dataclass(frozen=True)
class Truth:
    """The law the simulated sweeps are drawn from and the noise the pilot shows: E, A, alpha, B, beta, phi; the
    seed sigma of log L and the degrees of freedom it rests on (sigma_dof; None: known exactly, e.g. stated);
    the law's misfit at a point (misfit_log: the standard deviation of a shift shared by the point's seeds);
    the Student-t degrees of freedom of the noise (tail_dof; None: Gaussian); the share of a forked job's noise
    its branches share (parent_share); where sigma came from (said in outputs)."""

    params: Mapping[str, float]
    sigma_log: float
    parent_share: float = 1.0
    sigma_source: str = "stated"
    sigma_dof: float | None = None
    misfit_log: float = 0.0
    tail_dof: float | None = None

    def __post_init__(self):
        missing = [k for k in (*DENSE, "phi") if k not in self.params]
        if missing:
            raise InputError(f"the law needs {', '.join(missing)} (E, A, alpha, B, beta, phi)")
        if not (np.isfinite(self.sigma_log) and self.sigma_log > 0):
            raise InputError(f"the seed sigma of log L must be > 0; got {self.sigma_log}")
        if not 0 <= self.parent_share <= 1:
            raise InputError(f"the parent share of the noise must be in [0, 1]; got {self.parent_share}")
        if self.sigma_dof is not None and not self.sigma_dof >= 1:
            raise InputError(f"sigma's degrees of freedom must be >= 1; got {self.sigma_dof}")
        if not (np.isfinite(self.misfit_log) and self.misfit_log >= 0):
            raise InputError(f"the misfit must be >= 0; got {self.misfit_log}")
        if self.tail_dof is not None and not self.tail_dof > 4:
            raise InputError(f"the noise's t degrees of freedom must be > 4 (a finite kurtosis); got {self.tail_dof}")

    def sigma_interval(self, level: float = 0.95) -> tuple[float, float]:
        """sigma's two-sided interval from its degrees of freedom (nu s^2 / sigma^2 ~ chi2_nu); a point if known."""
        if self.sigma_dof is None:
            return self.sigma_log, self.sigma_log
        nu, tail = self.sigma_dof, (1 - level) / 2
        return (
            self.sigma_log * math.sqrt(nu / chi2.ppf(1 - tail, nu)),
            self.sigma_log * math.sqrt(nu / chi2.ppf(tail, nu)),
        )


def check_in_box(params: Mapping[str, float], delta_phi: float = 0.0) -> None:
    """InputError (one line) when the law, or phi + the planted delta-phi, lies outside the fitter's box: a fit
    could not recover it, and its pinned estimates would read as a precise design."""
    law = make_law(Looped.name, np.array([1.0, 2.0]))
    theta = law.from_user({k: params[k] for k in (*DENSE, "phi")})
    for name, value, (lo, hi) in zip(law.internal_names, theta, law.bounds()):
        if not lo < value < hi:
            raise InputError(f"the law's {name} = {value:.4g} is outside the fitter's box ({lo:g}, {hi:g}): refused")
    phi = params["phi"] + delta_phi
    if not BOUNDS["phi"][0] < phi < BOUNDS["phi"][1] or not DPHI_BOUNDS[0] < delta_phi < DPHI_BOUNDS[1]:
        raise InputError(
            f"phi + delta-phi = {phi:.4g} (delta-phi {delta_phi:+.4g}) is outside the fitter's box "
            f"phi in {BOUNDS['phi']}, delta-phi in {DPHI_BOUNDS}: refused"
        )


def _noise_dof(sigma: float, seed_dof, tau: float, scale: dict, n_rows: int) -> float | None:
    """The degrees of freedom of a point mean's noise tau^2 + sigma^2 / n (n: runs a point), Welch-Satterthwaite
    from sigma's (the seed repeats') and tau's (the points': G - p, `scale.scatter_dof`)."""
    if not seed_dof:
        return None
    groups = max(1, scale.get("groups") or 1)
    v_seed = sigma**2 * groups / max(n_rows, 1)
    if not tau:
        return float(seed_dof)
    v_tau, dof_tau = tau**2, max(1, scale.get("scatter_dof") or 1)
    return float((v_tau + v_seed) ** 2 / (v_tau**2 / dof_tau + v_seed**2 / seed_dof))


def truth_from_fit(fit, sigma_log: float | None = None, parent_share: float = 1.0) -> Truth:
    """A pilot fit's law (a looped fit's phi; a joint fit's reference phi) with the noise it shows: `sigma_log`
    when given (then exact), else the seed sigma the fit measured from its seed repeats with its degrees of
    freedom, the law's misfit at a point beyond it (`uncertainty.point_misfit`: the points' mean residuals
    against their seeds' noise) and heavy tails where its residuals have them
    (`uncertainty.residual_tails`); else its RMS residual in log L corrected for the p fitted parameters (seed
    noise and misfit together, n - p degrees of freedom)."""
    fit = load_fit(fit)
    params = {k: fit.params[k] for k in DENSE if k in fit.params}
    ref = (fit.joint or {}).get("reference")
    phi = fit.params.get("phi", fit.params.get(f"phi[{ref}]") if ref else None)
    if phi is None or len(params) < len(DENSE):
        raise InputError(f"a pilot fit needs the looped law's E, A, alpha, B, beta and phi; got law {fit.law!r}")
    params["phi"] = phi
    noise = fit.noise or {}
    tail_dof = (noise.get("tails") or {}).get("t_dof")
    if sigma_log is not None:
        return Truth(params, float(sigma_log), parent_share, "stated (--sigma)", tail_dof=tail_dof)
    measured = noise.get("sigma_log")
    if measured:
        scale = noise.get("scale") or {}
        tau = float(scale.get("misfit_log") or 0.0)
        dof = _noise_dof(float(measured), noise.get("dof"), tau, scale, fit.n_rows)
        source = "the pilot's seed repeats" + (f" and its misfit at a point ({tau:.3g} in log L)" if tau else "")
        return Truth(params, float(measured), parent_share, source, dof or None, tau, tail_dof)
    n, p = fit.n_rows, len(fit.params)
    if not fit.residual_rms_log or n <= p:
        raise InputError(
            "the pilot fit records no noise (no seed sigma, no residual RMS over n > p rows): give --sigma"
        )
    # the RMS residual of n rows about p fitted parameters underestimates sigma by sqrt((n - p) / n)
    sigma = float(fit.residual_rms_log) * math.sqrt(n / (n - p))
    source = f"the pilot's RMS residual x sqrt(n / (n - p)), n = {n}, p = {p} (no seed repeats)"
    return Truth(params, sigma, parent_share, source, n - p, 0.0, tail_dof)


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


def unit_draws(rng: np.random.Generator, n: int, tail_dof: float | None) -> np.ndarray:
    """n draws of unit variance: Gaussian, or Student-t with tail_dof degrees of freedom scaled to variance 1."""
    if tail_dof is None:
        return rng.standard_normal(n)
    return rng.standard_t(tail_dof, n) / math.sqrt(tail_dof / (tail_dof - 2))


def draw_noise(
    rng: np.random.Generator,
    clusters: np.ndarray,
    sigma_log: float,
    share: float,
    points: np.ndarray | None = None,
    misfit_log: float = 0.0,
    tail_dof: float | None = None,
) -> np.ndarray:
    """eps per row: sigma (sqrt(share) u_cluster + sqrt(1 - share) u_run) + tau u_point (module docstring), u of
    unit variance (`unit_draws`); the misfit tau u_point is shared by a point's seeds."""
    shared = unit_draws(rng, int(clusters.max()) + 1, tail_dof)[clusters]
    own = unit_draws(rng, len(clusters), tail_dof)
    eps = sigma_log * (math.sqrt(share) * shared + math.sqrt(1 - share) * own)
    if misfit_log and points is not None:
        eps = eps + misfit_log * rng.standard_normal(int(points.max()) + 1)[points]
    return eps


def scale_draw(rng: np.random.Generator, dof: float | None) -> float:
    """A draw of sigma_true / sigma_hat given sigma_hat on `dof` degrees of freedom (sigma^2 ~ nu s^2 / chi2_nu):
    each simulated sweep's noise is as uncertain as the pilot's estimate of it. 1 when sigma is known."""
    return 1.0 if dof is None else math.sqrt(dof / rng.chisquare(dof))


# ----------------------------------------------------------------------------------------------
# Fitting one simulated sweep, as `fit` does (the fast path)
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Problem:
    """What every simulated sweep of one design shares: the table (L filled per sweep), the law, its starts,
    the true log L, the noise clusters (forked jobs) and points (the misfit's), and the truth; `full`: the
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


def fit_simulated(problem: Problem, L: np.ndarray) -> tuple[float, float, float]:
    """(estimate, profile interval's low and high end) of problem.param from one simulated sweep, fitted as `fit`
    does (the noise model, the scale bounded by the scatter: `uncertainty.scale_to_scatter`) and read as the
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
        eps = f * draw_noise(
            rng, problem.clusters, t.sigma_log, t.parent_share, problem.points, t.misfit_log, t.tail_dof
        )
        out[i, 3] = f
        try:
            with np.errstate(all="ignore"):
                out[i, :3] = fit_simulated(problem, np.exp(problem.log_L + eps))
        except (ValueError, np.linalg.LinAlgError, FloatingPointError):
            pass
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
    check_in_box(truth.params, delta_phi)
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
    keys = point_keys(table)
    points = keys.groupby(list(keys.columns), sort=False, dropna=False).ngroup().to_numpy()
    internal = f"dphi[{CANDIDATE}]" if joint else "phi"
    return Problem(table, law, starts, log_L, noise_clusters(table), truth, param, loss, full, points, internal)


# ----------------------------------------------------------------------------------------------
# Summaries
# ----------------------------------------------------------------------------------------------
def summarise(sims: np.ndarray, true_value: float) -> dict[str, Any]:
    """se, bias and the verdict's interval over simulated sweeps (rows of estimate, interval low, high, scale
    draw; NaN estimates: failed fits, counted): the median width of the profile interval (`width95`: what one
    sweep's interval spans), its coverage of the truth and the share left open."""
    est, lo, hi = sims[:, 0], sims[:, 1], sims[:, 2]
    ok = np.isfinite(est)
    se = float(np.std(est[ok], ddof=1)) if ok.sum() >= 2 else float("nan")
    closed = ok & np.isfinite(lo) & np.isfinite(hi)
    return {
        "true": float(true_value),
        "mean": float(np.mean(est[ok])) if ok.any() else float("nan"),
        "bias": float(np.mean(est[ok]) - true_value) if ok.any() else float("nan"),
        "se": se,
        "width95": float(np.median(hi[closed] - lo[closed])) if closed.any() else float("nan"),
        "coverage": float(np.mean((lo[closed] <= true_value) & (true_value <= hi[closed]))) if closed.any() else None,
        "open_share": float(1 - closed.sum() / max(ok.sum(), 1)),
        "n_sims": int(len(est)),
        "n_failed": int((~ok).sum()),
    }


def verdict_mde(sims: np.ndarray, planted: float, upper_factor: float = 1.0, n_boot: int = 200) -> dict[str, float]:
    """The smallest |delta-phi| the verdict calls "real" in POWER of sweeps, from simulated sweeps at the planted
    value: moving the truth by m moves a sweep's interval by m, so the truth must pass planted - low (upwards) or
    high - planted (downwards) for the interval to exclude 0; the MDE is the POWER quantile of that distance, the
    larger of the two directions (an open end or a failed fit: never). `mde` draws sigma per sweep from its
    uncertainty (what a pilot's design delivers on average), `mde_point` holds sigma at the pilot's value,
    `mde_upper` at the upper end of sigma's 95% interval (`upper_factor` x the point value; the distance scales
    with the noise); `mde_mc_se`: the Monte-Carlo standard error of `mde` (a bootstrap over the sweeps)."""
    est, lo, hi, f = sims.T
    up = np.where(np.isfinite(est) & np.isfinite(lo), planted - lo, np.inf)
    down = np.where(np.isfinite(est) & np.isfinite(hi), hi - planted, np.inf)

    def mde_of(u, d):
        return float(max(np.quantile(u, POWER), np.quantile(d, POWER)))

    rng = np.random.default_rng(0)
    draws = [mde_of(up[i], down[i]) for i in (rng.integers(0, len(up), len(up)) for _ in range(n_boot))]
    point = mde_of(up / f, down / f)
    return {
        "mde": mde_of(up, down),
        "mde_point": point,
        "mde_upper": point * upper_factor,
        "mde_mc_se": float(np.std([d for d in draws if np.isfinite(d)], ddof=1)) if n_boot > 1 else float("nan"),
    }


def power_at(delta: float, se: float) -> float:
    """The probability that a two-sided 5% test of delta = 0 rejects when the truth is `delta` and the estimate
    is normal with standard error se: Phi(delta / se - z) + Phi(-delta / se - z)."""
    if not se > 0:
        return float("nan")
    z = delta / se
    return float(0.5 * (math.erfc(-(z - Z_LEVEL) / math.sqrt(2)) + math.erfc(-(-z - Z_LEVEL) / math.sqrt(2))))


def detected_share(sims: np.ndarray) -> float:
    """The share of simulated sweeps whose verdict interval excludes 0 (the verdict says "real")."""
    lo, hi = sims[:, 1], sims[:, 2]
    return float(np.mean((lo > 0) | (hi < 0))) if len(sims) else float("nan")


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
    out: dict[str, Any] = {"n_runs": int(len(design)), "estimates": {}, "intervals": {}}
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
        if joint:
            low, high = truth.sigma_interval()
            summary.update(
                planted=float(delta_phi),
                detected_share=detected_share(sims),
                sigma_interval=[low, high],
                **verdict_mde(sims, delta_phi, high / truth.sigma_log),
            )
        out[key] = summary
        out["estimates"][key] = sims[:, 0]
        out["intervals"][key] = sims[:, 1:3]
    return out


def mde_formula() -> str:
    return (
        "MDE = the smallest |Δφ| whose verdict interval (the profile interval the verdict reads) excludes 0 in 80% "
        "of simulated sweeps, each drawn with the pilot's seed noise, misfit and tails and sigma drawn from its "
        "uncertainty; beside it, the MDE with sigma at its estimate and at the upper end of its 95% interval"
    )
