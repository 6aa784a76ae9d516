"""The designs `loopscale power` compares: the given design and a small menu beside it (more seeds, a budget more,
a size more), each simulated (`loopscale.fit.power.simulate_design`) and costed (`loopscale plan`'s totals), the
cheapest that detects a target delta-phi and the cheapest whose phi interval meets the verdict's width rule (each
checked by simulating it), and the results as Markdown."""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from loopscale.analysis.report import markdown_table
from loopscale.atomic import check_outputs_apart, check_writable, json_text, write_text_atomic
from loopscale.config.schema import TrainerConfig
from loopscale.data.heldout import curve_steps
from loopscale.fit.curve_worth import check_curve_options, curve_worth
from loopscale.fit.power import design_law, mde_formula, recipe_rows, seeds_needed, simulate_design
from loopscale.fit.replicates import replicate_groups
from loopscale.fit.runs_table import canonical_table, read_table
from loopscale.fit.verdict import MDE_FACTOR, PHI_CI_WIDTH_MAX
from loopscale.launch.design import candidate_designs, design_points, looped_overrides, n_seeds, with_seeds
from loopscale.launch.grid_cost import pool_rows, totals
from loopscale.plots.files import figure_files, write_figure
from loopscale.plots.power import power_figure

MAX_SEEDS = 64
MAX_SIMS = 20_000  # simulated sweeps per design: the MDE's own relative error ~ 1 / sqrt(2 sims) is 0.5% there


@dataclass(frozen=True)
class PowerRequest:
    """What `loopscale power` was asked: the design (Hydra overrides, or a runs table and recipe), its seeds, the
    simulations (sims, seed, planted delta, jobs, full fits), the cost (probe, the second recipe's overrides) and
    the target (--detect); `source` names the pilot law."""

    overrides: tuple[str, ...] = ()
    table: str | None = None
    recipe: str | None = None
    seeds: int | None = None
    sims: int = 200
    seed: int = 0
    delta: float = 0.0
    jobs: int = 1
    full: bool = False
    probe: bool = True
    candidate: str = ""
    detect: float | None = None
    measure_phi: bool = False  # find the cheapest design whose phi interval meets the verdict's width rule
    no_menu: bool = False
    source: str = "stated (--law)"
    curves: bool = True  # a curve-law pilot: the sweep fitted from its curves too (False: --finals)
    curve_share: float | None = None  # the share of a run's noise independent between evaluations (None: the pilot's)
    curve_points: int = TrainerConfig.curve_points  # evaluations a run's curve has (trainer.curve_points)


def power_record(req: PowerRequest, truth) -> dict:
    """Every design of the menu simulated and costed, and with --detect the recommended one (checked by
    simulation): the JSON `loopscale power` writes."""

    progress = sys.stderr if sys.stderr.isatty() else None
    check_curve_options(req.curve_share, req.curve_points, truth.curve is not None and req.curves)
    designs = _menu(req)[:1] if req.no_menu else _menu(req)
    out = []
    for name, structure, spec in designs:
        out.append(_evaluate(req, truth, name, structure, spec, progress))
    record = {
        "pilot": {
            "source": req.source,
            "law": truth.law,
            "params": dict(truth.params),
            "params_se": dict(truth.params_se),
            "sigma_log": truth.sigma_log,
            "sigma_source": truth.sigma_source,
            "sigma_dof": truth.sigma_dof,
            "sigma_interval": list(truth.sigma_interval()),
            "misfit_log": truth.misfit_log,
            "tail_dof": truth.tail_dof,
            "split_unknown": truth.split_unknown,
            "parent_share": truth.parent_share,
            "parent_share_se": truth.parent_share_se,
            "residual_pools": {
                "seed": None if truth.seed_units is None else len(truth.seed_units),
                "point": None if truth.point_units is None else len(truth.point_units),
            },
            "curve_noise": None if _curve_pilot(req, truth) is None else _curve_pilot(req, truth).noise.to_json(),
        },
        "settings": {"n_sims": req.sims, "seed": req.seed, "planted_delta_phi": req.delta, "full_fits": req.full},
        "mde_formula": mde_formula(),
        "designs": out,
    }
    if req.detect is not None:
        record["target"] = {"detect": req.detect, **_recommend(req, truth, out, progress, _mde_of, req.detect)}
    if req.measure_phi:
        found = _recommend(req, truth, out, progress, _phi_width_of, PHI_CI_WIDTH_MAX)
        record["phi_target"] = {"phi_width": PHI_CI_WIDTH_MAX, **found}
    return record


def _menu(req: PowerRequest) -> list[tuple[str, str, dict]]:
    """(name, structure, spec) of each design: spec {"overrides"} or {"table", "recipe", "seeds"}; structure: its
    points without the seeds ("as given" for the design with more seeds)."""

    if req.table:
        k = req.seeds or _table_seeds(req.table, req.recipe)
        spec = {"table": req.table, "recipe": req.recipe}
        return [("as given" if s == k else f"{s} seeds", "as given", {**spec, "seeds": s}) for s in (k, 2 * k, 4 * k)]
    overrides = list(req.overrides)
    if req.seeds is not None and req.seeds != n_seeds(overrides):
        overrides = with_seeds(overrides, req.seeds)
    return [
        (name, "as given" if name.endswith(" seeds") else name, {"overrides": ov})
        for name, ov in candidate_designs(overrides)
    ]


