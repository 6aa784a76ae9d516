"""Is a fitted phi (or a joint fit's delta-phi) a measurement? The checks every fit record carries, its verdict,
and the one renderer of both.

`fit_table` and `fit_joint` store `fit_checks` / `joint_checks` in the record as its "conditioning" (a
`verdict_record.Conditioning` of `Check`s, each delta-phi a `DeltaAnswer`; the JSON form is documented there),
and `loopscale fit`, `compare`, `report` and the notebook print it with `verdict_render.verdict_lines` (Markdown:
`verdict_rows` and `closing_lines` there, the same content). Each check earns its place by what it protects
(docs/design.md, "The verdict"):

- "phi identified": E and phi (each recipe's phi, each delta-phi) off the bounds of the fitter's box (a parameter
  on its bound means the data term and the capacity term trade off freely); phi's 95% interval narrow enough to
  separate the published recipes: at most PHI_CI_WIDTH_MAX = 2 x 0.08 wide, 0.08 being the smallest gap between
  the published phis (0.38 / 0.46 / 0.65), so that an interval centred on one of them excludes its neighbour.
  (Two versions of the study differ by 0.03: telling those apart needs an interval under 0.06, which no sweep
  here is asked for.)
- "intervals calibrated": an interval exists and is closed (by the data: an end on the fitter's box is open), and
  a forked sweep's bootstrap resamples whole parent jobs (branches share their parent's stable phase: one draw,
  not several).
- "N*/D* extrapolation": each iso-FLOP curve's minimum inside the sizes sampled at its budget, and the held-out
  largest budget predicted, both judged against the noise (`noise_of`): the loss of a size is the mean over its
  seeds, and an edge minimum counts only when it lies below every interior size by more than the noise of the
  difference. A failure here is a WARNING: the law's N*(C), D*(C) are extrapolated beyond what the sweep saw,
  but phi is not biased by it (the noise-free published grid, 10 of 24 curves with their minimum on an edge,
  recovers phi to 1e-6: tests/unit/test_verdict.py; `loopscale power` simulates a design's bias of phi).

A failed "phi identified" or "intervals calibrated" check makes the verdict "not measured: <reasons>". A
joint fit (and `compare` of two fits) answers delta-phi with exactly one of three statements (`delta_answer`):
real (the 95% interval excludes 0), no difference detected (the interval lies within +-x, x at most
EQUIVALENCE_MAX), or not measured, with the minimum detectable delta-phi of the design (`mde`):

    MDE = (z_0.975 + z_0.80) se(delta-phi) = 2.80 se,

the |delta-phi| a two-sided 5% test detects in 80% of repeats of the design (se from the bootstrap replicates,
else from the profile interval's width / (2 z_0.975)). Pure: reads a canonical table and the record, fits nothing.
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from loopscale.fit.bounds import BOUNDS, DPHI_BOUNDS
from loopscale.fit.isoflop import Z_LEVEL, isoflop_minima
from loopscale.fit.laws.looped_joint import LoopedJoint
from loopscale.fit.laws.registry import find_law
from loopscale.fit.record_blocks import SharedCheck
from loopscale.fit.result import FitResult, ParamDifference, load_fit
from loopscale.fit.runs_table import is_forked
from loopscale.fit.verdict_record import Check, Conditioning, DeltaAnswer, NoiseScale

IDENTIFIED, CALIBRATED, EXTRAPOLATION = "phi identified", "intervals calibrated", "N*/D* extrapolation"
PROTECTS = (IDENTIFIED, CALIBRATED, EXTRAPOLATION)
BLOCKING = (IDENTIFIED, CALIBRATED)  # a failure of these: not measured; of the others: a warning

PUBLISHED_PHIS = (0.38, 0.46, 0.65)  # truncated backprop, baseline, hyper-connections (arXiv v2-v3)
SMALLEST_PUBLISHED_GAP = 0.08  # 0.46 - 0.38; also the smallest published |delta-phi| (truncated backprop)
PHI_CI_WIDTH_MAX = 2 * SMALLEST_PUBLISHED_GAP  # an interval centred on one published phi excludes its neighbour
EQUIVALENCE_MAX = SMALLEST_PUBLISHED_GAP  # "no difference" only when the interval rules out the smallest effect
LEVEL, POWER = 0.95, 0.80
Z_POWER = 0.8416212335729143  # scipy.stats.norm.ppf(0.80)
MDE_FACTOR = Z_LEVEL + Z_POWER  # 1.960 + 0.842 = 2.802
MDE_FORMULA = (
    f"MDE = (z_0.975 + z_0.80) se(Δφ) = {MDE_FACTOR:.2f} se: the |Δφ| a two-sided 5% test detects in 80% of "
    "repeats of this design"
)
HOLDOUT_NOISE_FACTOR = 3.0  # held-out mean |rel err| within 3 sigma: noise alone gives ~0.8 sigma per run
HOLDOUT_FLOOR = 1e-3  # ... and at least 0.1% (a noise-free fit is not failed by rounding)
ON_BOUND_TOL = 1e-6  # internal coordinates this close to a bound sit on it (the fitter's own tolerance)
WIDTH_CHECK = "interval width"  # the name suffix of the width rule (a comparison of two fits skips it)
VERDICT_INTERVAL = "profile"  # the interval every verdict reads (`interval_of`; docs/design.md, "The verdict")


param = LoopedJoint.recipe_param  # a joint fit's phi[<recipe>] and delta_phi[<recipe>]: the law's names


# ----------------------------------------------------------------------------------------------
# The noise a check is judged against (the iso-FLOP minima: loopscale/fit/isoflop.py)
# ----------------------------------------------------------------------------------------------
def noise_of(fit: FitResult) -> NoiseScale:
    """The standard deviation of log L a single run scatters by, and where it comes from: the seed sigma the
    fit measured from its seed repeats (`noise` in the record), else the fit's RMS residual in log L (an upper
    bound: it holds the law's misfit too), else none (checks are then strict)."""
    sigma = fit.noise.get("sigma_log") if fit.noise else None
    if sigma is not None and np.isfinite(sigma) and sigma > 0:
        return NoiseScale(float(sigma), "seed repeats")
    rms = fit.residual_rms_log
    if rms is not None and np.isfinite(rms) and rms > 0:
        return NoiseScale(float(rms), "residual RMS (no seed repeats: seed noise and misfit together)")
    return NoiseScale(0.0, "none")


