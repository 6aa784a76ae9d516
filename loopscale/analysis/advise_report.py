"""`loopscale advise` from a fit record: the advice per r with its uncertainty, the best r (or "within the
noise"), the break-even memory budget, and the curves of its figure (docs/design.md, "Advice").

The optimiser (`loopscale.analysis.advise`) runs once on the fit's point estimate and once on every bootstrap
replicate stored in the record (`FitResult.bootstrap["params"]`). Per r the record gives the advised model
(the best valid width at the point estimate, its tokens and steps), the replicates' intervals of the
optimal loss, width, unique parameters and tokens, the interval of the predicted loss of the advised model
itself, and the share of replicates in which that r is best. A winner is named only when every other r is
worse in more than (1 + level) / 2 of the replicates (paired: the same replicate's optima); otherwise the
r within the noise are listed. Without replicates the record says so and holds point estimates only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from loopscale.analysis.advise import (
    Constraints,
    LawSets,
    break_even,
    continuous_optimum,
    loss,
    snapped_optimum,
    width_domain,
)
from loopscale.analysis.advise_family import Family, fit_recipe, resolve_family
from loopscale.errors import InputError
from loopscale.fit.result import FitResult, _jsonable, load_fit

BASE = ("E", "A", "alpha", "B", "beta")


@dataclass
class Advice:
    """record: what `loopscale advise --json` writes; curves[r]: the figure's loss against unique
    parameters at the budget (N_unique, L, L_lo, L_hi, feasible)."""

    record: dict
    curves: dict


# ----------------------------------------------------------------------------------------------------
# the fit's parameter sets


def _multiplier_key(law: str, r: int, recipe: str | None) -> str | None:
    """The parameter that sets m_r in N_eff = N_once + m_r N_rec, or None when m_r = 1."""
    if r == 1:
        return None
    return {"looped": "phi", "looped-joint": f"phi[{recipe}]", "looped-free": f"k_{r}"}[law]


def check_law(fit: FitResult, r_values: Sequence[int], recipe: str | None) -> str | None:
    """The recipe a joint fit is read for; ValueError when the law cannot advise these r."""
    if fit.law == "chinchilla":
        if any(r != 1 for r in r_values):
            raise InputError(
                "a chinchilla fit has no phi, so it cannot say what a recurrence is worth: only r = 1 can be "
                "advised (pass --r 1), or fit the looped law (loopscale fit --law looped)"
            )
    elif fit.law == "looped-free":
        have = sorted(int(float(k[2:])) for k in fit.params if k.startswith("k_"))
        if any(r != 1 and r not in have for r in r_values):
            raise InputError(f"the looped-free fit has a multiplier k_r for r in {have} only: pass --r among 1,{have}")
    elif fit.law == "looped-joint":
        recipes = [k[4:-1] for k in fit.params if k.startswith("phi[")]
        recipe = recipe or recipes[0]
        if recipe not in recipes:
            raise InputError(f"the joint fit has no recipe {recipe!r}; its recipes: {', '.join(recipes)}")
        return recipe
    elif fit.law != "looped":
        raise InputError(f"cannot advise from a {fit.law!r} fit")
    if recipe and fit.law != "looped-joint":
        raise InputError("--recipe applies to a looped-joint fit")
    return None


def _sets(fit: FitResult, columns: dict, r_values: Sequence[int], recipe: str | None) -> LawSets:
    arr = {k: np.atleast_1d(np.asarray(v, dtype=float)) for k, v in columns.items()}
    mult = {}
    for r in r_values:
        key = _multiplier_key(fit.law, r, recipe)
        if key is None:
            mult[r] = np.ones_like(arr["E"])
        else:
            mult[r] = arr[key] if fit.law == "looped-free" else np.power(float(r), arr[key])
    return LawSets(*(arr[k] for k in BASE), multiplier=mult)


def fit_law_sets(fit, r_values: Sequence[int], recipe: str | None = None):
    """(point estimate, bootstrap replicates or None, recipe) as LawSets for these r. Replicates with a
    missing or non-finite value are dropped; fewer than two left is None."""
    fit = load_fit(fit)
    recipe = check_law(fit, r_values, recipe)
    keys = [*BASE, *sorted({k for r in r_values if (k := _multiplier_key(fit.law, r, recipe))})]
    point = _sets(fit, {k: [fit.params[k]] for k in keys}, r_values, recipe)
    stored = (fit.bootstrap or {}).get("params") or {}
    if not all(k in stored for k in keys):
        return point, None, recipe
    table = np.array([[np.nan if v is None else v for v in stored[k]] for k in keys], dtype=float)
    table = table[:, np.isfinite(table).all(axis=0)]
    if table.shape[1] < 2:
        return point, None, recipe
    return point, _sets(fit, dict(zip(keys, table)), r_values, recipe), recipe


# ----------------------------------------------------------------------------------------------------
# per r


def _interval(values: np.ndarray, level: float) -> list[float] | None:
    values = np.asarray(values, dtype=float)
    if len(values) < 2:
        return None
    tail = 100 * (1 - level) / 2
    return [float(np.percentile(values, tail)), float(np.percentile(values, 100 - tail))]


def _solve(sets: LawSets, family: Family, r: int, cons: Constraints):
    """(domain, d*, d_snapped, L_snapped) for every set, or a one-line reason why r is infeasible."""
    domain = width_domain(family, r, cons)
    if isinstance(domain, str):
        return domain
    d_star = continuous_optimum(sets, family, r, cons, domain)
    d_snap, L_snap = snapped_optimum(sets, family, r, cons, domain, d_star)
    if d_snap is None:
        return f"r = {r}: no multiple of {family.width_step} lies between widths {domain.lo:.4g} and {domain.hi:.4g}"
    return domain, d_star, d_snap, L_snap


def _model(point: LawSets, reps: LawSets | None, family: Family, r: int, d: float, cons: Constraints, level) -> dict:
    """The advised model at width d: its accounting, tokens, steps and predicted loss (with the replicates'
    interval of the loss of this very model)."""
    from loopscale.analysis.advise import tokens

    q = {name: float(family.value(name, r, d)) for name in ("N_once", "N_rec", "N_unique", "F", "F_infer")}
    D = float(tokens(family, r, d, cons))
    out = {"d_model": d, "size": family.size_of(d), "N_once": q["N_once"], "N_rec": q["N_rec"]}
    out.update(N_unique=q["N_unique"], N_eff=q["N_once"] + float(point.multiplier[r][0]) * q["N_rec"])
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
    solved = _solve(point, family, r, cons)
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
    from loopscale.analysis.advise import tokens

    _, rep_star, rep_snap, rep_L = _solve(reps, family, r, cons)
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


def _break_even_entry(point_M: float, rep_M: np.ndarray | None, level: float) -> dict:
    out = {"M": point_M if np.isfinite(point_M) else None, "looping_always_wins": bool(point_M == np.inf)}
    out["looping_never_wins"] = bool(np.isnan(point_M))
    if rep_M is not None:
        finite = np.where(np.isnan(rep_M), 0.0, rep_M)  # never wins: the break-even is below every model
        tail = 100 * (1 - level) / 2
        ends = [float(np.percentile(finite, q, method="nearest")) for q in (tail, 100 - tail)]
        out["interval"] = [e if np.isfinite(e) else None for e in ends]
        out["share_always"] = float(np.mean(rep_M == np.inf))
        out["share_never"] = float(np.mean(np.isnan(rep_M)))
    return out


def _break_even(point, reps, family, cons, r_values, level) -> dict | None:
    """The break-even cap for the best r > 1 (overall) and for each r > 1, at the point estimate and
    per replicate (free optima under every constraint but the cap)."""
    looped = [r for r in r_values if r > 1]
    if 1 not in r_values or not looped:
        return None
    free = cons.without_cap()
    solved = {r: _solve(point, family, r, free) for r in [1, *looped]}
    looped = [r for r in looped if not isinstance(solved[r], str)]
    if isinstance(solved[1], str) or not looped:
        return None
    out = {"compute_flops": cons.compute_flops, "looped": looped, "level": level}
    sets = [(point, {r: solved[r][1] for r in [1, *looped]})]
    if reps is not None:
        sets.append((reps, {r: _solve(reps, family, r, free)[1] for r in [1, *looped]}))
    for label, group in [("overall", looped), *[(f"r={r}", [r]) for r in looped]]:
        values = [break_even(s, family, free, d_free, group) for s, d_free in sets]
        out[label] = _break_even_entry(float(values[0][0]), values[1] if reps is not None else None, level)
    return out


# ----------------------------------------------------------------------------------------------------
# warnings and curves


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


def _curves(point, reps, family: Family, per_r: list[dict], cons: Constraints, level: float) -> dict:
    """Loss against unique parameters at the budget per feasible r, over 1/30 to 30x the advised sizes, with
    the replicates' band and whether each width meets the inference constraints (the cap is drawn apart)."""
    advised = [rec["advised"]["N_unique"] for rec in per_r if rec["feasible"]]
    n_lo, n_hi = min(advised) / 30, max(advised) * 30
    out = {}
    for rec in per_r:
        if not rec["feasible"]:
            continue
        r = rec["r"]
        d_lo = max(float(family.width_for("N_unique", r, n_lo)), family.width_step)
        widths = np.geomspace(d_lo, max(float(family.width_for("N_unique", r, n_hi)), 2 * d_lo), 160)
        domain = width_domain(family, r, cons.without_cap())  # the cap is a line of the figure
        curve = {"N_unique": family.value("N_unique", r, widths), "L": loss(point, family, r, widths[None, :], cons)[0]}
        curve["feasible"] = widths <= domain.hi * (1 + 1e-9)
        if reps is not None:
            tail = 100 * (1 - level) / 2
            band = loss(reps, family, r, widths[None, :], cons)
            with np.errstate(invalid="ignore"):  # inf where serving leaves no training budget (eq. 2')
                curve["L_lo"], curve["L_hi"] = np.percentile(band, [tail, 100 - tail], axis=0)
        out[r] = curve
    return out


