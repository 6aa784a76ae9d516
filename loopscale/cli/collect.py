"""`loopscale collect SWEEP_DIR` (runs table for the fitter) and `loopscale status SWEEP_DIR`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from loopscale.analysis.probes import dense_rows, probe_table
from loopscale.atomic import json_text
from loopscale.cli import COMMANDS, UsageError
from loopscale.fit.replicates import replicate_groups, seed_count_line
from loopscale.train.collect import (
    collect,
    curves_path,
    curves_table,
    duplicate_points,
    runs_table,
    status_counts,
    testtime_path,
    write_runs_table,
)
from loopscale.train.testtime_eval import testtime_rows


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "collect",
        help=COMMANDS["collect"].help,
        description="One row per finished run (columns r, N_once, N_rec, N, D, C, L, recipe, "
        "F, width, ...) and a list of runs that are missing, failed or diverged.",
    )
    p.add_argument("sweep_dir", type=Path)
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="table path (.csv; a .parquet is written beside "
        "it, and the runs not done go to <name>_problems.csv). "
        "Default: SWEEP_DIR/runs.csv",
    )
    p.add_argument(
        "--dense",
        type=Path,
        default=None,
        metavar="BASELINE_DIR",
        help="a probe sweep (no r = 1 runs): add the finished r = 1 runs of this baseline sweep, "
        "marked in the column dense_from, so the looped law has its dense anchor",
    )
    p.set_defaults(func=run_collect)
    s = sub.add_parser(
        "status",
        help=COMMANDS["status"].help,
        description="running: a live process holds the run's lock and beats its heartbeat; stale: the process "
        "that held it is gone (its pid, on this host) or silent (no heartbeat for 10 min, on any host).",
    )
    s.add_argument("sweep_dir", type=Path)
    s.add_argument("--json", action="store_true", help="print the counts and the runs not done as JSON")
    s.set_defaults(func=run_status)


def _collect(sweep_dir: Path):
    if not sweep_dir.is_dir():
        raise UsageError(f"{sweep_dir} is not a directory")
    return collect(sweep_dir)


def _print_problems(problems) -> None:
    if not problems:
        return
    table = Table(title=f"{len(problems)} runs not done")
    for col in ("run", "status", "step", "reason"):
        table.add_column(col)
    for p in problems:
        cells = (Path(p["run_dir"]).name, str(p["status"]), str(p.get("step") or ""), str(p["reason"])[:200])
        table.add_row(*map(escape, cells))  # a reason is data: "[/tmp/x]" is no closing tag
    console = Console(stderr=True)
    Console(stderr=True, width=max(console.width, 160)).print(table)


def run_collect(args: argparse.Namespace) -> int:
    rows, problems = _collect(args.sweep_dir)
    out = args.out or args.sweep_dir / "runs.csv"
    table = runs_table(rows) if args.dense is None else _with_dense(rows, args.dense)
    curves = curves_table(rows)
    testtime = testtime_rows(rows)  # each finished model scored across r (trainer.r_eval), one row per r_eval
    problems_out = write_runs_table(table, problems, out, curves, testtime)
    evaluations = curves.groupby(["run_dir", "step"]).ngroups if len(curves) else 0
    across_r = f" ({len(curves)} rows: scored at several r_eval)" if len(curves) > evaluations else ""
    print(
        f"{len(table)} finished runs -> {out} (+ {out.with_suffix('.parquet').name}); "
        f"{len(problems)} not done -> {problems_out.name}; {evaluations} curve evaluations{across_r} -> "
        f"{curves_path(out).name}"
    )
    _print_problems(problems)
    if len(testtime):
        print(
            f"{len(testtime)} test-time rows ({testtime['model'].nunique()} models) -> {testtime_path(out)} "
            "(loopscale fit ... --law testtime)"
        )
    if len(table):
        print(seed_count_line(replicate_groups(table)))  # seeds are replicates: `fit` measures their noise
    for line in duplicate_points(rows):  # one run (point and seed) counted twice by a fit
        print(f"warning: {line}", file=sys.stderr)
    return 0


def _with_dense(rows, baseline_dir: Path):
    dense = dense_rows(rows, baseline_dir)
    print(f"+ {len(dense)} r = 1 runs from {baseline_dir} (column dense_from)")
    return probe_table(rows, dense)


def run_status(args: argparse.Namespace) -> int:
    rows, problems = _collect(args.sweep_dir)
    counts = status_counts(rows, problems)
    if args.json:
        print(json_text({"counts": counts, "problems": problems}, indent=None))
        return 0
    table = Table(title=str(args.sweep_dir))
    table.add_column("status")
    table.add_column("runs", justify="right")
    for status, count in counts.items():
        table.add_row(status, str(count))
    Console().print(table)
    _print_problems(problems)
    return 0
