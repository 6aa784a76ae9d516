"""`loopscale advise` from a fit record: the advice per r with its uncertainty, the best r (or "within the
noise"), the break-even memory budget, and the curves of its figure (docs/design.md, "Advice").

The optimiser (`loopscale.analysis.advise.optimum`) runs once on the fit's point estimate and once on every bootstrap
replicate stored in the record (`FitResult.bootstrap["params"]`). Per r the record gives the advised model
(the best valid width at the point estimate, its tokens and steps), the replicates' intervals of the
optimal loss, width, unique parameters and tokens, the interval of the predicted loss of the advised model
itself, and the share of replicates in which that r is best. A winner is named only when every other r is
worse in more than (1 + level) / 2 of the replicates (paired: the same replicate's optima); otherwise the
r within the noise are listed. Without replicates the record says so and holds point estimates only.

`advise(fit, compute_flops=..., ...)` is the one entry point (`loopscale advise` and the notebook call it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from loopscale.analysis.advise.break_even import break_even_record
from loopscale.analysis.advise.curves import advice_curves
from loopscale.analysis.advise.family import Family
from loopscale.analysis.advise.law_sets import LawSets, advised_recipe, default_r_values, fit_law_sets, fit_shapes
from loopscale.analysis.advise.matching import resolve_family
from loopscale.analysis.advise.optimum import Constraints, loss, multiplier_at, solve, tokens
from loopscale.analysis.advise.record_checks import check_record
from loopscale.atomic import json_safe
from loopscale.errors import InputError
from loopscale.fit.result import FitResult, data_summary, load_fit


@dataclass
class Advice:
    """record: what `loopscale advise --json` writes; curves[r]: the figure's loss against unique
    parameters at the budget (N_unique, L, L_lo, L_hi, feasible)."""

    record: dict
    curves: dict


# ----------------------------------------------------------------------------------------------------
# per r


def _interval(values: np.ndarray, level: float) -> list[float] | None:
    values = np.asarray(values, dtype=float)
    if len(values) < 2:
        return None
    tail = 100 * (1 - level) / 2
    return [float(np.percentile(values, tail)), float(np.percentile(values, 100 - tail))]


def _model(point: LawSets, reps: LawSets | None, family: Family, r: int, d: float, cons: Constraints, level) -> dict:
    """The advised model at width d: its accounting, tokens, steps and predicted loss (with the replicates'
    interval of the loss of this very model)."""
    q = {name: float(family.value(name, r, d)) for name in ("N_once", "N_rec", "N_unique", "F", "F_infer")}
    D = float(tokens(family, r, d, cons))
    out = {"d_model": d, "size": family.size_of(d), "N_once": q["N_once"], "N_rec": q["N_rec"]}
    m = float(multiplier_at(point, family, r, [[d]])[0][0, 0])
    out.update(N_unique=q["N_unique"], N_eff=q["N_once"] + m * q["N_rec"])
    out.update(train_flops_per_token=q["F"], infer_flops_per_token=q["F_infer"], D_tokens=D)
    out.update(steps=max(1, round(D / family.batch_tokens)), tokens_per_unique_param=D / q["N_unique"])
    out["L"] = float(loss(point, family, r, [[d]], cons)[0, 0])
    out["L_interval"] = None if reps is None else _interval(loss(reps, family, r, [[d]], cons)[:, 0], level)
    return out


def _binding(domain, d: float) -> str | None:
    if d >= domain.hi * (1 - 1e-9):
        return domain.binding
    return "min_width" if d <= domain.lo * (1 + 1e-9) else None


def _per_r(point, reps, family: Family, r: int, cons: Constraints, level: float):
    """(the record of one r, its replicate solution or None)."""
    solved = solve(point, family, r, cons)
    if isinstance(solved, str):
        return {"r": r, "feasible": False, "reason": solved}, None
    domain, d_star, d_snap, L_snap = solved
    d_c = float(d_star[0])
    cont = {"d_model": d_c, "N_unique": float(family.value("N_unique", r, d_c))}
    cont["L"] = float(loss(point, family, r, [[d_c]], cons)[0, 0])
    rec = {"r": r, "feasible": True, "binding": _binding(domain, d_c), "continuous": cont}
    rec["advised"] = _model(point, reps, family, r, float(d_snap[0]), cons, level)
    if reps is None:
        return rec, None
    _, rep_star, rep_snap, rep_L = solve(reps, family, r, cons)
    rec["replicates"] = {
        "L_opt": _interval(rep_L, level),
        "d_model": _interval(rep_snap, level),
        "N_unique": _interval(family.value("N_unique", r, rep_snap), level),
        "D_tokens": _interval(tokens(family, r, rep_snap, cons), level),
    }
    return rec, {"d_star": rep_star, "L": rep_L}


# ----------------------------------------------------------------------------------------------------
# best r and the break-even


def _best(per_r: list[dict], rep_L: dict[int, np.ndarray], level: float) -> dict:
    """The best r at the point estimate, each r's share of replicates, and the r within the noise of it."""
    feasible = [rec for rec in per_r if rec["feasible"]]
    best = min(feasible, key=lambda rec: rec["advised"]["L"])["r"]
    out = {"r": best, "n_replicates": 0, "within_noise": [], "share": None}
    if len(feasible) == 1:  # nothing to compare: no "every other r is worse"
        only = "the only r advised" if len(per_r) == 1 else "the only r that meets the constraints"
        out["verdict"] = f"r = {best}: {only}, so no comparison between r"
        out["n_replicates"] = len(rep_L.get(best, ()))
        return out
    if not rep_L:
        out["verdict"] = f"r = {best} (point estimate; no bootstrap replicates, so no statement about the noise)"
        return out
    order = sorted(rep_L)
    stacked = np.stack([rep_L[r] for r in order])
    winners = np.array(order)[np.argmin(stacked, axis=0)]
    out["share"] = {r: float(np.mean(winners == r)) for r in order}
    out["n_replicates"] = len(winners)
    tail = 100 * (1 - level) / 2
    for r in order:
        if r != best:
            worse_by = rep_L[r] - rep_L[best]  # paired: the same replicate's optima
            rec = next(x for x in per_r if x["r"] == r)
            rec["replicates"]["L_minus_best"] = _interval(worse_by, level)
            if np.percentile(worse_by, tail) <= 0:
                out["within_noise"].append(r)
    share = f"best in {100 * out['share'][best]:.0f}% of {len(winners)} replicates"
    if out["within_noise"]:
        others = ", ".join(f"r = {r} ({100 * out['share'][r]:.0f}%)" for r in out["within_noise"])
        out["verdict"] = f"within the noise: r = {best} ({share}) and {others}"
    else:
        out["verdict"] = f"r = {best}: {share}; every other r is worse beyond the noise ({level:.0%})"
    return out