def advise_fit(
    fit, cons: Constraints, family: Family, r_values: Sequence[int], recipe: str | None = None, level: float = 0.95
) -> Advice:
    """The advice of the module docstring for one fit, family and set of constraints."""
    fit = load_fit(fit)
    r_values = sorted({int(r) for r in r_values})
    point, reps, recipe = fit_law_sets(fit, r_values, recipe)
    solved = [_per_r(point, reps, family, r, cons, level) for r in r_values]
    per_r = [rec for rec, _ in solved]
    if not any(rec["feasible"] for rec in per_r):
        raise InputError("no r meets the constraints: " + "; ".join(rec["reason"] for rec in per_r))
    rep_L = {rec["r"]: sol["L"] for rec, sol in solved if sol is not None}
    best = _best(per_r, rep_L, level)
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
        "fit": {"law": fit.law, "recipe": recipe, "input": (fit.input or {}).get("path"), "params": fit.params},
        "family": family.describe(),
        "constraints": {k: getattr(cons, k) for k in cons.__dataclass_fields__},
        "level": level,
        "per_r": per_r,
        "best": best,
        "break_even": _break_even(point, reps, family, cons, r_values, level),
        "warnings": notes + _range_warnings(fit, cons, best_model),
    }
    return Advice(_jsonable(record), _curves(point, reps, family, per_r, cons, level))


