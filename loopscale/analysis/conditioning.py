"""Is a fitted phi a measurement or a fit to noise? The conditioning numbers of one looped fit.

A sweep measures phi only when (docs/design.md, "Fitting"): phi's interval (the one the verdict reads, its profile) is
narrow; E is not
pinned to a bound (E on its floor means the data term and the capacity term trade off freely); most refined
starts reach the best basin; the law predicts a budget it never saw (the largest, held out); each budget's
iso-FLOP curve of the dense r = 1 runs has its minimum inside the sampled widths (else the sweep never saw
the optimum it extrapolates); and the collapse tells phi apart: the runs, with the data term removed, fall
on one curve E + A N_eff^-alpha at the fitted phi clearly better than at phi = 0 and at phi = 1.

`conditioning(table, fit)` computes them all (`ConditioningNumbers`; its JSON form, demo.json's "conditioning":
the fields by name, in order); `check(cond, targets)` compares them with targets (the demo's
are DEMO_TARGETS) and returns the failures in words. `verdict(table, fit)` is the shorter set every fit
record carries (`loopscale.fit.verdict`: "phi measured" or "not measured: ..."). All are pure: the demo,
`benchmarks/bench_demo.py` and the report print the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
import pandas as pd

from loopscale.errors import InputError
from loopscale.fit.bounds import BOUNDS
from loopscale.fit.isoflop import isoflop_minima
from loopscale.fit.laws.registry import find_law
from loopscale.fit.result import load_fit
from loopscale.fit.verdict import PHI_CI_WIDTH_MAX, fit_checks, interval_of, noise_of
from loopscale.fit.verdict_record import Conditioning, JsonKeys
from loopscale.plots.curves import collapse_spread
from loopscale.plots.inputs import rows_for_fit

# The demo's targets (issue 15): what a two-core, 15-minute sweep must reach to call its phi measured. phi's
# interval width is the verdict's rule (narrow enough to separate the published recipes, issue 38).
DEMO_TARGETS = {
    "phi_ci_width_max": PHI_CI_WIDTH_MAX,
    "min_bootstrap": 200,
    "best_basin_min": 8,
    "holdout_mre_max": 0.015,
    "collapse_ratio_max": 0.5,
}


def verdict(table: pd.DataFrame, fit) -> Conditioning:
    """The record's "conditioning" (`verdict_record.Conditioning`: the checks, warnings, verdict, ...):
    as stored by `loopscale fit`, or computed from the table for a record written before fits carried it (a
    per-recipe fit's needs the joint table's recipe codes: refit it)."""
    fit = load_fit(fit)
    if fit.conditioning:
        return fit.conditioning
    law = find_law(fit.law)
    if law is not None and law.per_recipe:
        raise InputError("this joint fit record has no conditioning checks: refit it (`loopscale fit --joint`)")

    return fit_checks(rows_for_fit(table, fit), fit)


@dataclass(frozen=True)
class ConditioningNumbers(JsonKeys):
    """The conditioning numbers of a looped fit (module docstring); `to_json` is demo.json's "conditioning"."""

    phi: float
    phi_ci: list | None  # the interval the verdict reads ([low, high], an open end None)
    phi_ci_source: str | None  # its name ("profile")
    phi_ci_width: float | None
    n_bootstrap: int
    E: float
    E_bounds: list[float]  # the fitter's box for E
    E_inside: bool
    n_best_basin: int | None
    n_refined: int | None
    holdout_mre: float | None  # the held-out largest budget's mean |relative error|
    isoflop_r1: list[dict]  # per budget: `isoflop_minima`, judged against the fit's noise (`verdict.noise_of`)
    isoflop_r1_inside: bool  # every minimum inside or within the noise
    collapse_rms: dict[str, float]  # at phi_fit, phi_0, phi_1
    collapse_ratio: float  # at the fit over the smaller of phi = 0 and phi = 1

    def to_json(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_json(cls, d) -> ConditioningNumbers:
        return cls(*(d.get(f.name) for f in fields(cls)))


def conditioning(table: pd.DataFrame, fit) -> ConditioningNumbers:
    """The conditioning numbers of a looped fit on its table (module docstring, `ConditioningNumbers`)."""
    fit = load_fit(fit)
    if "phi" not in fit.params:  # one phi for every r (the looped law); a joint fit has one per recipe
        raise InputError(f"conditioning needs a fit of the looped law; got {fit.law!r}")
    rows = rows_for_fit(table, fit)
    phi = fit.params["phi"]
    ci, source, _ = interval_of(fit, "phi", fit.profile_phi)  # the interval the verdict reads
    lo, hi = (float(np.exp(b)) for b in BOUNDS["e"])
    log_e = np.log(fit.params["E"])
    # "on the bound" with the fitter's own tolerance for exponents (optimize._boundary_notes)
    E_inside = bool(BOUNDS["e"][0] + 1e-6 < log_e < BOUNDS["e"][1] - 1e-6)
    spreads = {
        "phi_fit": collapse_spread(table, fit, phi),  # it picks the fit's rows itself
        "phi_0": collapse_spread(table, fit, 0.0),
        "phi_1": collapse_spread(table, fit, 1.0),
    }
    minima = isoflop_minima(rows, r=1, sigma_log=noise_of(fit).sigma_log)
    width = None if ci is None or None in ci else float(ci[1] - ci[0])
    return ConditioningNumbers(
        phi,
        ci,
        source,
        width,
        (fit.bootstrap or {}).get("n_replicates", 0),
        fit.params["E"],
        [lo, hi],
        E_inside,
        fit.n_best_basin,
        fit.n_refined,
        None if fit.holdout is None else fit.holdout["mean_abs_rel_error"],
        minima,
        bool(minima) and all(m["bracketed"] for m in minima),
        spreads,
        spreads["phi_fit"] / min(spreads["phi_0"], spreads["phi_1"]),
    )


def check(cond: ConditioningNumbers, targets: dict[str, float] = DEMO_TARGETS) -> list[str]:
    """The targets `cond` misses, one sentence each; empty when the fit is well-conditioned."""
    misses = []
    width = cond.phi_ci_width
    if cond.n_bootstrap < targets["min_bootstrap"]:
        misses.append(f"phi needs a bootstrap of >= {targets['min_bootstrap']} replicates (has {cond.n_bootstrap})")
    elif width is None:  # an open profile (phi on its bound, or a profile that never rises by the chi^2 cut)
        misses.append(f"phi's 95% {cond.phi_ci_source or 'bootstrap'} interval is open: no width to judge")
    elif width > targets["phi_ci_width_max"]:
        name = cond.phi_ci_source or "bootstrap"
        misses.append(f"phi's 95% {name} interval is {width:.3f} wide (target <= {targets['phi_ci_width_max']})")
    if not cond.E_inside:
        misses.append(f"E = {cond.E:.4g} sits on its bound {cond.E_bounds}")
    if cond.n_best_basin < targets["best_basin_min"]:
        misses.append(
            f"only {cond.n_best_basin} of {cond.n_refined} refined starts reach the best basin "
            f"(target >= {targets['best_basin_min']})"
        )
    if cond.holdout_mre is None:
        misses.append("no held-out budget was predicted")
    elif cond.holdout_mre > targets["holdout_mre_max"]:
        misses.append(
            f"the held-out largest budget is predicted to {100 * cond.holdout_mre:.2f}% "
            f"(target <= {100 * targets['holdout_mre_max']:.1f}%)"
        )
    outside = [m for m in cond.isoflop_r1 if not m.get("bracketed", m["inside"])]
    if not cond.isoflop_r1:
        misses.append("no r = 1 runs: no iso-FLOP minimum to check")
    for m in outside:
        misses.append(
            f"budget {m['budget']:.3g}: the r = 1 minimum (width {m['best_width']:g}) is not inside "
            f"the sampled widths {m['widths']}"
            + (", beyond the noise" if len(m["widths"]) >= 3 else " (fewer than three: never bracketed)")
        )
    if cond.collapse_ratio > targets["collapse_ratio_max"]:
        rms = cond.collapse_rms
        misses.append(
            f"the collapse does not tell phi apart: RMS {100 * rms['phi_fit']:.2f}% at the fitted phi "
            f"vs {100 * rms['phi_0']:.2f}% at phi = 0 and {100 * rms['phi_1']:.2f}% at phi = 1 "
            f"(target: at most {targets['collapse_ratio_max']} of the smaller)"
        )
    return misses
