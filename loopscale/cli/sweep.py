"""`loopscale sweep OVERRIDES...`: list the jobs a multirun would launch, with their accounting (dry run)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sweep",
        help="dry run: list the jobs of a Hydra multirun and their N, D, C",
        description="Expand `loopscale-train -m OVERRIDES` without launching anything: one row "
        "per job with its run name, r, width, N_once, N_rec, D, steps, device batch x "
        "accumulation, predicted peak memory per device (loopscale/model/memory.py) and estimated GPU hours; "
        "warns (stderr) about GPU jobs that would not fit trainer.plan_device or cannot finish within the "
        "launcher's timeout x (max requeues + 1): the SLURM launcher refuses those.",
    )
    p.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. experiment=isodepth model.r=1,2")
    p.add_argument(
        "--count",
        action="store_true",
        help="print only the number of jobs (fast: expands the grid without composing each job)",
    )
    p.add_argument("--json", action="store_true", help="print the jobs as JSON lines")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import json

    from hydra.errors import HydraException

    from loopscale.cli import UsageError
    from loopscale.config.schema import with_vocab
    from loopscale.launch.estimate import launcher_limits_of, print_limit_warnings
    from loopscale.launch.sweep import describe, expand, sweep_overrides

    try:
        if args.count:
            # The launcher starts one job per override list; composing all of them (~0.1 s each with Hydra)
            # is only needed for the table, where a job whose config is invalid is reported.
            print(len(sweep_overrides(args.overrides)))
            return 0
        jobs = expand(args.overrides)
        limits = launcher_limits_of(args.overrides)
        rows = [describe(job, limits) for job in jobs]
    except (HydraException, ValueError) as err:
        raise UsageError(str(err).splitlines()[0]) from err
    print_limit_warnings([with_vocab(job.cfg, job.cfg.data.vocab_size) for job in jobs], limits)
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return 0
    _print_table(rows)
    return 0


def _print_table(rows: list[dict]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{len(rows)} jobs")
    columns = (
        "run_name",
        "r",
        "recipe",
        "d_model",
        "N_once",
        "N_rec",
        "D",
        "steps",
        "C",
        "batch",
        "peak GiB",
        "GPU h",
    )
    for col in columns:
        table.add_column(col, justify="left" if col in ("run_name", "recipe") else "right")
    for row in rows:
        # batch: world x device batch x accumulation (sequences per optimizer step)
        table.add_row(
            row["run_name"],
            str(row["r"]),
            row["recipe"],
            str(row["d_model"]),
            f"{row['N_once']:,}",
            f"{row['N_rec']:,}",
            f"{row['D']:.3g}",
            f"{row['steps']:,}",
            f"{row['C']:.3g}",
            f"{row['world']}x{row['device_batch']}x{row['grad_accum']}",
            f"{row['peak_gib']:.1f}" + ("" if row["fits_memory"] else " !"),
            f"{row['gpu_hours']:.1f}" + ("" if row["fits_limits"] else " !"),
        )
    Console(width=max(Console().width, 140)).print(table)