# ----------------------------------------------------------------------------------------------
# The checks
# ----------------------------------------------------------------------------------------------
def _bound_check(name: str, value: float, internal: float, box: tuple[float, float], shown) -> Check:
    lo, hi = box
    low, high = internal <= lo + ON_BOUND_TOL, internal >= hi - ON_BOUND_TOL
    side = "lower" if low else "upper"
    return Check(
        f"{name} off its bounds",
        IDENTIFIED,
        f"inside ({shown(lo):.3g}, {shown(hi):.3g})",
        float(value),
        not (low or high),
        f"{name} = {value:.4g} on its {side} bound",
    )


def interval_of(fit: FitResult, key: str, profile: dict | None = None) -> tuple[list | None, str, float | None]:
    """(the 95% interval the verdict reads for `key`, its name, se): the profile interval (the robust likelihood
    ratio on the fit's noise scale, `uncertainty.profile_threshold`), se = its width / (2 z_0.975). The rule,
    chosen by the calibration matrix (docs/results.md, "The calibration matrix"): the profile kept coverage and
    the false "real" within target in the cells where the bootstrap percentile interval did not. The bootstrap
    stays in the record beside it; it is not the verdict's interval. None without a profile."""
    if profile is not None and profile.get("interval"):
        lo, hi = profile["interval"][:2]
        se = None if lo is None or hi is None else float(hi - lo) / (2 * Z_LEVEL)
        return [lo, hi], VERDICT_INTERVAL, se
    return None, "", None


