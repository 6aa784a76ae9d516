"""`loopscale plan OVERRIDES...`: training compute of a grid, forked (budget.mode=forks) vs independent runs.

For each job of the multirun (as `loopscale sweep` expands it): a forked job's points cost
F (D_parent + sum_i cooldown tokens_i) together, against F sum_i D_i as separate runs (loopscale/train/forks.py);
any other job is one point at its own C = F x D either way. Accounting, plus for CPU jobs a short measured
throughput probe of each model shape (loopscale/launch/throughput.py, cached per machine) for the CPU wall
time; nothing is trained.
"""

from __future__ import annotations

import argparse
import json
import sys

from hydra.errors import HydraException
from rich.console import Console
from rich.table import Table

from loopscale.cli import COMMANDS, usage_error
from loopscale.cli.arguments import add_probe_argument
from loopscale.launch.grid_cost import cpu_line, plan_totals, seed_line


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "plan",
        help=COMMANDS["plan"].help,
        description="Expand `loopscale-train -m OVERRIDES` and print, per job and in total, the "
        "training FLOPs of its points trained as independent runs and as forked "
        "warmup-stable-decay branches (budget.mode=forks), and their ratio.",
    )
    p.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. experiment=isodepth_cpu_wsd")
    p.add_argument("--json", action="store_true", help="print one JSON line per job and one for the total")
    add_probe_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        rows, total = plan_totals(args.overrides, args.probe)
    except (HydraException, ValueError) as err:
        raise usage_error(err) from err
    _warn_over_limits(rows)
    if args.json:
        for row in rows:
            print(json.dumps(row))
        print(json.dumps({"total": total}))
        return 0
    _print_table(rows, total)
    return 0


def _warn_over_limits(rows: list[dict]) -> None:
    for r in rows:
        if not r["fits_limits"]:
            print(
                f"WARNING: job {r['run_name']} needs ~{r['wall_h']:.1f} h but the launcher allows "
                f"{r['allowed_h']:.1f} h (timeout x (max requeues + 1), less requeue losses)",
                file=sys.stderr,
            )


COLUMNS = (
    "run_name",
    "r",
    "d_model",
    "points",
    "steps",
    "longest",
    "C independent",
    "C forked",
    "ratio",
    "GPU h",
    "CPU tok/s",
    "CPU h",
    "compile",
)


def _print_table(rows: list[dict], total: dict) -> None:
    """One row per job, every cell one number: steps = the optimizer steps the job trains (a forked job: its
    parent to the last fork plus each cooldown), longest = its longest point's steps (the JSON lists each
    point's steps and fork step)."""
    table = Table(title=f"{total['jobs']} jobs, {total['points']} points")
    for col in COLUMNS:
        table.add_column(col, justify="left" if col == "run_name" else "right")
    for r in rows:
        table.add_row(
            r["run_name"],
            str(r["r"]),
            str(r["d_model"]),
            str(r["points"]),
            str(r["steps_trained"]),
            str(max(r["steps"])),
            f"{r['C_independent']:.4g}",
            f"{r['C_forked']:.4g}",
            f"{r['C_independent'] / r['C_forked']:.2f}",
            f"{r['gpu_hours']:.1f}" + ("" if r["fits_limits"] else " !"),
            "-" if r.get("cpu_tokens_per_s") is None else f"{r['cpu_tokens_per_s']:.0f}",
            "-" if r.get("cpu_hours") is None else f"{r['cpu_hours']:.3g}",
            str(r["compile"]),
        )
    Console(width=max(Console().width, 140)).print(table)
    print(
        f"total training compute: independent {total['C_independent']:.4g} FLOPs, forked {total['C_forked']:.4g} "
        f"FLOPs: {total['ratio']:.2f}x cheaper; ~{total['gpu_hours']:.3g} GPU hours at the assumed MFU"
    )
    print(cpu_line(total))
    line = seed_line(rows)
    if line:
        print(line)
