"""`loopscale power`'s record as Markdown (`analysis/power_designs.py` builds the record): the pilot and the noise
its sweeps draw, one row per design (points x seeds, FLOPs and hours, phi's expected width with its Monte-Carlo
error and the share of sweeps within the verdict's width rule, bias, delta-phi's width and MDE), the curves'
columns of a curve-law pilot, and the designs --detect and --measure-phi recommend."""

from __future__ import annotations

import math

from loopscale.analysis.report import markdown_table
from loopscale.fit.verdict import PHI_CI_WIDTH_MAX


def delta_phi_of(d: dict) -> dict:
    """A design's delta-phi precision as its sweep will be fitted: from curves where they count, else finals."""
    return (d.get("curves") or d)["delta_phi"]


def _pm(se) -> str:
    return "" if se is None or not math.isfinite(se) else f" ± {se:.3f}"


def _within(phi: dict) -> str:
    """The share of sweeps whose phi interval meets the verdict's width rule, as ' (n% <= 0.16)'."""
    share = phi.get("within_rule")
    return "" if share is None else f" ({100 * share:.0f}% <= {PHI_CI_WIDTH_MAX:.2f})"


def _num(x, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}g}"


def _hours(cost: dict, suffix: str = "") -> str:
    gpu, cpu, wall = (cost.get(f"{k}{suffix}") for k in ("gpu_hours", "cpu_hours", "cpu_pool_wall_h"))
    parts = []
    if cpu is not None:
        parts.append(
            f"CPU {_num(cpu)} h ({_num(wall)} h wall on the pool)" if wall is not None else f"CPU {_num(cpu)} h"
        )
    if gpu is not None:
        parts.append(f"GPU {_num(gpu)} h")
    return "; ".join(parts) or "-"


def design_row(d: dict) -> list[str]:
    c, phi, dphi = d["cost"], d["phi"], d["delta_phi"]
    return [
        d["name"],
        f"{d['n_points']} x {d['seeds']}",
        f"{c['flops']:.3g}",
        f"{c['flops_with_candidate']:.3g}",
        _hours(c, "_with_candidate"),
        f"{phi['width95']:.3f}" + _pm(phi.get("width95_mc_se")) + _within(phi),
        f"{phi['bias']:+.3f}",
        f"{dphi['width95']:.3f}",
        f"{dphi['mde']:.3f} ± {dphi.get('mde_mc_se', float('nan')):.3f}",
        f"{dphi.get('mde_point', float('nan')):.3f} / {dphi.get('mde_upper', float('nan')):.3f}",
    ]


CURVE_HEADERS = ["a run's curve worth (final points)", "phi 95% width from curves", "MDE Δφ from curves (± MC)"]


def curve_row(d: dict) -> list[str]:
    """A design's columns from curves: n_eff (the share of its noise independent between evaluations), the MDE."""
    c = d["curves"]
    used = "" if c["worth"] >= 1 else " (< 1: the finals are fitted)"
    return [
        f"{c['worth']:.2f}{used}",
        f"{c['phi']['width95']:.3f}",
        f"{c['delta_phi']['mde']:.3f} ± {c['delta_phi'].get('mde_mc_se', float('nan')):.3f}",
    ]


def _curve_text(record: dict) -> list[str]:
    noise = record["pilot"].get("curve_noise")
    if not noise:
        return []
    return [
        f"- From curves: the pilot's curve residuals are a run-level offset (sigma {noise['sigma_run_log']:.3g} in "
        f"log L) plus an AR(1) along the curve (sigma {noise['sigma_eval_log']:.3g}, rho {noise['rho']:.2f}): "
        f"{noise['eval_share']:.2f} of the noise is independent between evaluations. A run's curve is worth n_eff "
        "final points to phi (the squared ratio of the final points' interval to the curves' as the fits report "
        "them, linearised at the pilot's law, a forked job's parent and branches one draw: "
        "`loopscale.fit.curve_worth`); the sweeps from curves are simulated as "
        "final points with each run's noise variance / max(n_eff, 1) (Δφ assumed to gain as phi does).",
        *_position_text(record),
    ]


def _position_text(record: dict) -> list[str]:
    """A pilot fitted with `--curve-sigma position`: that the MDE from curves is the unweighted curve fit's, and by
    how much weighing by position may narrow phi's standard error beyond it (linearised, not promised)."""
    notes = [d["curves"]["position"] for d in record["designs"] if (d.get("curves") or {}).get("position")]
    if not notes:
        return []
    said = (
        "- The pilot was fitted with --curve-sigma position; the curve columns promise what the UNWEIGHTED curve "
        "fit is worth (its n_eff from the pilot's log residuals), not the position-weighted fit's."
    )
    ratios = [n["se_ratio"] for n in notes if n.get("se_ratio") is not None]
    if not ratios:
        return [said + " Its record has no standardised curve noise (refit the pilot) to say what weighing adds."]
    lo, hi = min(ratios), max(ratios)
    span = f"{lo:.2f}" if math.isclose(lo, hi, rel_tol=5e-3) else f"{lo:.2f}-{hi:.2f}"
    worth = ", ".join(f"{n['worth_weighted']:.2f}" for n in notes)
    return [
        said + f" Weighing each design's curves by the pilot's position sigma may narrow phi's standard error further, "
        f"to {span} x the unweighted fit's (n_eff {worth} if weighted): each fit's M-estimator sandwich linearised at "
        "the pilot's law, the noise the pilot's standardised residuals scaled by the sigma at each evaluation's share "
        "of its run (`position_sigma.position_gain`); not simulated, so not promised: the MDE above does not use it."
    ]