def _interval_checks(name: str, fit: FitResult, key: str, forked: bool, profile=None, width_rule=True) -> list:
    """The verdict's 95% interval of `key` (`interval_of`: the profile): present, closed and, for a forked sweep,
    with a scale that sums each parent's branches ("intervals calibrated"); with `width_rule`, at most
    PHI_CI_WIDTH_MAX wide ("phi identified")."""
    ci, source, _ = interval_of(fit, key, profile)
    target = f"a closed 95% {VERDICT_INTERVAL} interval" + (" (parents' branches as one draw)" if forked else "")
    if ci is None:
        return [
            Check(
                f"{name} interval",
                CALIBRATED,
                target,
                "not computed",
                False,
                f"no {VERDICT_INTERVAL} interval for {name} (fit with its profile on)",
            )
        ]
    if ci[0] is None or ci[1] is None:
        return [
            Check(
                f"{name} interval", CALIBRATED, target, "open", False, f"{name}'s {source} interval is open on one side"
            )
        ]
    box = DPHI_BOUNDS if key.startswith("delta_phi") else BOUNDS.get(key.split("[")[0])
    if box is not None and (ci[0] <= box[0] + ON_BOUND_TOL or ci[1] >= box[1] - ON_BOUND_TOL):
        why = f"{name}'s {source} interval [{ci[0]:+.3f}, {ci[1]:+.3f}] reaches the fitter's box {box}: open"
        return [Check(f"{name} interval", CALIBRATED, target, "reaches the box", False, why)]
    if forked and not (profile or {}).get("groups"):
        why = (
            f"{name}'s {source} interval treats forked branches as independent runs (a record from before issue 53: "
            "refit)"
        )
        return [Check(f"{name} interval", CALIBRATED, target, source, False, why)]
    curves = find_law(fit.law) is not None and find_law(fit.law).reads_curves  # a curve is one draw (noise.py)
    if curves and not (profile or {}).get("groups"):
        why = (
            f"{name}'s {source} interval treats a curve's evaluations as independent runs (a record from before: refit)"
        )
        return [Check(f"{name} interval", CALIBRATED, target, source, False, why)]
    out = [Check(f"{name} interval", CALIBRATED, target, source, True, "")]
    if width_rule:
        width = float(ci[1] - ci[0])
        out.append(
            Check(
                f"{name} {WIDTH_CHECK}",
                IDENTIFIED,
                f"<= {PHI_CI_WIDTH_MAX:.2f} wide (separates the published {' / '.join(map(str, PUBLISHED_PHIS))})",
                width,
                width <= PHI_CI_WIDTH_MAX,
                f"{name}'s 95% {source} interval [{ci[0]:.3f}, {ci[1]:.3f}] is {width:.3f} wide "
                f"(> {PHI_CI_WIDTH_MAX:.2f}: it cannot separate the published recipes' phis)",
            )
        )
    return out


def _isoflop_check(name: str, table: pd.DataFrame, r_values, sigma_log: float, label: str = "") -> Check | None:
    """Every iso-FLOP curve (per r in r_values, per budget with three sizes or more) has its minimum inside,
    within the noise; None when no budget has three sizes (the table does not allow the check)."""
    curves = [(r, m) for r in r_values for m in isoflop_minima(table, r, sigma_log=sigma_log) if len(m["widths"]) >= 3]
    if not curves:
        return None
    outside = [f"r = {r:g} at {m['budget']:.3g}" for r, m in curves if not m["bracketed"]]
    within = sum(1 for _, m in curves if m["bracketed"] and not m["inside"])
    return Check(
        name,
        EXTRAPOLATION,
        "every minimum inside the sampled sizes (within the noise)",
        f"{len(curves) - len(outside)} of {len(curves)} curves" + (f" ({within} within the noise)" if within else ""),
        not outside,
        f"{label}iso-FLOP minimum on the edge of the sizes ({', '.join(outside[:3])}"
        f"{', ...' if len(outside) > 3 else ''})",
    )