def default_r_values(fit: FitResult, shapes) -> list[int]:
    """The r the fit saw (its shapes), else 1, 2, 4, 8; r = 1 only for a chinchilla fit; the r with a free
    multiplier (and 1) for a looped-free fit."""
    if fit.law == "chinchilla":
        return [1]
    if fit.law == "looped-free":
        return [1, *sorted(int(float(k[2:])) for k in fit.params if k.startswith("k_"))]
    return sorted({int(s[0]) for s in shapes}) if shapes else [1, 2, 4, 8]


def advise_from_fit(
    fit,
    cons: Constraints,
    r_values: Sequence[int] | None = None,
    family: str = "auto",
    table=None,
    experiment: str | None = None,
    overrides: Sequence[str] = (),
    recipe: str | None = None,
    level: float = 0.95,
) -> Advice:
    """`advise_fit` with the family resolved from the fit record's model shapes (or those of `table`, the
    runs table it was fitted to, for records without them) and the r defaulting to the fit's."""
    from loopscale.fit.result import data_summary

    fit = load_fit(fit)
    shapes = (fit.data or {}).get("shapes") or (data_summary(table)["shapes"] if table is not None else None)
    r_values = list(r_values) if r_values else default_r_values(fit, shapes)
    family_recipe = recipe or ("baseline" if fit.law == "looped-joint" else fit_recipe(fit))
    fam, notes = resolve_family(shapes, r_values, family, family_recipe, experiment, overrides)
    unseen = sorted(set(r_values) - {int(s[0]) for s in shapes}) if shapes else []
    if unseen:
        notes.append(
            f"r = {', '.join(map(str, unseen))} not in the fitted runs: the law's r-dependence is extrapolated"
        )
    advice = advise_fit(fit, cons, fam, r_values, recipe, level)
    advice.record["warnings"] = notes + advice.record["warnings"]
    return advice


