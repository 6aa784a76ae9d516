"""`loopscale power`: how many runs does it take to measure phi, and a delta-phi of a given size?

    loopscale power --fit runs/demo/fit.json experiment=isodepth_cpu_demo --detect 0.1
    loopscale power --law "E=1.57,A=28,alpha=0.2,B=916,beta=0.37,phi=0.46" --sigma 0.005 experiment=isodepth
    loopscale power --fit fit.json --table runs.csv --seeds 3
    loopscale power --fit fit.json --table designs.csv --recipe lora --detect 0.1

From a pilot fit (or a stated law and seed sigma) and a sweep design (Hydra overrides, expanded with exact
accounting by `loopscale.launch.design`; or a runs table), simulate sweeps of the design and of a small menu of
designs beside it (more seeds, a budget more, a size more), fit each as `fit` does (`loopscale.fit.power`), and
print per design: its runs, FLOPs, GPU and CPU hours (`loopscale plan`'s estimates, for the design alone and with
a second recipe's looped runs), the expected 95% interval width of phi and of delta-phi, and the minimum detectable
delta-phi at 80% power. With --detect X: the cheapest design that detects |delta-phi| >= X, checked by simulating
it. Writes JSON (--json), Markdown (--md) and a figure of MDE against FLOPs (--plot); nothing is written when
anything fails.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from hydra.errors import HydraException

from loopscale.analysis.report import markdown_table
from loopscale.atomic import check_writable, write_text_atomic
from loopscale.cli import COMMANDS, UsageError
from loopscale.cli.plan import add_probe_argument, pool_rows, totals
from loopscale.fit.power import (
    Truth,
    design_law,
    mde_formula,
    recipe_rows,
    seeds_needed,
    simulate_design,
    truth_from_fit,
)
from loopscale.fit.replicates import replicate_groups
from loopscale.fit.resample import resolve_jobs
from loopscale.fit.runs_table import canonical_table, read_table
from loopscale.launch.design import candidate_designs, design_points, looped_overrides, n_seeds, with_seeds
from loopscale.plots.files import figure_files, write_figure
from loopscale.plots.power import power_figure

MAX_SEEDS = 64


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "power",
        help=COMMANDS["power"].help,
        description="Simulate sweeps of a design from a pilot law plus seed noise, fit each as `fit` does, and "
        "report the expected 95%% interval width of phi and delta-phi, the minimum detectable delta-phi "
        "(80%% power, 5%% two-sided: MDE = 2.80 se), for the design and a menu of designs beside it, with their "
        "FLOPs and hours; --detect X finds the cheapest design that detects X.",
    )
    p.add_argument("overrides", nargs="*", help="the sweep design: Hydra overrides, e.g. experiment=isodepth_cpu_demo")
    law = p.add_mutually_exclusive_group(required=True)
    law.add_argument("--fit", metavar="FIT", help="pilot fit JSON (`loopscale fit --out`; looped or joint law)")
    law.add_argument("--law", metavar="E=..,A=..", help="a stated law: E, A, alpha, B, beta, phi (needs --sigma)")
    p.add_argument(
        "--sigma",
        type=_positive,
        default=None,
        help="seed sigma of log L (default: the pilot's seed repeats, else its RMS residual)",
    )
    p.add_argument("--table", metavar="RUNS", help="a runs table as the design instead of overrides (seeds only)")
    p.add_argument(
        "--recipe",
        metavar="NAME",
        help="with --table: that recipe's runs as the design (and the baseline's r = 1 runs if it has none)",
    )
    p.add_argument(
        "--seeds", type=int, default=None, metavar="K", help="seeds per point of the design (default: its own)"
    )
    p.add_argument("--detect", type=_positive, default=None, metavar="X", help="find the cheapest design with MDE <= X")
    p.add_argument("--delta", type=float, default=0.0, help="delta-phi planted in the second recipe (default 0)")
    p.add_argument(
        "--parent-share",
        type=float,
        default=1.0,
        help="share of a run's noise that a forked job's branches share (default 1: a seed moves the whole job)",
    )
    p.add_argument("--candidate", default="", metavar="OVERRIDES", help="the second recipe's overrides, for its cost")
    p.add_argument("--sims", type=int, default=200, help="simulated sweeps per design (default 200)")
    p.add_argument("--no-menu", action="store_true", help="the design as given only (no designs beside it)")
    p.add_argument("--full", action="store_true", help="fit every sweep with the full multi-start (slow)")
    p.add_argument("--jobs", type=int, default=None, metavar="N", help="worker processes (default: every core)")
    p.add_argument("--seed", type=int, default=0, help="seed of the simulations (reproducible for any --jobs)")
    p.add_argument("--json", metavar="PATH", help="write the results as JSON")
    p.add_argument("--md", metavar="PATH", help="write the results as Markdown")
    p.add_argument("--plot", metavar="PATH", help="write the figure: MDE against FLOPs per design")

    add_probe_argument(p)
    p.set_defaults(func=run)


def _positive(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0; got {text}")
    return value


def run(args: argparse.Namespace) -> int:

    if args.sims < 20:
        raise UsageError(f"--sims {args.sims}: at least 20 simulated sweeps per design")
    if args.seeds is not None and not 1 <= args.seeds <= MAX_SEEDS:
        raise UsageError(f"--seeds must be in [1, {MAX_SEEDS}]; got {args.seeds}")
    if args.recipe and args.table is None:
        raise UsageError("--recipe picks a recipe's runs from --table; with overrides, set model.recipe=NAME")
    if args.table is None and not args.overrides:
        raise UsageError("give the design: Hydra overrides (e.g. experiment=isodepth_cpu_demo) or --table RUNS")
    for flag in ("json", "md", "plot"):
        if getattr(args, flag):
            check_writable(Path(getattr(args, flag)), f"--{flag}")
    args.jobs = resolve_jobs(args.jobs)
    truth = _truth(args)
    try:
        record = power_record(args, truth)
    except (HydraException, ValueError) as err:
        raise UsageError(str(err).splitlines()[0]) from err
    text = markdown(record)
    print(text)
    _write(args, record, text)
    return 0


def _truth(args):

    if args.fit:
        return truth_from_fit(args.fit, args.sigma, args.parent_share)
    if args.sigma is None:
        raise UsageError("--law needs --sigma (the seed sigma of log L)")
    try:
        params = {k.strip(): float(v) for k, v in (item.split("=", 1) for item in args.law.split(",") if item.strip())}
    except ValueError:
        raise UsageError(f"--law {args.law!r}: give NAME=VALUE pairs, e.g. E=1.57,A=28,alpha=0.2,...") from None
    return Truth(params, args.sigma, args.parent_share, "stated (--sigma)")


# ----------------------------------------------------------------------------------------------
# The designs, their costs and their simulations
# ----------------------------------------------------------------------------------------------
def power_record(args: argparse.Namespace, truth) -> dict:
    """Every design of the menu simulated and costed, and with --detect the recommended one (checked by
    simulation): the JSON `loopscale power` writes."""

    progress = sys.stderr if sys.stderr.isatty() else None
    designs = _menu(args)[:1] if args.no_menu else _menu(args)
    out = []
    for name, structure, spec in designs:
        out.append(_evaluate(args, truth, name, structure, spec, progress))
    record = {
        "pilot": {
            "source": args.fit or "stated (--law)",
            "params": dict(truth.params),
            "sigma_log": truth.sigma_log,
            "sigma_source": truth.sigma_source,
            "parent_share": truth.parent_share,
        },
        "settings": {"n_sims": args.sims, "seed": args.seed, "planted_delta_phi": args.delta, "full_fits": args.full},
        "mde_formula": mde_formula(),
        "designs": out,
    }
    if args.detect is not None:
        record["target"] = _recommend(args, truth, out, progress)
    return record


def _menu(args) -> list[tuple[str, str, dict]]:
    """(name, structure, spec) of each design: spec {"overrides"} or {"table", "recipe", "seeds"}; structure: its
    points without the seeds ("as given" for the design with more seeds)."""

    if args.table:
        k = args.seeds or _table_seeds(args.table, args.recipe)
        spec = {"table": args.table, "recipe": args.recipe}
        return [("as given" if s == k else f"{s} seeds", "as given", {**spec, "seeds": s}) for s in (k, 2 * k, 4 * k)]
    overrides = list(args.overrides)
    if args.seeds is not None and args.seeds != n_seeds(overrides):
        overrides = with_seeds(overrides, args.seeds)
    return [
        (name, "as given" if name.endswith(" seeds") else name, {"overrides": ov})
        for name, ov in candidate_designs(overrides)
    ]


def _read_design(path, recipe: str | None):
    """A runs table (one recipe's rows: `recipe_rows`) as a design, checked as the law it is fitted with reads it
    (`design_law`: N_pass kept)."""
    raw = recipe_rows(read_table(path), recipe)
    return canonical_table(raw, design_law(raw))


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


def _cost(args, spec: dict) -> dict:
    """FLOPs and hours of a design alone and with a second recipe's copy of its looped jobs (`loopscale plan`'s
    totals on the local pool; --candidate: that recipe's own overrides, planned); a runs table's: its C summed
    (independent runs), no hours."""

    if "overrides" not in spec:
        design, _ = _design(spec)
        flops = float(design["C"].sum())
        return {"flops": flops, "flops_with_candidate": flops + float(design.loc[design["r"] > 1, "C"].sum())}
    rows, pool = pool_rows(spec["overrides"], args.probe)
    second = [row for row in rows if row["r"] > 1]
    if args.candidate:
        r_values = {row["r"] for row in rows}
        second, _ = pool_rows(looped_overrides(spec["overrides"], r_values, args.candidate.split()), args.probe)
    alone, both = totals(rows, pool), totals(rows + second, pool)
    out = {"jobs": alone["jobs"], "jobs_with_candidate": both["jobs"]}
    for key, name in (("C_forked", "flops"), ("gpu_hours", "gpu_hours"), ("cpu_hours", "cpu_hours")):
        out[name], out[f"{name}_with_candidate"] = alone[key], both[key]
    out["cpu_pool_wall_h"], out["cpu_pool_wall_h_with_candidate"] = alone["cpu_pool_wall_h"], both["cpu_pool_wall_h"]
    return out


def _evaluate(args, truth, name: str, structure: str, spec: dict, progress) -> dict:
    """One design: its points, cost and simulated precision."""

    design, seeds = _design(spec)
    sim = simulate_design(
        design,
        truth,
        n_sims=args.sims,
        seed=args.seed,
        delta_phi=args.delta,
        jobs=args.jobs,
        progress=progress,
        label=name,
        full=args.full,
    )
    return {
        "name": name,
        "structure": structure,
        **spec,
        "seeds": seeds,
        "n_runs": int(len(design)),
        "n_points": int(len(design) // max(seeds, 1)),
        "cost": _cost(args, spec),
        "phi": sim["phi"],
        "delta_phi": sim["delta_phi"],
    }


def _recommend(args, truth, designs: list[dict], progress) -> dict:
    """The cheapest design (FLOPs with the second recipe) that detects |delta-phi| >= --detect. Per design of
    the menu, the seeds that bring its MDE to the target at se ~ 1 / sqrt(seeds), never fewer than it has (a
    design with fewer seeds is another entry of the menu), and their cost; the cheapest is simulated at those
    seeds (unless the menu holds it), one seed more while its simulated MDE misses the target (three tries)."""

    target = args.detect
    options = []
    for d in designs:
        k = seeds_needed(d["delta_phi"]["se"], d["seeds"], target, MAX_SEEDS)
        if k is not None:
            k = max(k, d["seeds"])
            flops = d["cost"]["flops_with_candidate"] * k / d["seeds"]
            options.append({"from": d["name"], "structure": d["structure"], "seeds": k, "flops": flops})
    if not options:
        return {
            "detect": target,
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
            found = _evaluate(args, truth, f"{best['structure']}, {k} seeds", best["structure"], spec, progress)
        if found["delta_phi"]["mde"] <= target:
            break
    return {"detect": target, "options": options, "recommended": found, "reached": found["delta_phi"]["mde"] <= target}


# ----------------------------------------------------------------------------------------------
# Output
# ----------------------------------------------------------------------------------------------
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
        f"{phi['width95']:.3f}",
        f"{phi['bias']:+.3f}",
        f"{dphi['width95']:.3f}",
        f"{dphi['mde']:.3f}",
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
    "phi 95% width",
    "phi bias",
    "Δφ 95% width",
    "MDE Δφ",
]


def markdown(record: dict) -> str:
    """The results as Markdown (printed, and --md)."""

    pilot = record["pilot"]
    law = ", ".join(f"{k} = {v:.4g}" for k, v in pilot["params"].items())
    lines = [
        "# loopscale power",
        "",
        f"Pilot: {pilot['source']} ({law}); seed sigma of log L {pilot['sigma_log']:.4g} from "
        f"{pilot['sigma_source']}; {record['settings']['n_sims']} simulated sweeps per design, each fitted as "
        "`loopscale fit` does; the second recipe's looped runs are a copy of the design's with "
        f"Δφ = {record['settings']['planted_delta_phi']:g} planted.",
        "",
        f"Design: {design_source(record['designs'][0])}.",
        "",
        markdown_table(HEADERS, [design_row(d) for d in record["designs"]]),
        "",
        f"- {record['mde_formula']}; 95% width = 2 x 1.96 se.",
    ]
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
                f"{rec['delta_phi']['mde']:.3f}, which {verdict} the target."
            )
    return "\n".join(lines)


def _write(args, record: dict, text: str) -> None:
    """--plot, --json, --md: the figure drawn before anything is written."""

    figure = None
    if args.plot:
        figure = power_figure(record)
    if args.json:
        write_text_atomic(args.json, json.dumps(record, indent=2, default=_plain) + "\n")
    if args.md:
        write_text_atomic(args.md, text + "\n")
    if figure is not None:  # a PNG for the screen, a PDF beside it for a paper (as every loopscale figure)
        for path in write_figure(figure, figure_files(args.plot), 200):
            print(f"wrote {path}")


def _plain(x):
    """numpy scalars and arrays as JSON numbers and lists (NaN as null is left to the reader: json writes NaN)."""
    return x.tolist() if hasattr(x, "tolist") else str(x)
