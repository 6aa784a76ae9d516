"""`loopscale tune experiment=X [model.recipe=Y]`: the experiment's lr rule, tuned on its own models (loopscale/
launch/tune.py), written to sweeps/lr_rules/X.yaml for every later sweep of X."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hydra.errors import HydraException
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from loopscale.cli import COMMANDS, UsageError
from loopscale.launch.local_workers import JobFailed
from loopscale.launch.tune import TuneGrid, TuneSettings, run_tune
from loopscale.launch.tune_text import rule_lines, rule_table


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tune",
        help=COMMANDS["tune"].help,
        description="For every r of the experiment's grid (one recipe a tune), train a log-spaced lr grid at "
        "two or more (budget, width) cells, fit each optimum (a parabola in ln lr, the noise pooled over the "
        "grids) with its 95%% interval, grow a grid whose optimum is on its edge, and write the per-r "
        "multipliers as the experiment's lr rule (sweeps/lr_rules/EXPERIMENT.yaml), which every later sweep "
        "of the experiment uses. The cost is printed before anything trains; runs resume and are reused; "
        "the same tune again is answered from the rule file.",
    )
    p.add_argument("overrides", nargs="*", help="Hydra overrides: experiment=X, model.recipe=Y, model.r=1,2,4,8, ...")
    p.add_argument(
        "--cells",
        default=None,
        help="comma-separated (budget, width) points to tune at, e.g. C2.5e11-d24,C5e11-d48 (default: the "
        "smallest budget at its middle width and the largest budget at its largest width; --axis loop: the "
        "smallest width at the smallest budget and the largest width at the largest budget, the widths its rule "
        "is read between)",
    )
    p.add_argument("--points", type=int, default=5, help="lrs in a first grid (default 5)")
    p.add_argument("--step", type=float, default=2**0.5, help="ratio of neighbouring lrs (default sqrt 2)")
    p.add_argument(
        "--centre", type=float, default=1.0, help="the first grid's middle multiplier (a power of --step; default 1)"
    )
    p.add_argument("--max-extend", type=int, default=3, help="times a grid may grow past an edge (default 3)")
    p.add_argument("--runs-dir", default="runs/tune", help="where the tuning runs go (default runs/tune)")
    p.add_argument("--out", type=Path, default=None, help="the rule file (default: the experiment's own)")
    p.add_argument("--workers", type=int, default=2, help="training processes side by side (default 2)")
    p.add_argument("--threads", type=int, default=1, help="torch threads per process (default 1)")
    p.add_argument(
        "--axis",
        choices=["lr", "loop"],
        default="lr",
        help="lr: every group's lr, the experiment's rule off (default); loop: the loop's matrices' lr over the "
        "other matrices' (optim.lr_loop), at the experiment's tuned lr, per r and width (one cell a width)",
    )
    p.add_argument("--dry-run", action="store_true", help="print the first grid's cost and stop")
    p.add_argument("--force", action="store_true", help="tune again although the rule file holds this tune")
    p.add_argument("--no-probe", dest="probe", action="store_false", help="no throughput probe (no CPU hours)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not any(o.partition("=")[0].lstrip("+~") == "experiment" for o in args.overrides):
        raise UsageError("name the experiment to tune: loopscale tune experiment=NAME [model.recipe=...]")
    if args.workers < 1 or args.threads < 1:
        raise UsageError(f"--workers {args.workers} and --threads {args.threads} must be >= 1")
    if args.max_extend < 0:
        raise UsageError(f"--max-extend {args.max_extend} must be >= 0")
    console = Console()
    try:
        settings = TuneSettings(
            overrides=args.overrides,
            cells=args.cells.split(",") if args.cells else None,
            grid=TuneGrid(points=args.points, step=args.step, centre=args.centre, max_extend=args.max_extend),
            runs_dir=args.runs_dir,
            out=args.out,
            workers=args.workers,
            threads_per_worker=args.threads,
            probe=args.probe,
            force=args.force,
            dry_run=args.dry_run,
            axis=args.axis,
        )
        result = run_tune(settings, say=console.print, progress=_bar(console))
    except JobFailed as err:
        print(f"loopscale tune: error: {err}; the finished runs are kept and reused next time", file=sys.stderr)
        return 1
    except HydraException as err:
        raise UsageError(str(err).splitlines()[0]) from err
    if result is not None:
        _print_rule(result, console)
    return 0


def _bar(console: Console):
    """progress(total) -> advance(): one bar over a round's training jobs (closed when the last one ends)."""

    def start(total: int):
        columns = [TextColumn("tuning runs"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()]
        bar = Progress(*columns, TimeRemainingColumn(), console=console)
        bar.start()
        task = bar.add_task("runs", total=total)

        def advance() -> None:
            bar.advance(task)
            if bar.tasks[0].completed >= total:
                bar.stop()

        return advance

    return start


def _print_rule(result, console: Console) -> None:
    columns, rows = rule_table(result)
    table = Table(title=f"lr rule: {result.rule_path}")
    for name in columns:
        table.add_column(name)
    for row in rows:
        table.add_row(*row)
    console.print(table)
    for line in rule_lines(result):
        console.print(line)