def _holdout_check(fit: FitResult, sigma_log: float) -> Check | None:
    if not fit.holdout:
        return None
    mre = float(fit.holdout["mean_abs_rel_error"])
    limit = max(HOLDOUT_NOISE_FACTOR * sigma_log, HOLDOUT_FLOOR)
    return Check(
        "held-out largest budget error",
        EXTRAPOLATION,
        f"<= {100 * limit:.2f}% mean |rel err| (3 sigma, at least {100 * HOLDOUT_FLOOR:.1f}%)",
        mre,
        mre <= limit,
        f"the held-out largest budget is predicted to {100 * mre:.2f}% (> {100 * limit:.2f}%, beyond the noise)",
    )


def _failures(checks: list[Check], block=BLOCKING) -> tuple[list[str], list[str]]:
    """(reasons that block the measurement, warnings) of the failed checks; `block`: what a blocking check
    protects."""
    blocking = [c.reason for c in checks if not c.ok and c.protects in block]
    warnings = [f"{c.protects} not warranted: {c.reason}" for c in checks if not c.ok and c.protects not in block]
    return blocking, warnings


SHARED_CHECK_LEVEL = 0.05  # below this p-value the joint fit's shared-parameter LR test rejects sharing


def shared_check_verdict(check: SharedCheck) -> str:
    """The verdict of a joint fit's shared-parameter check (the joint fit against the separate fits, a robust LR
    test: `joint.shared_check`), in the one wording `fit --joint` and the report print."""
    if check["p_value"] < SHARED_CHECK_LEVEL:
        return "the recipes do NOT share the dense model: treat the joint delta-phi with care"
    return "consistent with one shared dense model"


def verdict_of(checks: list[Check], subject: str, noise: NoiseScale | None = None, block=BLOCKING) -> Conditioning:
    """The record's "conditioning" of a fit with no delta-phi: "<subject> measured" unless a blocking check
    failed ("not measured: <reasons>"); failed extrapolation checks become warnings. `block`: what the blocking
    checks protect (the phi checks' IDENTIFIED and CALIBRATED; another law's checks may name their own)."""
    blocking, warnings = _failures(checks, block)
    verdict = f"{subject} measured" if not blocking else "not measured: " + "; ".join(blocking)
    blocks = None if tuple(block) == BLOCKING else tuple(block)  # the renderer's FAIL / warn
    return Conditioning(checks, warnings, verdict, not blocking, noise or NoiseScale(0.0, "none"), blocks)


def fit_checks(table: pd.DataFrame, fit) -> Conditioning:
    """The conditioning of one fit (any law) on its canonical table: E and phi off their bounds, phi's
    interval (present, calibrated, narrow enough), the iso-FLOP minima and the holdout error against the noise."""
    fit = load_fit(fit)
    noise = noise_of(fit)
    checks = [_bound_check("E", fit.params["E"], np.log(fit.params["E"]), BOUNDS["e"], np.exp)]
    forked = is_forked(table)
    if "phi" in fit.params:
        checks.append(_bound_check("phi", fit.params["phi"], fit.params["phi"], BOUNDS["phi"], float))
        checks += _interval_checks("phi", fit, "phi", forked, fit.profile_phi)
    r_values = sorted(set(table["r"].to_numpy(dtype=float))) if "r" in table.columns else [1.0]
    iso = _isoflop_check("iso-FLOP minima inside the grid", table, r_values, noise.sigma_log)
    checks += [c for c in (iso, _holdout_check(fit, noise.sigma_log)) if c is not None]
    if "phi" not in fit.params:
        return verdict_of(checks, "fit", noise)
    record = verdict_of(checks, "phi", noise)
    if not record.measured:
        return record
    ci, source, _ = interval_of(fit, "phi", fit.profile_phi)
    line = (
        f"phi measured: phi = {fit.params['phi']:.3f} [{ci[0]:.3f}, {ci[1]:.3f}] (95% {source}, "
        f"{ci[1] - ci[0]:.3f} wide <= {PHI_CI_WIDTH_MAX:.2f}: separates the published recipes)"
    )
    return replace(record, verdict=line)