def _read_design(path, recipe: str | None):
    """A runs table (one recipe's rows: `recipe_rows`) as a design, checked as the law it is fitted with reads it
    (`design_law`: N_pass kept)."""
    raw = recipe_rows(read_table(path), recipe)
    # the design's points only: their losses are simulated, so a missing or NaN loss is no reason to refuse it
    # (a finite loss stays: rows of a point with different losses are its seeds when the table names none)
    L = pd.to_numeric(raw["L"], errors="coerce") if "L" in raw.columns else pd.Series(np.nan, index=raw.index)
    return canonical_table(raw.assign(L=L.where(np.isfinite(L) & (L > 0), 1.0)), design_law(raw))


def _table_seeds(path, recipe: str | None) -> int:

    return int(max(1, replicate_groups(_read_design(path, recipe)).seeds.max()))


def _design(spec: dict):
    """(points table, seeds per point) of a spec."""

    if "overrides" in spec:
        return design_points(spec["overrides"]), n_seeds(spec["overrides"])

    table = _read_design(spec["table"], spec.get("recipe"))
    first = table[~replicate_groups(table).duplicate]
    keys = [c for c in ("r", "N_once", "N_pass", "N_rec", "D") if c in table.columns]
    points = first.drop_duplicates(keys).reset_index(drop=True)
    design = points.loc[points.index.repeat(spec["seeds"])].reset_index(drop=True)
    design["seed"] = np.tile(np.arange(spec["seeds"]), len(points))
    return design.drop(columns=["L"], errors="ignore"), spec["seeds"]


def _cost(req: PowerRequest, spec: dict) -> dict:
    """FLOPs and hours of a design alone and with a second recipe's copy of its looped jobs (`loopscale plan`'s
    totals on the local pool; --candidate: that recipe's own overrides, planned); a runs table's: its C summed
    (independent runs), no hours."""

    if "overrides" not in spec:
        design, _ = _design(spec)
        flops = float(design["C"].sum())
        return {"flops": flops, "flops_with_candidate": flops + float(design.loc[design["r"] > 1, "C"].sum())}
    rows, pool = pool_rows(spec["overrides"], req.probe)
    second = [row for row in rows if row["r"] > 1]
    if req.candidate:
        r_values = {row["r"] for row in rows}
        second, _ = pool_rows(looped_overrides(spec["overrides"], r_values, req.candidate.split()), req.probe)
    alone, both = totals(rows, pool), totals(rows + second, pool)
    out = {"jobs": alone["jobs"], "jobs_with_candidate": both["jobs"]}
    for key, name in (("C_forked", "flops"), ("gpu_hours", "gpu_hours"), ("cpu_hours", "cpu_hours")):
        out[name], out[f"{name}_with_candidate"] = alone[key], both[key]
    out["cpu_pool_wall_h"], out["cpu_pool_wall_h_with_candidate"] = alone["cpu_pool_wall_h"], both["cpu_pool_wall_h"]
    return out


def _curve_pilot(req: PowerRequest, truth):
    """The curve-law pilot whose curves count toward the MDE (`curve_worth.CurvePilot`; its share of noise
    independent between evaluations replaced by --curve-share), or None: a final-point pilot, or --finals."""
    if truth.curve is None or not req.curves:
        return None
    return truth.curve if req.curve_share is None else truth.curve.with_share(req.curve_share)


