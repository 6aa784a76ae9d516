"""The flags and the one verdict line of a validation record: "the law predicts unseen budgets to x% and unseen
r to y%; phi moves by at most z when one r is dropped", and what is flagged:

- a held-out fold whose RMS log error is over RATIO_FLAG times the refit's own residual RMS on its training
  rows (the noise it was fitted to): the law misses that budget or r beyond its noise;
- a leave-one-r-out phi that moves by more than the half-width of phi's 95% interval;
- a curve fit whose phi moves by more than that half-width when each run's early evaluations are left out
  (`folds.early_fold`): phi rests on the transient, not on the regime the law describes;
- the fit's law under MSE giving a phi more than that half-width from the fit's (the Huber loss): phi rests on
  how a few points the law misses are weighed, not on the points it describes;
- a per-r multiplier form (`Law.per_r_multipliers`) whose AICc beats the fit's law by more than AICC_FLAG: the
  r effect is not a power of r (LoopCoder-v2's 2 loops best, 3+ worse, would show here); a rival with a
  `Law.departure` that does: what its win says, with its own parameter (phi runs with the size, psi = -0.24);
- Approach 2's N*(C) exponent more than 1.96 standard errors from the law's beta / (alpha + beta);
- the lr grid's best lr moving with r by more than one grid step, and the counting conventions that move phi
  by more than its half-width (their own sections say which).
"""

from __future__ import annotations

import numpy as np

from loopscale.fit.laws.registry import find_law
from loopscale.fit.validation.record import FoldResult, ValidationRecord, Verdict

RATIO_FLAG = 2.0
AICC_FLAG = -4.0  # Burnham & Anderson: a difference over 4 is considerable support for the better model
Z_95 = 1.959963984540054
MSE_KIND = "l2"  # forms.MSE's loss kind (its Loss is not imported: the readers of a record load no optimiser)


def fold_rows(record: ValidationRecord, form: int, kind: str) -> list[FoldResult]:
    """The results of form `form` on the folds of one kind (done or not)."""
    return [r for r in record.results if r["form"] == form and record.folds[r["fold"]]["kind"] == kind]


def full_result(record: ValidationRecord, form: int) -> FoldResult | None:
    return next(iter(fold_rows(record, form, "full")), None)


def delta_aicc(record: ValidationRecord, form: int) -> float | None:
    """AICc of form `form` minus the fit's law's, on the whole table (None when either has none)."""
    own, other = full_result(record, 0), full_result(record, form)
    if not (own and other and own["ok"] and other["ok"]):
        return None
    a, b = own["information"]["aicc"], other["information"]["aicc"]
    return None if a is None or b is None else b - a


def interval_half_width(interval) -> float | None:
    """Half the width of a phi interval; None without one or when it is open on a side (a profile's end is None)."""
    return None if not interval or None in interval else (interval[1] - interval[0]) / 2


def half_width(record: ValidationRecord) -> float | None:
    return interval_half_width(record.fit.get("phi_interval"))


def held_out_summary(record: ValidationRecord, kind: str, flags: list[str]) -> tuple[float, float] | None:
    """(mean of the folds' mean |error|, worst |error|) of the fit's law over the folds of one kind, None
    without any; each fold's noise ratio recorded, and flagged above RATIO_FLAG."""
    done = [r for r in fold_rows(record, 0, kind) if r["ok"]]
    for r in done:
        r.noise_ratio = ratio = r.held_out["rms_log"] / max(r.train_rms_log, 1e-12)
        if ratio > RATIO_FLAG:
            flags.append(
                f"held out {record['folds'][r['fold']]['label']}: error {r['held_out']['mean_abs_rel_error']:.2%} "
                f"(bias {r['held_out']['mean_rel_error']:+.2%}) is {ratio:.1f}x the refit's own residuals"
            )
    if not done:
        return None
    errors = [r["held_out"] for r in done]
    return float(np.mean([e["mean_abs_rel_error"] for e in errors])), float(max(e["max_abs_rel_error"] for e in errors))


def phi_shifts(record: ValidationRecord, flags: list[str]) -> tuple[float, str] | None:
    """The largest |phi_fold - phi| over the leave-one-r-out folds and its fold; each beyond the interval's
    half-width flagged."""
    full = full_result(record, 0)
    phi_full = full["params"].get("phi") if full and full["ok"] else None
    hw = half_width(record)
    shifts = [
        (abs(r["params"]["phi"] - phi_full), record.folds[r["fold"]]["label"])
        for r in fold_rows(record, 0, "r")
        if r["ok"] and phi_full is not None and "phi" in r["params"]
    ]
    for value, label in shifts:
        if hw is not None and value > hw:
            flags.append(f"phi moves by {value:.3f} when {label} is dropped (the interval's half-width is {hw:.3f})")
    return max(shifts) if shifts else None


