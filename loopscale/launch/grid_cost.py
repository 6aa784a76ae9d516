"""A grid's cost on the local pool, before anything is trained: one row per job (`launch/sweep.plan_rows`: FLOPs
trained forked and as independent runs, GPU hours, probed CPU hours), the pool the jobs will run on (its size and
what the probes measured), the totals of any set of rows (`loopscale plan`, `sweep`, `power`) and their one-line
summaries (a further seed's cost, the lr grid's, the CPU hours)."""

from __future__ import annotations

import contextlib
import dataclasses

from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from loopscale.config.dirs import compose
from loopscale.launch.compile_order import seed_cost
from loopscale.launch.pool_launcher import pool_size
from loopscale.launch.sweep import plan_rows, sweep_overrides
from loopscale.launch.throughput import CACHE_FILE, cache_dir, core_share, pool_contention, probe_shares, worker_start_s
from loopscale.launch.wall_time import PoolPlan, expected_share, others_load, pool_wall_s, tokenize_cpu_s
from loopscale.machine import usable_cores


def plan_totals(overrides: list[str], probe: bool = True) -> tuple[list[dict], dict]:
    """(one row per job, the totals) of a multirun on the local pool: FLOPs both ways, GPU hours and, with the
    probe, CPU hours and the pool's wall time (what `loopscale plan` prints)."""
    rows, pool = pool_rows(overrides, probe)
    return rows, totals(rows, pool)


def pool_rows(overrides: list[str], probe: bool = True) -> tuple[list[dict], PoolPlan]:
    """(one row per job, the local pool with what its probes measured): `totals(rows, pool)` of any set of these
    rows is their cost (`loopscale power` prices a design with a second recipe's copy of its looped jobs)."""
    overrides, pool = pool_plan(overrides)
    with _contention(pool, probe):  # probes measured as the pool's workers will run (throughput.py)
        rows = plan_rows(overrides, probe=probe)
        pool = _measured(pool, rows, overrides)
    return rows, pool


def pool_plan(overrides: list[str]) -> tuple[list[str], PoolPlan]:
    """(the overrides the jobs run with on the local pool, its size): hydra.launcher.workers and
    threads_per_worker as given (with hydra/launcher=local_pool), else the pool's defaults from the core count
    (launch/pool_launcher.pool_size, the pool's own rule); threads set each job's trainer.num_threads, as the
    pool does."""
    given = OverridesParser.create().parse_overrides(overrides)
    cfg = compose([o.input_line for o in given if not o.is_sweep_override()], return_hydra_config=True)
    launcher = cfg.hydra.launcher
    local_pool = str(launcher.get("_target_", "")).endswith("LocalPoolLauncher")
    workers = launcher.get("workers") if local_pool else None
    threads = launcher.get("threads_per_worker") if local_pool else None
    if threads is None:
        job_threads = OmegaConf.select(cfg, "trainer.num_threads", default=None)
        threads = job_threads if isinstance(job_threads, int) and job_threads > 0 else None
    workers, threads = pool_size(workers, threads, len(sweep_overrides(overrides)), usable_cores())
    load = others_load()  # before the probes' own processes add to it
    return [*overrides, f"trainer.num_threads={threads}"], PoolPlan(workers, threads, load=load)


def _contention(pool: PoolPlan, probe: bool):
    return pool_contention(pool.workers, pool.threads) if probe else contextlib.nullcontext()


def _measured(pool: PoolPlan, rows: list[dict], overrides: list[str]) -> PoolPlan:
    """The pool with what the probes measured: a worker's start, the core share, the first tokenizing."""
    if not any(r.get("cpu_hours") is not None for r in rows):
        return pool
    for row, probed_share in zip([r for r in rows if r.get("cpu_hours") is not None], probe_shares()):
        row["cpu_core_share"] = probed_share  # the share its tokens/s was measured at (one probe per CPU job)
    start_s, start_share = worker_start_s(pool.threads)
    probed = core_share() or 1.0  # what the probes got, for the second they ran (or when they were cached)
    share = expected_share(pool.load, pool.workers, pool.threads, usable_cores())
    return dataclasses.replace(
        pool,
        start_s=start_s * start_share / share,  # wall seconds at the share they were measured at, at the sweep's
        core_share=share,
        speed_scale=probed / share,
        tokenize_s=tokenize_cpu_s(overrides) / share,
    )


