"""`loopscale plan OVERRIDES...`: training compute of a grid, forked (budget.mode=forks) vs independent runs.

For each job of the multirun (as `loopscale sweep` expands it): a forked job's points cost
F (D_parent + sum_i cooldown tokens_i) together, against F sum_i D_i as separate runs (loopscale/train/forks.py);
any other job is one point at its own C = F x D either way. Accounting, plus for CPU jobs a short measured
throughput probe of each model shape (loopscale/launch/throughput.py, cached per machine) for the CPU wall
time; nothing is trained.
"""

from __future__ import annotations

import argparse
import sys

from hydra.errors import HydraException
from rich.console import Console
from rich.table import Table

from loopscale.atomic import json_text
from loopscale.cli import COMMANDS, usage_error
from loopscale.cli.arguments import add_probe_argument
from loopscale.launch.grid_cost import PLAN_COLUMNS, over_limit_lines, plan_cells, plan_lines, plan_totals


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
    for line in over_limit_lines(rows):
        print(line, file=sys.stderr)
    if args.json:
        for row in rows:
            print(json_text(row, indent=None))
        print(json_text({"total": total}, indent=None))
        return 0
    _print_table(rows, total)
    return 0


def _print_table(rows: list[dict], total: dict) -> None:
    table = Table(title=f"{total['jobs']} jobs, {total['points']} points")
    for col in PLAN_COLUMNS:
        table.add_column(col, justify="left" if col == "run_name" else "right")
    for row in rows:
        table.add_row(*plan_cells(row))
    Console(width=max(Console().width, 140)).print(table)
    for line in plan_lines(rows, total):
        print(line)
