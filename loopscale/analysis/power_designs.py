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

from loopscale.analysis.power_text import delta_phi_of
from loopscale.atomic import check_outputs_apart, check_writable, json_text, write_text_atomic
from loopscale.config.schema import TrainerConfig
from loopscale.data.heldout import curve_steps
from loopscale.fit.curve_worth import CurveNoise, check_curve_options, curve_worth
from loopscale.fit.position_sigma import position_gain, sigma_model_from_json, stage1_loss_of
from loopscale.fit.power import design_law, recipe_rows, simulate_design
from loopscale.fit.power_summary import mde_formula, seeds_needed
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

    def evaluated(steps: int, warmup: int, cooldown: int | None) -> list[int]:
        return curve_steps(steps, points, (warmup, cooldown), cooldown)

    worth = curve_worth(design, pilot.params, pilot.law_class(), pilot.noise, evaluated)
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
    if pilot.position is not None:
        out["curves"]["position"] = _position_note(design, pilot, evaluated, worth)
    return out


def _position_note(design, pilot, evaluated, worth: float) -> dict:
    """A pilot fitted with `--curve-sigma position`: what `power` promises is the unweighted curve fit's worth
    (`worth`, from its log residuals), not the two-stage fit's; beside it, what weighing this design's curves by the
    pilot's position sigma may add (`position_sigma.position_gain`: linearised, not simulated, so not promised)."""
    note = {"promised": "unweighted", "variance_ratio": None, "se_ratio": None, "worth_weighted": None}
    z = pilot.position.get("curve_standardised")
    if z is None:  # a record from before its standardised noise was kept
        return note
    gain = position_gain(
        design, pilot.params, pilot.law_class(), sigma_model_from_json(pilot.position["model"]),
        CurveNoise.from_json(z), evaluated, stage1_loss_of(pilot.position),
    )  # fmt: skip
    return {**note, "variance_ratio": gain.variance, "se_ratio": gain.se_ratio, "worth_weighted": worth * gain.variance}


def _mde_of(d: dict) -> float:
    return delta_phi_of(d)["mde"]


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