def _hedge(fit: FitResult, best: dict) -> list[str]:
    """State the fit's verdict (`loopscale.fit.verdict`) with the advice: a fit whose phi (delta-phi) is not
    measured cannot tell the r apart, so the best r is marked tentative; the verdict's own warnings (an
    extrapolation of N*, D* not warranted) are repeated. Returns the warnings to add."""
    cond = fit.conditioning
    verdict, measured = (cond.verdict, cond.measured) if cond else (None, None)
    if verdict is None:
        return ["the fit records no verdict (written before loopscale recorded it): whether phi is measured is unknown"]
    # the verdict's warnings (issue 38): N*/D* extrapolation not warranted, which is what the advice does
    warned = [f"the fit's verdict warns: {w}" for w in cond.warnings]
    if measured is False:
        best["verdict"] = f"tentative (the fit is not measured): {best['verdict']}"
        return [
            f"the fit's verdict is '{verdict}': its phi is not a measurement, so neither is the choice of r",
            *warned,
        ]
    return warned


# ----------------------------------------------------------------------------------------------------
# warnings and the entry point


def _range_warnings(fit: FitResult, cons: Constraints, best: dict | None) -> list[str]:
    """Where the advice extrapolates the fitted range (needs the record's data summary)."""
    data = fit.data or {}
    if not data:
        return ["the fit records no fitted range (written before loopscale recorded it): extrapolation unchecked"]
    out = []
    if "C" in data and not data["C"][0] / 1.01 <= cons.compute_flops <= data["C"][1] * 1.01:
        out.append(
            f"C = {cons.compute_flops:.3g} FLOPs is outside the fitted budgets ({data['C'][0]:.3g} to "
            f"{data['C'][1]:.3g}): the advice extrapolates the law"
        )
    if best is not None:
        for key, name in (("N_unique", "N"), ("D_tokens", "D")):
            if name not in data:
                continue
            lo, hi = data[name]
            value = best[key]
            if not lo / 1.01 <= value <= hi * 1.01:
                out.append(f"the advised {key} = {value:.3g} is outside the fitted {name} range ({lo:.3g} to {hi:.3g})")
    return out


