"""What a pilot shows of its noise, and drawing it: the law and the noise `loopscale power` simulates sweeps from
(docs/design.md, "Power: how many runs"; issue 53).

`Truth` is the law (E, A, alpha, B, beta, phi, and the law's own parameters: looped-entry's kappa; `power_laws`
names the laws power can simulate) and the noise: the seed sigma of log L with the degrees of freedom
it rests on, the law's misfit at a point, the Student-t degrees of freedom of heavy tails, the share of a forked
job's noise its branches share; `truth_from_fit` reads them from a pilot fit's record (`noise` block:
`loopscale.fit.noise_scale`, its residual pools included), `check_in_box` refuses a law the fitter could not
recover, and `draw_noise`, `scale_draw`, `split_draw`, `share_draw` draw one simulated sweep's noise and
`params_draw` its law's own parameters from their sampling uncertainty.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import chi2

from loopscale.errors import InputError, not_one_of
from loopscale.fit.bounds import BOUNDS, DPHI_BOUNDS
from loopscale.fit.curve_worth import CurveNoise, CurvePilot
from loopscale.fit.isoflop import Z_LEVEL
from loopscale.fit.laws.form import Law
from loopscale.fit.laws.looped import Looped
from loopscale.fit.laws.looped_joint import LoopedJoint
from loopscale.fit.laws.registry import find_law, law_class, law_names, make_law, per_recipe_form
from loopscale.fit.result import load_fit

DENSE = ("E", "A", "alpha", "B", "beta")
R_VALUES = np.array([1.0, 2.0, 4.0, 8.0])  # binds a law to read its parameter names (no law power simulates is per-r)


def power_laws() -> tuple[str, ...]:
    """The laws `loopscale power` simulates sweeps from (the registry's, by what each law says of itself): a runs
    table's final-point law with phi as its profiled parameter and a per-recipe form to fit delta-phi with
    (looped, looped-entry, looped-pass)."""
    return tuple(
        name
        for name in law_names()
        if (cls := find_law(name)).profile_param == "phi"
        and not (cls.per_recipe or cls.reads_curves or cls.table != "runs")
        and per_recipe_form(name) is not None
    )


def law_params(law: str) -> tuple[str, ...]:
    """The user parameters of a law power simulates: E, A, alpha, B, beta, phi and its own (kappa)."""
    return make_law(law, R_VALUES).user_names


def bound_law(law: str, params: Mapping[str, float]) -> Law:
    """The law power simulates holding what it reads of the pilot's parameters (looped-logn's N_ref: the truth's phi
    is the exponent there, and every simulated fit reads its phi there too, `power.make_problem`)."""
    return law_class(law).from_params(params)


def held_params(law: str, params: Mapping[str, float]) -> dict[str, float]:
    """The values a law holds beside its fitted parameters (looped-logn's N_ref), as its record keeps them."""
    bound = bound_law(law, params)
    return {k: v for k, v in bound.to_user(bound.from_user(params)).items() if k not in bound.user_names}


def simulated_law(law: str) -> str:
    """The law a pilot of law `law` is simulated with: a law with the looped law's parameters (a pinned E, the
    looped-pass law) as the looped law, the design deciding looped or looped-pass (`power.design_law`); another
    law power simulates as itself."""
    return Looped.name if set(law_params(law)) == set(law_params(Looped.name)) else law


@dataclass(frozen=True)
class Truth:
    """The law the simulated sweeps are drawn from and the noise the pilot shows: E, A, alpha, B, beta, phi; the
    seed sigma of log L and the degrees of freedom it rests on (sigma_dof; None: known exactly, e.g. stated);
    the law's misfit at a point (misfit_log: the standard deviation of a shift shared by the point's seeds);
    the Student-t degrees of freedom of the noise (tail_dof; None: Gaussian); the share of a forked job's noise
    its branches share (parent_share); where sigma came from (said in outputs). split_unknown: sigma is the
    whole noise of a run and the pilot could not split it into seed noise and misfit (no seed repeats): each
    simulated sweep draws the misfit's share of its variance, w ~ Uniform(0, 1) (`split_draw`), so a design
    with more seeds than the pilot is not promised that seeds average all of it away. parent_share_se: the
    share's standard error, drawn per simulated sweep (`share_draw`). seed_units, point_units: the pilot's
    standardised residuals (`noise_scale.residual_units`), the pools the seed-level and point-level noise is
    resampled from (`unit_draws`); None: Student-t with tail_dof, or Gaussian. curve: a curve-law pilot's law
    and the noise along its curves (`curve_worth.CurvePilot`: what a run's curve is worth toward the MDE). law: the
    law the sweeps are drawn from and fitted with (`power_laws`), whose parameters `params` holds; params_se: the
    standard error of each of the law's own parameters beyond phi (kappa) in the fitter's coordinate (ln kappa),
    drawn per simulated sweep (`params_draw`), as sigma is: a pilot knows its kappa only roughly."""

    params: Mapping[str, float]
    sigma_log: float
    parent_share: float = 1.0
    sigma_source: str = "stated"
    sigma_dof: float | None = None
    misfit_log: float = 0.0
    tail_dof: float | None = None
    split_unknown: bool = False
    parent_share_se: float = 0.0
    seed_units: tuple[float, ...] | None = None
    point_units: tuple[float, ...] | None = None
    curve: CurvePilot | None = None
    law: str = Looped.name
    params_se: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self):
        if self.law not in power_laws():
            raise InputError(f"power simulates the {' / '.join(power_laws())} laws; got {self.law!r}")
        needed = law_params(self.law)
        missing = [k for k in needed if k not in self.params]
        if missing:
            raise InputError(f"the law needs {', '.join(missing)} ({', '.join(needed)})")
        for name, se in self.params_se.items():
            if name not in needed or name in (*DENSE, "phi") or not (np.isfinite(se) and se >= 0):
                raise InputError(f"the standard error of {name} must be >= 0 and of the law's own parameter; got {se}")
        if not (np.isfinite(self.sigma_log) and self.sigma_log > 0):
            raise InputError(f"the seed sigma of log L must be > 0; got {self.sigma_log}")
        if not 0 <= self.parent_share <= 1:
            raise InputError(f"the parent share of the noise must be in [0, 1]; got {self.parent_share}")
        if self.sigma_dof is not None and not self.sigma_dof >= 1:
            raise InputError(f"sigma's degrees of freedom must be >= 1; got {self.sigma_dof}")
        if not (np.isfinite(self.misfit_log) and self.misfit_log >= 0):
            raise InputError(f"the misfit must be >= 0; got {self.misfit_log}")
        if not (np.isfinite(self.parent_share_se) and self.parent_share_se >= 0):
            raise InputError(f"the parent share's standard error must be >= 0; got {self.parent_share_se}")
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