def _evaluate(req: PowerRequest, truth, name: str, structure: str, spec: dict, progress) -> dict:
    """One design: its points, cost and simulated precision from final points, and with a curve-law pilot from
    curves: what a run's curve is worth (`curve_worth`, n_eff final points) and the sweeps simulated with each run's
    noise variance divided by it (at least 1: where the curve is worth less, the final points are fitted)."""

    design, seeds = _design(spec)
    simulate = dict(
        n_sims=req.sims, seed=req.seed, delta_phi=req.delta, jobs=req.jobs, progress=progress, full=req.full
    )
    sim = simulate_design(design, truth, label=name, **simulate)
    out = {
        "name": name,
        "structure": structure,
        **spec,
        "seeds": seeds,
        "n_runs": int(len(design)),
        "n_points": int(len(design) // max(seeds, 1)),
        "cost": _cost(req, spec),
        "phi": sim.phi.to_json(),
        "delta_phi": sim.delta_phi.to_json(),
    }
    pilot = _curve_pilot(req, truth)
    if pilot is None:
        return out
    points = req.curve_points
    worth = curve_worth(
        design, pilot.params, pilot.law_class(), pilot.noise, lambda n, w, c: curve_steps(n, points, (w, c), c)
    )
    used = max(1.0, worth) if math.isfinite(worth) else 1.0
    if used > 1.0:
        f = 1.0 / math.sqrt(used)
        sim = simulate_design(
            design, replace(truth, sigma_log=truth.sigma_log * f, misfit_log=truth.misfit_log * f),
            label=f"{name} (curves)", **simulate,
        )  # fmt: skip
    out["curves"] = {
        "worth": worth,
        "worth_used": used,
        "eval_share": pilot.noise.share,
        "rho": pilot.noise.rho,
        "points": points,
        "phi": sim.phi.to_json(),
        "delta_phi": sim.delta_phi.to_json(),
    }
    return out


def _delta_phi(d: dict) -> dict:
    """A design's delta-phi precision as its sweep will be fitted: from curves where they count, else finals."""
    return (d.get("curves") or d)["delta_phi"]


def _mde_of(d: dict) -> float:
    return _delta_phi(d)["mde"]


def _phi_width_of(d: dict) -> float:
    """phi's expected 95% width (the verdict interval's median over sweeps): from curves where they count."""
    return (d.get("curves") or d)["phi"]["width95"]


def _recommend(req: PowerRequest, truth, designs: list[dict], progress, metric, target: float) -> dict:
    """The cheapest design (FLOPs with the second recipe) whose `metric` (the delta-phi MDE: --detect; phi's
    expected width: --measure-phi, the verdict's width rule) is at most `target`. Per design of the menu, the
    seeds that bring it to the target at metric ~ 1 / sqrt(seeds), never fewer than it has (a design with fewer
    seeds is another entry of the menu), and their cost; the cheapest is simulated at those seeds (unless the
    menu holds it), one seed more while its simulated metric misses the target (three tries)."""

    options = []
    for d in designs:
        # the metric read off the verdict's interval, as an se of the normal approximation (the pick is simulated)
        k = seeds_needed(metric(d) / MDE_FACTOR, d["seeds"], target, MAX_SEEDS)
        if k is not None:
            k = max(k, d["seeds"])
            flops = d["cost"]["flops_with_candidate"] * k / d["seeds"]
            options.append({"from": d["name"], "structure": d["structure"], "seeds": k, "flops": flops})
    if not options:
        return {
            "recommended": None,
            "why": f"no design of the menu reaches it with <= {MAX_SEEDS} seeds",
        }
    best = min(options, key=lambda o: o["flops"])
    base = next(d for d in designs if d["name"] == best["from"])
    for k in range(best["seeds"], min(best["seeds"] + 3, MAX_SEEDS + 1)):
        known = [d for d in designs if d["structure"] == best["structure"] and d["seeds"] == k]
        if known:
            found = known[0]
        else:
            spec = {"overrides": with_seeds(base["overrides"], k)} if "overrides" in base else {**base, "seeds": k}
            spec = {key: spec[key] for key in ("overrides", "table", "recipe", "seeds") if key in spec}
            found = _evaluate(req, truth, f"{best['structure']}, {k} seeds", best["structure"], spec, progress)
        if metric(found) <= target:
            break
    return {"options": options, "recommended": found, "reached": metric(found) <= target}


# ----------------------------------------------------------------------------------------------
# The results as Markdown
# ----------------------------------------------------------------------------------------------
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
        "final points to phi (its variance from the design's final points over that from its curves, the l2 fits "
        "linearised at the pilot's law: `loopscale.fit.curve_worth`); the sweeps from curves are simulated as "
        "final points with each run's noise variance / max(n_eff, 1) (Δφ assumed to gain as phi does)."
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
                f"{_delta_phi(rec)['mde']:.3f}, which {verdict} the target."
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


def power_outputs(json_path, md_path, plot_path, inputs) -> list[tuple[str, Path]]:
    """The files --json, --md and --plot (a PDF beside its PNG) name, as (flag, path), checked before any
    simulation: writable, none an input (`inputs`: (what, path or None)) or another output."""
    given = (("--json", json_path), ("--md", md_path), ("--plot", plot_path))
    outputs = [(flag, Path(path)) for flag, path in given if path]
    outputs += [("--plot", p) for p in (figure_files(Path(plot_path))[1:] if plot_path else [])]
    check_outputs_apart(outputs, inputs)
    for flag, path in outputs:
        check_writable(path, flag)
    return outputs


def write_power(record: dict, text: str, json_path=None, md_path=None, plot_path=None, say=print) -> None:
    """The record as strict JSON (atomic.json_text: NaN as null), its Markdown `text` and its figure (MDE against FLOPs,
    as PNG and PDF: plots/files.py figure_files), the figure drawn before anything is written; `say` hears each
    figure file written."""
    figure = power_figure(record) if plot_path else None
    if json_path:
        write_text_atomic(json_path, json_text(record) + "\n")
    if md_path:
        write_text_atomic(md_path, text + "\n")
    if figure is not None:
        for path in write_figure(figure, figure_files(plot_path), 200):
            say(f"wrote {path}")