def _advice(fit: FitResult, cons: Constraints, family: Family, r_values: Sequence[int], recipe, level) -> Advice:
    """The advice of the module docstring for one fit, family and set of r."""
    point, reps, recipe = fit_law_sets(fit, r_values, recipe)
    solved = [_per_r(point, reps, family, r, cons, level) for r in r_values]
    per_r = [rec for rec, _ in solved]
    if not any(rec["feasible"] for rec in per_r):
        raise InputError("no r meets the constraints: " + "; ".join(rec["reason"] for rec in per_r))
    rep_L = {rec["r"]: sol["L"] for rec, sol in solved if sol is not None}
    best = _best(per_r, rep_L, level)
    hedges = _hedge(fit, best)
    best_model = next(rec["advised"] for rec in per_r if rec["r"] == best["r"])
    notes = (
        []
        if reps is not None
        else ["the fit holds no bootstrap replicates: point estimates only (refit with --bootstrap N)"]
    )
    if any(rec.get("binding") == "search_ceiling" for rec in per_r):
        notes.append(
            f"an optimum reached the search ceiling (d = {family.max_width:g}): the law has no interior optimum"
        )
    record = {
        "fit": {
            "law": fit.law,
            "recipe": recipe,
            "input": (fit.input or {}).get("path"),
            "params": fit.params,
            "verdict": fit.conditioning.verdict if fit.conditioning else None,
            "measured": fit.conditioning.measured if fit.conditioning else None,
        },
        "family": family.describe(),
        "constraints": {k: getattr(cons, k) for k in cons.__dataclass_fields__},
        "level": level,
        "per_r": per_r,
        "best": best,
        "break_even": break_even_record(point, reps, family, cons, r_values, level),
        "warnings": hedges + notes + _range_warnings(fit, cons, best_model),
    }
    return Advice(json_safe(record), advice_curves(point, reps, family, per_r, cons, level))


def advise(
    fit,
    *,
    compute_flops: float,
    max_unique_params: float | None = None,
    max_inference_flops: float | None = None,
    inference_tokens: float | None = None,
    r_values: Sequence[int] | None = None,
    family: str | Family = "auto",
    recipe: str | None = None,
    experiment: str | None = None,
    overrides: Sequence[str] = (),
    table=None,
    level: float = 0.95,
) -> Advice:
    """The advice for one fit (a FitResult, the dict of its JSON or a path to it) at a training budget of
    `compute_flops` (`optimum.Constraints`: with `max_unique_params` M, `max_inference_flops` I per token or
    `inference_tokens` T_inf served).

    family: a name (auto | paper | demo | cpu | custom, resolved from the fit record's model shapes, or those
    of `table`, the runs table it was fitted to, for records without them; `experiment` and `overrides` for
    custom) or a `Family` taken as given. r_values: default the r the fit saw. recipe: the family's recipe
    and, for a joint fit, whose phi to use (default: the fit's). level: the intervals' level.
    """
    cons = Constraints(compute_flops, max_unique_params, max_inference_flops, inference_tokens)
    source = fit
    fit = load_fit(fit)
    check_record(fit)
    advised = advised_recipe(fit, recipe)
    shapes = fit_shapes(fit, advised) or (data_summary(table)["shapes"] if table is not None else None)
    r_values = sorted({int(r) for r in r_values}) if r_values else default_r_values(fit, shapes)
    notes = []
    if not isinstance(family, Family):  # custom: the experiment's own recipe unless --recipe names one
        family_recipe = recipe if family == "custom" else advised
        family, notes = resolve_family(shapes, r_values, family, family_recipe, experiment, overrides)
        unseen = sorted(set(r_values) - {int(s[0]) for s in shapes}) if shapes else []
        if unseen:
            notes.append(
                f"r = {', '.join(map(str, unseen))} not in the fitted runs: the law's r-dependence is extrapolated"
            )
    advice = _advice(fit, cons, family, r_values, recipe, level)
    advice.record["warnings"] = notes + advice.record["warnings"]
    if isinstance(source, (str, Path)):
        advice.record["fit"]["input"] = str(source)
    return advice