def check_in_box(params: Mapping[str, float], delta_phi: float = 0.0, law_name: str = Looped.name) -> None:
    """InputError (one line) when the law, or phi + the planted delta-phi, lies outside the fitter's box: a fit
    could not recover it, and its pinned estimates would read as a precise design."""
    law = bound_law(law_name, params)
    theta = law.from_user({k: params[k] for k in law.user_names})
    for name, value, (lo, hi) in zip(law.internal_names, theta, law.bounds()):
        if not lo < value < hi:
            raise InputError(f"the law's {name} = {value:.4g} is outside the fitter's box ({lo:g}, {hi:g}): refused")
    phi = params["phi"] + delta_phi
    if not BOUNDS["phi"][0] < phi < BOUNDS["phi"][1] or not DPHI_BOUNDS[0] < delta_phi < DPHI_BOUNDS[1]:
        raise InputError(
            f"phi + delta-phi = {phi:.4g} (delta-phi {delta_phi:+.4g}) is outside the fitter's box "
            f"phi in {BOUNDS['phi']}, delta-phi in {DPHI_BOUNDS}: refused"
        )


def stated_law(text: str) -> dict[str, float]:
    """`power --law "E=1.57,A=28,..."`: each of E, A, alpha, B, beta, phi once, a finite number (a key twice, a key
    the law does not have, or a value that is no number is refused in one line, not taken or dropped)."""
    known = (*DENSE, "phi")
    params: dict[str, float] = {}
    for item in (part.strip() for part in text.split(",") if part.strip()):
        key, sep, value = (x.strip() for x in item.partition("="))
        if not sep:
            raise InputError(f"--law {text!r}: give NAME=VALUE pairs, e.g. E=1.57,A=28,alpha=0.2,...")
        if key not in known:
            raise not_one_of("--law key", key, known, error=InputError, what="a parameter of the law")
        if key in params:
            raise InputError(f"--law {text!r}: {key} is given twice")
        try:
            params[key] = float(value)
        except ValueError:
            params[key] = math.nan
        if not math.isfinite(params[key]):
            raise InputError(f"--law {text!r}: {key}={value!r} is not a finite number")
    return params


