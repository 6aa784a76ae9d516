"""`loopscale plan OVERRIDES...`: training compute of a grid, forked (budget.mode=forks) vs independent runs.

For each job of the multirun (as `loopscale sweep` expands it): a forked job's points cost
F (D_parent + sum_i cooldown tokens_i) together, against F sum_i D_i as separate runs (loopscale/train/forks.py);
any other job is one point at its own C = F x D either way. Accounting only; nothing is trained.
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
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import json

    from hydra.errors import HydraException

    from loopscale.cli import UsageError
    from loopscale.launch.sweep import plan_rows

    try:
        rows = plan_rows(args.overrides)
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
    """The grid's jobs, points, FLOPs both ways, their ratio and GPU hours."""
    C_independent, C_forked = sum(r["C_independent"] for r in rows), sum(r["C_forked"] for r in rows)
    return {
        "jobs": len(rows),
        "points": sum(r["points"] for r in rows),
        "C_independent": C_independent,
        "C_forked": C_forked,
        "ratio": C_independent / C_forked,
        "gpu_hours": sum(r["gpu_hours"] for r in rows),
    }


def _warn_over_limits(rows: list[dict]) -> None:
    import sys

    for r in rows:
        if not r["fits_limits"]:
            print(
                f"WARNING: job {r['run_name']} needs ~{r['wall_h']:.1f} h but the launcher allows "
                f"{r['allowed_h']:.1f} h (timeout x (max requeues + 1), less requeue losses)",
                file=sys.stderr,
            )


COLUMNS = ("run_name", "r", "d_model", "points", "steps", "fork at", "C independent", "C forked", "ratio", "GPU h")


def _print_table(rows: list[dict], total: dict) -> None:
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
            ",".join(map(str, r["steps"])),
            ",".join(map(str, r["fork_steps"])) or "-",
            f"{r['C_independent']:.4g}",
            f"{r['C_forked']:.4g}",
            f"{r['C_independent'] / r['C_forked']:.2f}x",
            f"{r['gpu_hours']:.1f}" + ("" if r["fits_limits"] else " !"),
        )
    Console(width=max(Console().width, 140)).print(table)
    print(
        f"total training compute: independent {total['C_independent']:.4g} FLOPs, forked {total['C_forked']:.4g} "
        f"FLOPs: {total['ratio']:.2f}x cheaper; ~{total['gpu_hours']:.0f} GPU hours at the assumed MFU"
    )