# ----------------------------------------------------------------------------------------------
# Delta-phi: one of three answers, with the design's minimum detectable difference
# ----------------------------------------------------------------------------------------------
def mde(se: float | None) -> float | None:
    """The minimum detectable |delta| at 80% power, 5% two-sided: (z_0.975 + z_0.80) se (module docstring)."""
    return None if se is None or not np.isfinite(se) else float(MDE_FACTOR * se)


def delta_answer(
    estimate: float,
    interval,
    se: float | None,
    source: str,
    label: str = "Δφ",
    blocking: list[str] | None = None,
    equivalence_max: float | None = EQUIVALENCE_MAX,
) -> DeltaAnswer:
    """Exactly one of: "real" (the 95% interval excludes 0), "no difference" (the interval lies within +-x,
    x <= equivalence_max, x rounded up to 0.01), "not measured" (otherwise, or when `blocking` reasons are
    given, or without a closed interval), each with its numbers and the design's MDE; `line` says it."""
    detect = mde(se)
    answered = partial(DeltaAnswer, float(estimate), interval, source, se, detect)  # (answer, line) to come
    power = (
        f"this design detects |{label}| >= {detect:.2f} with 80% power; see `loopscale power`"
        if detect is not None
        else "its minimum detectable difference needs an interval (--bootstrap N); see `loopscale power`"
    )
    if blocking:
        return answered("not measured", f"not measured: {'; '.join(blocking)} — {power}")
    if interval is None or interval[0] is None or interval[1] is None:
        return answered("not measured", f"not measured: {label} has no closed interval — {power}")
    lo, hi = float(interval[0]), float(interval[1])
    if lo > 0 or hi < 0:
        line = f"{label} = {estimate:+.3f} [{lo:+.3f}, {hi:+.3f}]: real (the {source} interval excludes 0)"
        return answered("real", line)
    margin = math.ceil(max(-lo, hi) * 100 - 1e-9) / 100
    if equivalence_max is not None and margin <= equivalence_max:
        line = (
            f"no difference detected: |{label}| < {margin:.2f} at 95% ({label} = {estimate:+.3f}, {source} "
            f"interval [{lo:+.3f}, {hi:+.3f}])"
        )
        return answered("no difference", line)
    line = f"not measured: interval [{lo:+.3f}, {hi:+.3f}] ({label} = {estimate:+.3f}) — {power}"
    return answered("not measured", line)


def _blocking_for(g: str, checks: list[Check], recipes: list[str], ref: str) -> list[str]:
    """What blocks recipe g's delta-phi: its own failed checks and the shared ones (E, the reference's phi) in
    full; another recipe's failure too (the recipes share E, A, alpha, B, beta), named, not restated."""
    own, others = [], []
    for c in (c for c in checks if not c.ok and c.protects in BLOCKING):
        about = next((h for h in recipes if f"[{h}]" in c.name or f"({h})" in c.name), None)
        if about in (g, ref, None):
            own.append(c.reason)
        elif about not in others:
            others.append(about)
    return own + [f"the joint fit is not identified because of {', '.join(others)} (see its line)"] * bool(others)