def totals(rows: list[dict], pool: PoolPlan | None = None) -> dict:
    """The grid's jobs, points, FLOPs both ways, their ratio, GPU hours and (probed CPU jobs) CPU hours, with
    the wall time on the local pool (pool_wall_h)."""
    C_independent, C_forked = sum(r["C_independent"] for r in rows), sum(r["C_forked"] for r in rows)
    return {
        "jobs": len(rows),
        "points": sum(r["points"] for r in rows),
        "C_independent": C_independent,
        "C_forked": C_forked,
        "ratio": C_independent / C_forked,
        "gpu_hours": sum(r["gpu_hours"] for r in rows),
        **cpu_totals(rows, pool),
    }


def cpu_totals(rows: list[dict], pool: PoolPlan | None = None) -> dict:
    """The probed CPU jobs' hours in one process, and the sweep's wall time on the local pool
    (hydra/launcher=local_pool) with `pool`'s workers (default: the pool's own default size, nothing
    measured beyond the probes): launch/wall_time.pool_wall_s."""
    cpu = [r for r in rows if r.get("cpu_hours") is not None]
    probe_s = sum(r.get("probe_s") or 0.0 for r in rows)
    if not cpu:
        return {"cpu_hours": None, "cpu_pool_workers": None, "cpu_pool_wall_h": None, "probe_s": probe_s}
    hours = sum(r["cpu_hours"] for r in cpu)
    if pool is None:
        threads = max(r["cpu_threads"] for r in cpu)
        pool = PoolPlan(max(1, min(usable_cores() // threads, len(cpu))), threads)
    # each job's probed hours at the share its probe got, as at the share the sweep will get
    scales = [r["cpu_core_share"] / pool.core_share if r.get("cpu_core_share") else pool.speed_scale for r in cpu]
    wall_s = pool_wall_s([r["cpu_hours"] * 3600 * k for r, k in zip(cpu, scales)], [r["points"] for r in cpu], pool)
    return {
        "cpu_hours": hours,
        "cpu_pool_workers": pool.workers,
        "cpu_pool_threads": pool.threads,
        "cpu_pool_wall_h": wall_s / 3600,
        "probe_s": probe_s,
        "core_share": pool.core_share,
        "worker_start_s": pool.start_s,
        "tokenize_s": pool.tokenize_s,
        "load": pool.load,
    }


def seed_line(rows: list[dict]) -> str | None:
    """What the seeds cost, in one line (loopscale plan and sweep; loopscale/launch/compile_order.seed_cost)."""
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


def lr_grid_line(rows: list[dict]) -> str | None:
    """The lr grid's cost (hydra/sweeper=lr_grid: the jobs with optim.lr_scale != 1) against the grid's, or None
    without one: what the lr-confound check adds to a sweep, said before anything is launched."""
    extra = [row for row in rows if row["lr_scale"] != 1.0]
    if not extra:
        return None
    grid_flops = sum(row["C"] for row in rows if row["lr_scale"] == 1.0)
    extra_flops = sum(row["C"] for row in extra)
    multipliers = sorted({round(row["lr_scale"], 3) for row in extra})
    budgets = sorted({row["C_budget"] for row in extra if row["C_budget"] is not None})
    where = f" at C = {', '.join(f'{b:.3g}' for b in budgets)}" if budgets else ""
    hours = [row.get("cpu_hours") for row in extra]
    cpu = f", {sum(hours):.3g} CPU h" if hours and all(h is not None for h in hours) else ""
    share = f"{100 * extra_flops / grid_flops:.1f}% of the grid's {grid_flops:.3g} FLOPs" if grid_flops else "no grid"
    return (
        f"lr grid: {len(extra)} extra jobs{where}, lr x {', '.join(f'{m:g}' for m in multipliers)} "
        f"(x1 is the grid's run): {extra_flops:.3g} FLOPs = {share}{cpu}"
    )


def over_limit_lines(rows: list[dict]) -> list[str]:
    """A warning per job that cannot finish within its launcher's limits (`loopscale plan`, on stderr)."""
    return [
        f"WARNING: job {r['run_name']} needs ~{r['wall_h']:.1f} h but the launcher allows "
        f"{r['allowed_h']:.1f} h (timeout x (max requeues + 1), less requeue losses)"
        for r in rows
        if not r["fits_limits"]
    ]


# `loopscale plan`'s table: one row per job, every cell one number
PLAN_COLUMNS = ("run_name", "r", "d_model", "points", "steps", "longest", "C independent", "C forked", "ratio", "GPU h")
PLAN_COLUMNS += ("CPU tok/s", "CPU h", "compile")


def plan_cells(r: dict) -> list[str]:
    """A job's row of `loopscale plan`'s table: steps = the optimizer steps the job trains (a forked job: its parent
    to the last fork plus each cooldown), longest = its longest point's steps (the JSON lists each point's steps
    and fork step)."""
    return [
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
    ]


def plan_lines(rows: list[dict], total: dict) -> list[str]:
    """The lines below `loopscale plan`'s table: the total compute forked and independent, the CPU hours, a
    further seed's cost."""
    lines = [
        f"total training compute: independent {total['C_independent']:.4g} FLOPs, forked {total['C_forked']:.4g} "
        f"FLOPs: {total['ratio']:.2f}x cheaper; ~{total['gpu_hours']:.3g} GPU hours at the assumed MFU",
        cpu_line(total),
    ]
    return lines + [line for line in [seed_line(rows)] if line]


# `loopscale sweep`'s table: one row per job
SWEEP_COLUMNS = ("run_name", "r", "recipe", "d_model", "N_once", "N_rec", "points", "D", "steps", "C", "batch")
SWEEP_COLUMNS += ("peak GiB", "GPU h", "CPU h", "compile")


def sweep_cells(row: dict) -> list[str]:
    """A job's row of `loopscale sweep`'s table (`sweep.describe`): a forked job's points, D, steps and C are its
    own (the parent to its last fork plus every cooldown); batch: world x device batch x accumulation (sequences
    per optimizer step)."""
    return [
        row["run_name"],
        str(row["r"]),
        row["recipe"],
        str(row["d_model"]),
        str(row["N_once"]),
        str(row["N_rec"]),
        str(row["points"]),
        f"{row['D']:.3g}",
        str(row["steps"]),
        f"{row['C']:.3g}",
        f"{row['world']}x{row['device_batch']}x{row['grad_accum']}",
        f"{row['peak_gib']:.1f}" + ("" if row["fits_memory"] else " !"),
        f"{row['gpu_hours']:.1f}" + ("" if row["fits_limits"] else " !"),
        "-" if row.get("cpu_hours") is None else f"{row['cpu_hours']:.3g}",
        str(row["compile"]),
    ]


def sweep_lines(rows: list[dict]) -> list[str]:
    """The lines below `loopscale sweep`'s table: the CPU hours, a further seed's cost, the lr grid's."""
    return [cpu_line(cpu_totals(rows)), *(line for line in (seed_line(rows), lr_grid_line(rows)) if line)]


def cpu_line(total: dict) -> str:
    """The CPU estimate in one line (loopscale plan and loopscale sweep)."""
    if total["cpu_hours"] is None:
        return "CPU time: no CPU jobs probed (GPU trainers, or --no-probe)"

    tokenize = f", first tokenizing ~{total['tokenize_s']:.0f} s" if total.get("tokenize_s") else ""
    return (
        f"CPU time: ~{_duration(total['cpu_hours'])} in one process at the probed speed (probe "
        f"{total['probe_s']:.1f} s, cached in {cache_dir() / CACHE_FILE}); ~{_duration(total['cpu_pool_wall_h'])} "
        f"wall on hydra/launcher=local_pool with {total['cpu_pool_workers']} worker(s) x "
        f"{total.get('cpu_pool_threads') or 1} thread(s) (a worker's start ~{total.get('worker_start_s') or 0:.0f} s"
        f"{tokenize}; at load {total.get('load') or 0:.1f}, {(total.get('core_share') or 1) * 100:.0f}% of a core "
        "per process)"
    )


def _duration(hours: float) -> str:
    if hours * 60 < 2:
        return f"{hours * 3600:.0f} s"
    return f"{hours * 60:.0f} min" if hours < 1 else f"{hours:.1f} h"
