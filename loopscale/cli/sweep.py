"""`loopscale sweep OVERRIDES...`: list the jobs a multirun would launch, with their accounting (dry run)."""

from __future__ import annotations

import argparse

from hydra.errors import HydraException
from rich.console import Console
from rich.table import Table

from loopscale.atomic import json_text
from loopscale.cli import COMMANDS, usage_error
from loopscale.cli.arguments import add_probe_argument
from loopscale.config.schema import with_vocab
from loopscale.launch.estimate import launcher_limits_of, print_limit_warnings
from loopscale.launch.grid_cost import SWEEP_COLUMNS, sweep_cells, sweep_lines
from loopscale.launch.sweep import describe, expand, with_compile


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sweep",
        help=COMMANDS["sweep"].help,
        description="Expand `loopscale-train -m OVERRIDES` without launching anything: one row "
        "per job with its run name, r, width, N_once, N_rec, points, D, steps and C (a forked job's own: its "
        "parent and every cooldown), device batch x accumulation, predicted peak memory per device "
        "(loopscale/model/memory.py), estimated GPU hours and, for CPU jobs, CPU hours from a measured "
        "throughput probe and whether the job compiles (trainer.compile=auto: each model once, when its jobs pay for "
        "it; 'cached' when its graphs are in the cache); with several seeds, what each further seed costs; "
        "warns (stderr) about GPU jobs that would not fit trainer.plan_device or cannot finish within the "
        "launcher's timeout x (max requeues + 1): the SLURM launcher refuses those.",
    )
    p.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. experiment=isodepth model.r=1,2")
    p.add_argument(
        "--count",
        action="store_true",
        help="print only the number of jobs (each job's config is checked; nothing is planned or probed)",
    )
    p.add_argument("--json", action="store_true", help="print the jobs as JSON lines")

    add_probe_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        jobs = expand(args.overrides)  # every job's config checked (a typo'd name refused), nothing planned
        if args.count:
            print(len(jobs))
            return 0
        limits = launcher_limits_of(args.overrides)
        rows = with_compile([describe(job, limits, probe=args.probe) for job in jobs], [job.cfg for job in jobs], "D")
    except (HydraException, ValueError) as err:
        raise usage_error(err) from err
    print_limit_warnings([with_vocab(job.cfg, job.cfg.data.vocab_size) for job in jobs], limits)
    if args.json:
        for row in rows:
            print(json_text(row, indent=None))
        return 0
    _print_table(rows)
    for line in sweep_lines(rows):
        print(line)
    return 0


def _print_table(rows: list[dict]) -> None:
    table = Table(title=f"{len(rows)} jobs")
    for col in SWEEP_COLUMNS:
        table.add_column(col, justify="left" if col in ("run_name", "recipe") else "right")
    for row in rows:
        table.add_row(*sweep_cells(row))
    Console(width=max(Console().width, 140)).print(table)
