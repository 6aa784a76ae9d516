"""The conditioning of a test-time fit (`loopscale.fit.testtime`) in the project's record (`verdict.verdict_of`):
the checks, each by what it protects, and the verdict "test-time law measured: ..." or "not measured: <reasons>".

Blocking (`IDENTIFIED`, `CALIBRATED`): residual degrees of freedom (rows beyond the free parameters: without
them nothing measures the noise and no interval exists), no rate or amplitude held (the rows could not identify
it), the rate off its bounds, closed profile intervals of the rate and of each floor L_inf. A warning
(`EXTRAPOLATION`): a fixed-r model's drift held (no row past r_train), each model's largest r_eval left out and
predicted beyond 3 sigma (at least 0.1%, as the training-time holdout check). Pure: reads the fit's dict.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from loopscale.fit.laws.testtime import TestTime
from loopscale.fit.result_text import open_end
from loopscale.fit.testtime_record import TestTimeFit
from loopscale.fit.verdict import ON_BOUND_TOL, verdict_of
from loopscale.fit.verdict_record import Check, Conditioning, NoiseScale

IDENTIFIED, CALIBRATED, EXTRAPOLATION = "law identified", "intervals calibrated", "held-out depth"
HOLDOUT_NOISE_FACTOR, HOLDOUT_FLOOR = 3.0, 1e-3  # as the training-time holdout check (verdict.py)
HELD_WHY = {
    "A": "one depth at or below r_scale: no saturating term to fit",
    "delta": "no row past r_train: the drift past the trained depth is not measured",
}
RATE_WHY = "no model has three depths at or below its r_scale: the rate is not identified"


def checks_record(law: TestTime, fit: TestTimeFit, theta: np.ndarray) -> Conditioning:
    """The record's conditioning of one test-time fit (`fit`: what `testtime.fit_one` builds, before its
    conditioning)."""
    dof_reason = (
        f"{fit['n_rows']} rows fix {fit['n_free']} free parameters exactly: no residual measures the noise, "
        "so no interval"
    )
    checks = [
        Check(
            "rows beyond the free parameters",
            IDENTIFIED,
            "n_rows - n_free >= 1",
            fit["dof"],
            fit["dof"] >= 1,
            dof_reason,
        )
    ]
    checks += _held_checks(law) + _rate_check(law, fit, theta) + _interval_checks(fit) + _holdout_check(fit)
    noise = NoiseScale(fit["sigma_log"] or 0.0, "residuals (t-widened)" if fit["sigma_log"] else "none")
    record = verdict_of(checks, "test-time law", noise, block=(IDENTIFIED, CALIBRATED))
    if record.measured:
        return replace(record, verdict="test-time law measured: " + headline(fit, law))
    return record


def _held_checks(law: TestTime) -> list[Check]:
    """A held rate or amplitude blocks; a held drift is a warning."""
    out = []
    for name, value in law.held:
        label = law.user_names[0] if name == law.rate_name else name
        shown = f"{label} held at {np.exp(value) if name == 'log_tau' else value:g}"
        kind = name.split("[")[0]
        protects = EXTRAPOLATION if kind == "delta" else IDENTIFIED
        why = HELD_WHY.get(kind, RATE_WHY)
        out.append(Check(f"{label} free", protects, "fitted, not held", shown, False, f"{shown} ({why})"))
    return out


def _rate_check(law: TestTime, fit: dict, theta: np.ndarray) -> list[Check]:
    lo, hi = law.bounds()[0]
    if not lo < hi:
        return []
    on = theta[0] <= lo + ON_BOUND_TOL or theta[0] >= hi - ON_BOUND_TOL
    rate = law.user_names[0]
    reason = f"{rate} = {fit['params'][rate]:.4g} on its bound"
    return [
        Check(f"{rate} off its bounds", IDENTIFIED, f"inside ({lo:.3g}, {hi:.3g})", float(theta[0]), not on, reason)
    ]


def _interval_checks(fit: dict) -> list[Check]:
    """The rate's and every floor's profile interval closed (only where there is a residual to measure)."""
    if fit["dof"] < 1:
        return []
    out = []
    for key, ends in fit["intervals"].items():
        if key.startswith("L_inf") or key in ("tau", "gamma"):
            closed = None not in ends
            out.append(
                Check(
                    f"{key} interval",
                    CALIBRATED,
                    "a closed 95% profile interval",
                    "closed" if closed else "open",
                    closed,
                    f"{key}'s profile interval is open on one side",
                )
            )
    return out


def _holdout_check(fit: dict) -> list[Check]:
    hold = fit.get("holdout")
    if not hold:
        return []
    limit = max(HOLDOUT_NOISE_FACTOR * (fit["sigma_log"] or 0.0), HOLDOUT_FLOOR)
    mre = hold["mean_abs_rel_error"]
    reason = f"the largest r_eval of each model is predicted to {100 * mre:.2f}% (> {100 * limit:.2f}%)"
    return [
        Check(
            "held-out largest r_eval", EXTRAPOLATION, f"<= {100 * limit:.2f}% mean |rel err|", mre, mre <= limit, reason
        )
    ]


def headline(fit: TestTimeFit, law: TestTime) -> str:
    """The rate and each model's floor with their intervals, in one line."""
    parts = []
    for key in (law.user_names[0], *[f"L_inf[{g}]" for g in law.groups]):
        ci = fit["intervals"].get(key)
        shown = f" [{open_end(ci[0], '.4g')}, {open_end(ci[1], '.4g')}]" if ci else ""
        parts.append(f"{key} = {fit['params'][key]:.4g}{shown}")
    return ", ".join(parts)