def tail_dof_of_variance(dof: float, tail_dof: float | None, dof_per_row: float) -> float:
    """The degrees of freedom of a variance estimate on `dof` degrees of freedom from noise with Student-t tails:
    the chi-square whose variance matches var(s^2) / sigma^4 = 2 / nu + kappa c / nu (kappa = 6 / (t - 4) the
    excess kurtosis; c = (m - 1) / m for seed repeats of m, nu / n for n residuals about a law: `dof_per_row`),
    nu_eff = nu / (1 + kappa c / 2). A chi2_nu draw of sigma from heavy-tailed noise is too narrow: Student-t 5
    (kappa 6) and one seed a point halve it (issue 53)."""
    if tail_dof is None:
        return float(dof)
    kappa = 6.0 / (tail_dof - 4.0)
    return float(max(1.0, dof / (1.0 + kappa * dof_per_row / 2.0)))


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


def _pilot_law(fit, known, curves: bool) -> str:
    """The law a pilot fit's sweeps are simulated with (`simulated_law`): a joint fit's recipe law, a curve law's
    final-point law (`final_law`: looped, or looped-entry for looped-entry-curve, its kappa kept), else the fit's
    own; InputError naming the laws power simulates when it is none of them (its psi, gamma, k_r would be dropped:
    another law than the pilot's, silently)."""
    if known is None or not ("phi" in fit.params or known.per_recipe or curves):
        raise InputError(f"a pilot fit needs the looped law's E, A, alpha, B, beta and phi; got law {fit.law!r}")
    single = known.final_law if curves else (known.recipe_law if known.per_recipe else fit.law)
    law = simulated_law(single)
    if law in power_laws():
        return law
    beyond = sorted(set(law_params(single)) - set(law_params(Looped.name)))
    raise InputError(
        f"power simulates the {', '.join(power_laws())} laws (and their joint fits); the pilot's law {fit.law!r} "
        f"has {', '.join(beyond)} beyond them: fit the pilot with --law looped, looped-entry or looped-logn to size "
        "a sweep"
    )


def _pilot_params(fit, known, curves: bool) -> tuple[str, dict[str, float]]:
    """(the law the pilot is simulated with, its parameters): a curve law's at its final point, a joint fit's with
    the reference recipe's phi."""
    law_name = _pilot_law(fit, known, curves)
    final = known().final_point_params(fit.params) if curves else fit.params
    ref = (fit.joint or {}).get("reference")
    phi = fit.params.get("phi", fit.params.get(LoopedJoint.recipe_param(ref)) if ref else None)
    params = {k: float(final[k]) for k in law_params(law_name) if k in final and k != "phi"}
    if phi is None or len(params) != len(law_params(law_name)) - 1:
        raise InputError(f"a pilot fit needs the {law_name} law's {', '.join(law_params(law_name))}; got {fit.law!r}")
    params["phi"] = float(phi)
    return law_name, {**params, **held_params(law_name, {**final, **params})}


def _params_se(fit, law_name: str, params: Mapping[str, float]) -> dict[str, float]:
    """The standard error of each of the law's own parameters beyond phi (looped-entry's kappa), in the fitter's
    coordinate (ln kappa): the pilot's bootstrap 95% interval mapped there, its width / (2 z_0.975). InputError
    when the pilot has none: its kappa would be taken as exact."""
    law = make_law(law_name, R_VALUES)
    own = [k for k in law.user_names if k not in (*DENSE, "phi")]
    out = {}
    for name in own:
        ci = (fit.ci95 or {}).get(name)
        if not ci or any(v is None or not np.isfinite(v) for v in ci[:2]):
            raise InputError(
                f"the pilot's {name} has no bootstrap interval: power draws its sampling uncertainty per simulated "
                f"sweep; fit the pilot with --bootstrap N (law {law_name!r})"
            )
        i = law.user_names.index(name)  # its internal coordinate: the same position
        lo, hi = (law.from_user({**params, name: float(v)})[i] for v in ci[:2])
        out[name] = float(abs(hi - lo) / (2 * Z_LEVEL))
    return out