def design_source(d: dict) -> str:
    """Where the given design comes from: its overrides, or its runs table (and recipe)."""
    if "overrides" in d:
        return "the sweep " + " ".join(f"`{o}`" for o in d["overrides"])
    recipe = f", recipe {d['recipe']}" if d.get("recipe") else ""
    return f"the runs table {d['table']}{recipe} ({d['n_points']} points)"


HEADERS = [
    "design",
    "points x seeds",
    "FLOPs",
    "FLOPs with a 2nd recipe",
    "hours with a 2nd recipe",
    "phi 95% width (± MC; sweeps within the width rule)",
    "phi bias",
    "Δφ 95% width",
    "MDE Δφ (± MC)",
    "MDE at sigma / its 95% upper end",
]


def _noise_text(pilot: dict) -> str:
    """What the simulation draws beside the seed sigma: its interval, the misfit at a point, heavy tails."""
    parts = []
    if pilot.get("sigma_dof"):
        lo, hi = pilot["sigma_interval"]
        parts.append(f"95% interval [{lo:.3g}, {hi:.3g}] on {pilot['sigma_dof']:.0f} dof, drawn per sweep")
    if pilot.get("misfit_log"):
        parts.append(f"misfit at a point {pilot['misfit_log']:.3g} in log L")
    if pilot.get("parent_share", 1.0) < 1 or pilot.get("parent_share_se"):
        share = f"{pilot['parent_share']:.2f}" + (
            f" ± {pilot['parent_share_se']:.2f}, drawn per sweep" if pilot.get("parent_share_se") else ""
        )
        parts.append(f"a forked job's branches share {share} of a run's noise variance")
    for name, se in (pilot.get("params_se") or {}).items():
        parts.append(f"{name} drawn per sweep (se {se:.3g} in the fitter's coordinate, from the pilot's bootstrap)")
    if pilot.get("split_unknown"):
        parts.append("its split into seed noise and misfit unknown: drawn uniform per sweep")
    pools = pilot.get("residual_pools") or {}
    if pools.get("seed") or pools.get("point"):
        parts.append(
            "the noise's shape resampled from the pilot's standardised residuals (smoothed; "
            f"{pools.get('seed') or 0} seed-level, {pools.get('point') or 0} point-level)"
        )
    elif pilot.get("tail_dof"):
        parts.append(f"Student-t tails ({pilot['tail_dof']:.1f} dof)")
    return f" ({'; '.join(parts)})" if parts else ""


def markdown(record: dict) -> str:
    """The results as Markdown (printed, and --md)."""

    pilot = record["pilot"]
    curves = all("curves" in d for d in record["designs"])
    law = ", ".join(f"{k} = {v:.4g}" for k, v in pilot["params"].items())
    lines = [
        "# loopscale power",
        "",
        f"Pilot: {pilot['source']} (law {pilot.get('law', 'looped')}: {law}); seed sigma of log L "
        f"{pilot['sigma_log']:.4g} from "
        f"{pilot['sigma_source']}{_noise_text(pilot)}; {record['settings']['n_sims']} simulated sweeps per design, "
        "each fitted as `loopscale fit` does and read by the verdict's interval (the profile); the second recipe's "
        f"looped runs are a copy of the design's with Δφ = {record['settings']['planted_delta_phi']:g} planted.",
        "",
        f"Design: {design_source(record['designs'][0])}.",
        "",
        markdown_table(
            HEADERS + (CURVE_HEADERS if curves else []),
            [design_row(d) + (curve_row(d) if curves else []) for d in record["designs"]],
        ),
        "",
        f"- {record['mde_formula']}; the 95% widths are the verdict interval's median width.",
        *_curve_text(record),
    ]
    lines += _phi_target_lines(record.get("phi_target"))
    target = record.get("target")
    if target:
        rec = target.get("recommended")
        if rec is None:
            lines.append(f"- Δφ = {target['detect']:g}: {target['why']}.")
        else:
            verdict = "reaches" if target["reached"] else "does NOT reach"
            lines.append(
                f"- cheapest design for |Δφ| >= {target['detect']:g} at 80% power: **{rec['name']}** "
                f"({rec['n_points']} points x {rec['seeds']} seeds, {rec['cost']['flops_with_candidate']:.3g} FLOPs "
                f"with the second recipe; {_hours(rec['cost'], '_with_candidate')}): simulated MDE "
                f"{delta_phi_of(rec)['mde']:.3f}, which {verdict} the target."
            )
    return "\n".join(lines)


def _phi_target_lines(target: dict | None) -> list[str]:
    """--measure-phi's line: the cheapest design whose phi interval is expected within the verdict's width rule."""
    if not target:
        return []
    rule = f"phi's 95% interval expected <= {target['phi_width']:.2f} wide (the verdict's width rule)"
    rec = target.get("recommended")
    if rec is None:
        return [f"- {rule}: {target['why']}."]
    phi = (rec.get("curves") or rec)["phi"]
    verdict = "meets" if target["reached"] else "does NOT meet"
    return [
        f"- cheapest design for {rule}: **{rec['name']}** ({rec['n_points']} points x {rec['seeds']} seeds, "
        f"{rec['cost']['flops']:.3g} FLOPs; {_hours(rec['cost'])}): simulated width {phi['width95']:.3f}"
        f"{_pm(phi.get('width95_mc_se'))}, {100 * phi['within_rule']:.0f}% of sweeps within, which {verdict} it."
    ]