def early_shift(record: ValidationRecord, flags: list[str]) -> float | None:
    """phi of the refit without each run's early evaluations minus the fit's (None without that fold); flagged
    beyond the interval's half-width."""
    full = full_result(record, 0)
    rows = [r for r in fold_rows(record, 0, "early") if r["ok"] and "phi" in r["params"]]
    if not (rows and full and full["ok"] and "phi" in full["params"]):
        return None
    shift = float(rows[0]["params"]["phi"] - full["params"]["phi"])
    hw = half_width(record)
    if hw is not None and abs(shift) > hw:
        label = record.folds[rows[0]["fold"]]["label"]
        flags.append(
            f"phi moves by {shift:+.3f} when {label} are left out (the interval's half-width is {hw:.3f}): phi rests "
            "on the curves' early transient; refit with a later --curve-start"
        )
    return shift


def loss_flags(record: ValidationRecord) -> list[str]:
    """The fit's law under MSE (the last form, `forms.forms_for`) against the fit's loss, on the whole table:
    a phi further apart than the interval's half-width is flagged."""
    full, hw = full_result(record, 0), half_width(record)
    mse = [
        i
        for i, form in enumerate(record.forms)
        if i and form["law"] == record.forms[0]["law"] and form.get("loss") == MSE_KIND
    ]
    other = full_result(record, mse[0]) if mse else None
    if hw is None or not (full and full["ok"] and other and other["ok"]) or "phi" not in full["params"]:
        return []
    phi, phi_mse = full["params"]["phi"], other["params"].get("phi")
    if phi_mse is None or abs(phi_mse - phi) <= hw:
        return []
    return [
        f"phi is {phi:.3f} under the fit's loss and {phi_mse:.3f} under MSE (the interval's half-width is {hw:.3f}): "
        "it rests on how the points the law misses are weighed"
    ]


def _shown(record: ValidationRecord, form: int) -> str:
    """The rival's parameters that the fit's law has not, as " (psi = -0.236, N_ref = 1e+05)"."""
    own = (full_result(record, 0) or {}).get("params") or {}
    params = (full_result(record, form) or {}).get("params") or {}
    extra = [f"{k} = {v:.3g}" for k, v in params.items() if k not in own]
    return f" ({', '.join(extra)})" if extra else ""


def form_flags(record: ValidationRecord) -> list[str]:
    """A per-r multiplier form, or a rival with a `departure` (phi running with r or the size, a price of
    looping), clearly better by AICc; Approach 2 away from the law's exponent."""
    flags = []
    for i, form in enumerate(record.forms):
        cls = find_law(form["law"]) if form["law"] else None
        d = delta_aicc(record, i)
        if not (i and cls is not None and d is not None and d < AICC_FLAG):
            continue
        if cls.per_r_multipliers:
            flags.append(f"{form['label']}: AICc {d:+.1f} against the fit's law: the r effect is not a power of r")
        elif cls.departure and cls.name != record.forms[0]["law"]:
            flags.append(f"{form['label']}: AICc {d:+.1f} against the fit's law: {cls.departure}{_shown(record, i)}")
    a2 = record.approach2 or {}
    if a2.get("a") is not None and a2.get("a_law") is not None and a2.get("a_se"):
        if abs(a2["a"] - a2["a_law"]) > Z_95 * a2["a_se"]:
            flags.append(
                f"Approach 2 gives N* ~ C^{a2['a']:.3f} +- {Z_95 * a2['a_se']:.3f}, the law beta/(alpha+beta) = "
                f"{a2['a_law']:.3f}"
            )
    return flags


def once_flags(section) -> list[str]:
    """An r whose every looped run (3 or more) lost to its block run once on the same tokens: its passes are worth
    less than one, whatever phi the law reads across widths (once.py)."""
    return [
        f"r = {s['r']}: every looped run ({s['runs']}) lost to its block run once at equal data (mean "
        f"{s['mean_gain']:+.4f} nats): its passes are worth less than one pass"
        for s in (section or {}).get("by_r", [])
        if s["runs"] >= 3 and s["better"] == 0
    ]


def verdict(record: ValidationRecord) -> Verdict:
    """The line, the flags and the numbers behind them (module docstring)."""
    flags: list[str] = []
    budget, r = held_out_summary(record, "budget", flags), held_out_summary(record, "r", flags)
    shift = phi_shifts(record, flags)
    early = early_shift(record, flags)
    flags += form_flags(record)
    flags += loss_flags(record)
    flags += (record.lr_confound or {}).get("flags", [])
    flags += once_flags(record.once)
    flags += (record.conventions or {}).get("flags", [])
    hw = half_width(record)
    line = (
        "the law predicts unseen budgets to {:.2%} (worst {:.2%})".format(*budget)
        if budget
        else ("no budget could be held out")
    )
    line += "; unseen r to {:.2%} (worst {:.2%})".format(*r) if r else "; no r could be held out"
    runs, finals = held_out_summary(record, "run", flags), held_out_summary(record, "final", flags)
    line += "; unseen runs to {:.2%} (worst {:.2%})".format(*runs) if runs else ""
    line += (
        "; each cooldown's end, from the curves without it, to {:.2%} (worst {:.2%})".format(*finals) if finals else ""
    )
    if shift is not None:
        line += f"; phi moves by at most {shift[0]:.3f} when one r is dropped ({shift[1]})"
        line += "" if hw is None else f", against an interval half-width of {hw:.3f}"
    if early is not None:
        line += f"; without each run's early evaluations phi moves by {early:+.3f}"
    return Verdict(line, flags, not flags, budget, r, None if shift is None else shift[0], hw)