def truth_from_fit(fit, sigma_log: float | None = None, parent_share: float | None = None) -> Truth:
    """A pilot fit's law (a looped fit's phi; a joint fit's reference phi) with the noise it shows: `sigma_log`
    when given (then exact), else the seed sigma the fit measured from its seed repeats with its degrees of
    freedom, the law's misfit at a point beyond it (`uncertainty.point_misfit`: the points' mean residuals
    against their seeds' noise) and heavy tails where its residuals have them
    (`noise_scale.residual_tails`); else its RMS residual in log L corrected for the p fitted parameters (seed
    noise and misfit together, n - p degrees of freedom). parent_share None: the share of a run's noise a forked
    job's branches share as the pilot's residuals show it (`noise_scale.parent_share`), else 1 (a seed moves the
    whole job: the widest)."""
    fit = load_fit(fit)
    known = find_law(fit.law)  # a curve law's fit: the final point of loopscale's wsd run (Law.final_point_params)
    curves = known is not None and known.reads_curves
    law_name, params = _pilot_params(fit, known, curves)
    shape_law = {"law": law_name, "params_se": _params_se(fit, law_name, params)}
    noise = fit.noise or {}
    tail_dof = (noise.get("tails") or {}).get("t_dof")
    units = noise.get("units") or {}
    shape = {f"{level}_units": _pool(units.get(level)) for level in ("seed", "point")}
    share_se = 0.0
    if parent_share is None:
        # a curve fit's draws are runs: its share is its evaluations' (noise.curve); a forked design's branches: 1
        measured_share = None if curves else noise.get("parent_share")
        parent_share = 1.0 if measured_share is None else float(measured_share)
        share_se = 0.0 if measured_share is None else float(noise.get("parent_share_se") or 0.0)
    shape["parent_share_se"] = share_se
    if curves and noise.get("curve"):  # the noise along its curves: what a run's curve is worth toward the MDE
        position = noise.get("position_sigma")  # `fit --curve-sigma position`: power says what it may add
        shape["curve"] = CurvePilot(fit.law, dict(fit.params), CurveNoise.from_json(noise["curve"]), position)
    if sigma_log is not None:
        return Truth(
            params, float(sigma_log), parent_share, "stated (--sigma)", tail_dof=tail_dof, **shape, **shape_law
        )
    measured = noise.get("sigma_log")
    if measured:
        scale = noise.get("scale") or {}
        tau = float(scale.get("misfit_log") or 0.0)
        seed_dof = noise.get("dof")
        if seed_dof:  # its rows: those of points with seed repeats
            repeated = sum(int(k) * v for k, v in (noise.get("seeds_per_point") or {}).items() if int(k) >= 2)
            seed_dof = tail_dof_of_variance(seed_dof, tail_dof, seed_dof / max(repeated, seed_dof + 1))
        dof = _noise_dof(float(measured), seed_dof, tau, scale, fit.n_rows)
        source = "the pilot's seed repeats" + (f" and its misfit at a point ({tau:.3g} in log L)" if tau else "")
        return Truth(params, float(measured), parent_share, source, dof or None, tau, tail_dof, **shape, **shape_law)
    n, p = fit.n_rows, len(fit.params)
    if not fit.residual_rms_log or n <= p:
        raise InputError(
            "the pilot fit records no noise (no seed sigma, no residual RMS over n > p rows): give --sigma"
        )
    # the RMS residual of n rows about p fitted parameters underestimates sigma by sqrt((n - p) / n)
    sigma = float(fit.residual_rms_log) * math.sqrt(n / (n - p))
    source = (
        f"the pilot's RMS residual x sqrt(n / (n - p)), n = {n}, p = {p} (no seed repeats: seed noise and misfit "
        "together, their split drawn)"
    )
    dof = tail_dof_of_variance(n - p, tail_dof, (n - p) / n)
    if "curve" in shape:  # a curve's evaluations are not independent draws: sigma rests on its runs, not its rows
        dof = min(dof, max(1.0, shape["curve"].noise.n_runs - p))
    return Truth(params, sigma, parent_share, source, dof, 0.0, tail_dof, split_unknown=True, **shape, **shape_law)


def _pool(values) -> tuple[float, ...] | None:
    return tuple(float(v) for v in values) if values else None