# ----------------------------------------------------------------------------------------------------
# the table and the lines the terminal shows


def advice_table(advice: Advice) -> pd.DataFrame:
    """One row per r: the advised model, its tokens, the predicted loss with its interval and the share of
    replicates in which that r is best."""
    record = advice.record
    share = record["best"].get("share") or {}
    rows = []
    for rec in record["per_r"]:
        if not rec["feasible"]:
            rows.append({"r": rec["r"], "note": rec["reason"]})
            continue
        m = rec["advised"]
        reps = rec.get("replicates") or {}
        rows.append(
            {
                "r": rec["r"],
                "d_model": m["d_model"],
                "N_unique": m["N_unique"],
                "N_eff": m["N_eff"],
                "D_tokens": m["D_tokens"],
                "tokens_per_param": m["tokens_per_unique_param"],
                "L": m["L"],
                "L_interval": m["L_interval"],
                "L_opt_interval": reps.get("L_opt"),
                "N_unique_interval": reps.get("N_unique"),
                "D_interval": reps.get("D_tokens"),
                "share_best": share.get(str(rec["r"]), share.get(rec["r"])),
                "binding": rec["binding"],
                "note": "best" if rec["r"] == record["best"]["r"] else "",
            }
        )
    return pd.DataFrame(rows)


def summary_lines(advice: Advice) -> list[str]:
    """The verdict, the break-even and the warnings as sentences."""
    record = advice.record
    lines = [f"best: {record['best']['verdict']}"]
    be = record.get("break_even")
    if be:
        lines.append(_break_even_line(be, "overall", f"r in {be['looped']}"))
    return lines + [f"note: {w}" for w in record["warnings"]]


def _break_even_line(be: dict, key: str, what: str) -> str:
    entry = be[key]
    C = be["compute_flops"]
    if entry["looping_always_wins"]:
        head = f"break-even at C = {C:.3g}: {what} beats r = 1 at every unique-parameter cap (also without one)"
    elif entry["looping_never_wins"]:
        head = f"break-even at C = {C:.3g}: r = 1 is never beaten by {what}, whatever the cap"
    else:
        head = f"break-even at C = {C:.3g}: below {entry['M']:.3g} unique parameters {what} beats r = 1"
    if "interval" in entry:
        lo, hi = entry["interval"]
        hi_text = "unbounded" if hi is None else f"{hi:.3g}"
        head += f" ({be['level']:.0%} interval over the replicates: {lo:.3g} to {hi_text})"
    return head
