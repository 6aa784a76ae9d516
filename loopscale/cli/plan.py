"""`loopscale plan OVERRIDES...`: training compute of a grid, forked (budget.mode=forks) vs independent runs.

For each job of the multirun (as `loopscale sweep` expands it): a forked job's points cost
F (D_parent + sum_i cooldown tokens_i) together, against F sum_i D_i as separate runs (loopscale/train/forks.py);
any other job is one point at its own C = F x D either way. Accounting, plus for CPU jobs a short measured
throughput probe of each model shape (loopscale/launch/throughput.py, cached per machine) for the CPU wall
time; nothing is trained.
"""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "plan",
        help="compute of a grid: forked WSD plan vs independent runs (dry run)",
        description="Expand `loopscale-train -m OVERRIDES` and print, per job and in total, the "
        "training FLOPs of its points trained as independent runs and as forked "
        "warmup-stable-decay branches (budget.mode=forks), and their ratio.",
    )
    p.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. experiment=isodepth_cpu_wsd")
    p.add_argument("--json", action="store_true", help="print one JSON line per job and one for the total")
    add_probe_argument(p)
    p.set_defaults(func=run)


def add_probe_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--no-probe",
        dest="probe",
        action="store_false",
        help="skip the CPU throughput probe (a few training steps of each CPU job's model on this machine, "
        "~0.5 s per model shape, cached in $LOOPSCALE_CACHE or ~/.cache/loopscale) and its CPU hours",
    )


def run(args: argparse.Namespace) -> int:
    import json

    from hydra.errors import HydraException

    from loopscale.cli import UsageError
    from loopscale.launch.sweep import plan_rows

    try:
        rows = plan_rows(args.overrides, probe=args.probe)
    except (HydraException, ValueError) as err:
        raise UsageError(str(err).splitlines()[0]) from err
    total = totals(rows)
    _warn_over_limits(rows)
    if args.json:
        for row in rows:
            print(json.dumps(row))
        print(json.dumps({"total": total}))
        return 0
    _print_table(rows, total)
    return 0


def totals(rows: list[dict]) -> dict:
    """The grid's jobs, points, FLOPs both ways, their ratio, GPU hours and (probed CPU jobs) CPU hours, with
    the wall time on the local pool (hydra/launcher=local_pool: one job per worker, cores // threads workers)."""
    C_independent, C_forked = sum(r["C_independent"] for r in rows), sum(r["C_forked"] for r in rows)
    return {
        "jobs": len(rows),
        "points": sum(r["points"] for r in rows),
        "C_independent": C_independent,
        "C_forked": C_forked,
        "ratio": C_independent / C_forked,
        "gpu_hours": sum(r["gpu_hours"] for r in rows),
        **cpu_totals(rows),
    }


def cpu_totals(rows: list[dict]) -> dict:
    """The probed CPU jobs' hours in one process, and the wall time on the local pool (hydra/launcher=local_pool:
    one job per worker, cores // threads workers): the hours shared out, but never less than the longest job,
    which no worker can split. It assumes the workers keep the probe's per-process speed (they share memory
    bandwidth, so it is a lower bound)."""
    from loopscale.machine import usable_cores

    cpu = [r for r in rows if r.get("cpu_hours") is not None]
    probe_s = sum(r.get("probe_s") or 0.0 for r in rows)
    if not cpu:
        return {"cpu_hours": None, "cpu_pool_workers": None, "cpu_pool_wall_h": None, "probe_s": probe_s}
    hours = sum(r["cpu_hours"] for r in cpu)
    workers = max(1, min(usable_cores() // max(r["cpu_threads"] for r in cpu), len(cpu)))
    wall_h = max(hours / workers, max(r["cpu_hours"] for r in cpu))
    return {"cpu_hours": hours, "cpu_pool_workers": workers, "cpu_pool_wall_h": wall_h, "probe_s": probe_s}


def _warn_over_limits(rows: list[dict]) -> None:
    import sys

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
    from rich.console import Console
    from rich.table import Table

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


def seed_line(rows: list[dict]) -> str | None:
    """What the seeds cost, in one line (loopscale plan and sweep; loopscale/launch/compile_order.seed_cost)."""
    from loopscale.launch.compile_order import seed_cost

    cost = seed_cost(rows)
    if cost is None:
        return None
    seeds = ", ".join(map(str, cost["seeds"]))
    if cost["further_seed_cpu_h"] is None:
        return f"seeds {seeds}: {cost['jobs_per_seed']} jobs each (CPU hours: not probed)"
    return (
        f"seeds {seeds}: {cost['jobs_per_seed']} jobs each; the first seed ~{_duration(cost['first_seed_cpu_h'])} "
        f"CPU, each further seed ~{_duration(cost['further_seed_cpu_h'])} (its models loaded from the compiled-graph "
        f"cache where compiled)"
    )


def cpu_line(total: dict) -> str:
    """The CPU estimate in one line (loopscale plan and loopscale sweep)."""
    if total["cpu_hours"] is None:
        return "CPU time: no CPU jobs probed (GPU trainers, or --no-probe)"
    return (
        f"CPU time: ~{_duration(total['cpu_hours'])} in one process at the probed speed (probe "
        f"{total['probe_s']:.1f} s, cached per machine); ~{_duration(total['cpu_pool_wall_h'])} wall on "
        f"hydra/launcher=local_pool with {total['cpu_pool_workers']} worker(s)"
    )


def _duration(hours: float) -> str:
    return f"{hours * 60:.0f} min" if hours < 1 else f"{hours:.1f} h"