def unit_draws(
    rng: np.random.Generator, n: int, tail_dof: float | None, pool: tuple[float, ...] | None = None
) -> np.ndarray:
    """n draws of unit variance. With a pool (the pilot's standardised residuals, `Truth.seed_units`): a smoothed
    bootstrap, a value drawn from the pool plus Gaussian jitter of Silverman's bandwidth h = 0.9 min(1, IQR / 1.34)
    m^(-1/5), scaled by 1 / sqrt(1 + h^2) (Silverman 1986, sec. 6.4.1): the kernel density of the residuals, a
    continuous law with their tails and their density at 0, which is what a Huber fit's precision rests on, with
    no gate on whether the tails are heavy. Without one: Student-t with tail_dof degrees of freedom scaled to
    variance 1, or Gaussian."""
    if pool is not None:
        values = np.asarray(pool, dtype=float)
        iqr = float(np.subtract(*np.quantile(values, [0.75, 0.25])))
        h = 0.9 * min(1.0, iqr / 1.34) * len(values) ** -0.2
        return (values[rng.integers(0, len(values), n)] + h * rng.standard_normal(n)) / math.sqrt(1 + h * h)
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
    seed_units: tuple[float, ...] | None = None,
    point_units: tuple[float, ...] | None = None,
) -> np.ndarray:
    """eps per row: sigma (sqrt(share) u_cluster + sqrt(1 - share) u_run) + tau u_point (module docstring), u of
    unit variance (`unit_draws`: u_cluster and u_run from the seed-level pool, u_point from the point-level one;
    without pools Student-t or Gaussian, u_point Gaussian); the misfit tau u_point is shared by a point's seeds."""
    shared = unit_draws(rng, int(clusters.max()) + 1, tail_dof, seed_units)[clusters]
    own = unit_draws(rng, len(clusters), tail_dof, seed_units)
    eps = sigma_log * (math.sqrt(share) * shared + math.sqrt(1 - share) * own)
    if misfit_log and points is not None:
        n_points = int(points.max()) + 1
        at_points = (
            rng.standard_normal(n_points) if point_units is None else unit_draws(rng, n_points, None, point_units)
        )
        eps = eps + misfit_log * at_points[points]
    return eps


def share_draw(rng: np.random.Generator, truth: Truth) -> float:
    """The parent share of one simulated sweep: the pilot's estimate, or with its standard error a draw from its
    sampling distribution, N(rho, se^2) clipped to [0, 1] as the estimate is (`noise_scale.parent_share`): a pilot of
    a few forked jobs knows rho only roughly, and the MDE averages over what it might be."""
    if not truth.parent_share_se:
        return truth.parent_share
    return float(np.clip(rng.normal(truth.parent_share, truth.parent_share_se), 0.0, 1.0))


def split_draw(rng: np.random.Generator, truth: Truth) -> tuple[float, float]:
    """(seed sigma, misfit) of one simulated sweep: the truth's, or where the pilot could not split its noise
    (`Truth.split_unknown`) sigma^2 shared as (1 - w) seed noise and w misfit, w ~ Uniform(0, 1): for the pilot's
    own seeds a point's variance is sigma^2 whatever w, with more seeds it is sigma^2 (w + (1 - w) / k)."""
    if not truth.split_unknown:
        return truth.sigma_log, truth.misfit_log
    w = rng.uniform()
    return truth.sigma_log * math.sqrt(1 - w), math.sqrt(truth.sigma_log**2 * w + truth.misfit_log**2)


def scale_draw(rng: np.random.Generator, dof: float | None) -> float:
    """A draw of sigma_true / sigma_hat given sigma_hat on `dof` degrees of freedom (sigma^2 ~ nu s^2 / chi2_nu):
    each simulated sweep's noise is as uncertain as the pilot's estimate of it. 1 when sigma is known."""
    return 1.0 if dof is None else math.sqrt(dof / rng.chisquare(dof))


def params_draw(rng: np.random.Generator, truth: Truth) -> dict[str, float]:
    """The law's parameters of one simulated sweep: the pilot's, each of its own parameters beyond phi with a
    standard error (`Truth.params_se`: kappa) drawn from its sampling distribution, N(estimate, se^2) in the fitter's
    coordinate (ln kappa) and kept inside the fitter's box: a pilot knows its kappa only roughly, and the sweep it
    plans meets the kappa that is, as it meets the sigma that is (`scale_draw`)."""
    if not truth.params_se:
        return dict(truth.params)
    law = bound_law(truth.law, truth.params)
    theta = law.from_user(truth.params)
    for name, se in truth.params_se.items():
        i = law.user_names.index(name)
        lo, hi = law.bounds()[i]
        theta[i] = float(np.clip(rng.normal(theta[i], se), lo, hi))
    return {**truth.params, **{k: v for k, v in law.to_user(theta).items() if k in truth.params_se}}