def joint_checks(table: pd.DataFrame, fit, recipe_codes: np.ndarray) -> Conditioning:
    """The conditioning of a joint fit: E off its bound, each recipe's phi off its bounds (and its delta-phi
    inside the box), iso-FLOP minima inside per recipe (the reference with the shared r = 1 runs; warnings),
    each delta-phi's interval (by parent job in a forked sweep), and each delta-phi's answer with its MDE."""
    fit = load_fit(fit)
    noise = noise_of(fit)
    joint = fit.joint or {}
    recipes, ref = joint.get("recipes", []), joint.get("reference")
    checks = [_bound_check("E", fit.params["E"], np.log(fit.params["E"]), BOUNDS["e"], np.exp)]
    for g in recipes:
        phi = fit.params[param(g)]
        checks.append(_bound_check(param(g), phi, phi, BOUNDS["phi"], float))
        if g != ref:
            d = phi - fit.params[param(ref)]
            checks.append(_bound_check(f"Δφ[{g}]", d, d, DPHI_BOUNDS, float))
    r = table["r"].to_numpy(dtype=float)
    for i, g in enumerate(recipes):
        mine = table[((recipe_codes == i) & (r > 1)) | ((r == 1) & (i == 0))]
        iso = _isoflop_check(
            f"iso-FLOP minima inside the grid ({g})", mine, sorted(set(mine["r"])), noise.sigma_log, f"{g}: "
        )
        if iso is not None:
            checks.append(iso)
    forked = is_forked(table)
    deltas = joint.get("delta_phi", {})
    for g in recipes[1:]:
        checks += _interval_checks(f"Δφ[{g}]", fit, param(g, delta=True), forked, _delta_profile(deltas, g), False)
    _, warnings = _failures(checks)
    answers = {}
    for g in recipes[1:]:
        ci, source, se = interval_of(fit, param(g, delta=True), _delta_profile(deltas, g))
        estimate = fit.params[param(g)] - fit.params[param(ref)]
        answers[g] = delta_answer(estimate, ci, se, source, f"Δφ[{g}]", _blocking_for(g, checks, recipes, ref))
    verdict = "; ".join(a.line for a in answers.values()) or "not measured: no second recipe"
    measured = bool(answers) and all(a.answer != "not measured" for a in answers.values())
    return Conditioning(checks, warnings, verdict, measured, noise, None, answers, MDE_FORMULA)


def _delta_profile(deltas: dict, g: str) -> dict[str, Any]:
    """Recipe g's delta-phi profile as `interval_of` reads it: its interval and the dependence groups its scale
    summed over (absent in records from before issue 53)."""
    entry = deltas.get(g, {})
    return {"interval": entry.get("profile_interval"), "groups": (entry.get("profile") or {}).get("groups")}


def compare_conditioning(fits: dict[str, FitResult], cmp: ParamDifference) -> Conditioning:
    """The verdict of `compare` on two separate fits: their blocking checks (a width rule aside: the two phis'
    intervals may each be wide and their difference still measured) gate one answer on delta = B - A
    (`delta_answer`, from the paired bootstrap replicates of `result.compare_param`)."""
    name = cmp.param
    label = "Δφ" if name == "phi" else f"Δ{name}"
    checks, blocking = [], []
    for path, fit in fits.items():
        cond = fit.conditioning
        if not cond:
            blocking.append(f"{path}: no conditioning checks (fitted before they existed: refit)")
            continue
        if cond.checks and cond.checks[0].protects is None:  # a record from before issue 38
            if not cond.measured:
                blocking.append(f"{path}: " + cond.verdict.removeprefix("not measured: "))
        else:
            blocking += [
                f"{path}: {c.name} fails ({shown_value(c.value)}; target {shown_value(c.target)})"
                for c in cond.checks
                if not c.ok and c.protects in BLOCKING and not c.name.endswith(WIDTH_CHECK)
            ]
        checks += [replace(c, name=f"{path}: {c.name}") for c in cond.checks]
    equivalence = EQUIVALENCE_MAX if name == "phi" else None
    answer = delta_answer(cmp.delta, cmp.ci, cmp.se, "paired bootstrap", label, blocking, equivalence)
    warnings = [w for fit in fits.values() if fit.conditioning for w in fit.conditioning.warnings]
    measured = answer.answer != "not measured"
    return Conditioning(checks, warnings, answer.line, measured, None, None, {name: answer}, MDE_FORMULA)


def shown_value(value) -> str:
    """A check's value or target as text: n/a, the string, a list, or 4 significant digits."""
    if value is None:
        return "n/a"
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(shown_value(v) for v in value) + "]"
    return f"{value:.4g}"
