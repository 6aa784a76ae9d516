"""Issue 29 (5): cost before launch. `loopscale plan` / `sweep` estimate a CPU job's wall time from a measured
throughput probe of its own model (loopscale/launch/throughput.py), cached per machine in $LOOPSCALE_CACHE;
plan's table cells read as numbers (no comma-joined step lists); `sweep` shows a forked job's own C (its
parent and every cooldown), not its parent's. In-process, real models, a real cache file."""

from __future__ import annotations

import json
import re
import socket
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.cli import run_cli

DEMO_R1 = ["experiment=isodepth_cpu_demo", "model.r=1"]  # 4 forked CPU jobs, one per width


def _json_lines(res):
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr[-3000:]
    return [json.loads(line) for line in res.stdout.splitlines()]


@dataclass(frozen=True)
class Probed:
    """The module's one real measurement: `plan DEMO_R1 --json` in an empty cache (4 probes under the pool's
    contention, a worker's start timed), its rows and total, and the cache file as that plan left it."""

    env: dict
    rows: list
    total: dict
    cache: dict


@pytest.fixture(scope="module")
def probed(tmp_path_factory) -> Probed:
    """Measured once for the module (a probe round starts a process importing Lightning: the slow part);
    the tests after it read the same cache, as a user's second plan does."""
    folder = tmp_path_factory.mktemp("probe_cache")
    env = {"LOOPSCALE_CACHE": str(folder)}
    *rows, total = _json_lines(run_cli(["plan", *DEMO_R1, "--json"], env=env))
    return Probed(env, rows, total["total"], json.loads((folder / "throughput.json").read_text()))


def test_plan_probes_cpu_throughput_once_per_machine(probed):
    rows, env = probed.rows, probed.env
    assert len(rows) == 4
    for row in rows:
        assert row["cpu_tokens_per_s"] > 0 and row["probe_cached"] is False and row["cpu_threads"] == 1
        assert row["cpu_hours"] == pytest.approx(row["tokens"] / row["cpu_tokens_per_s"] / 3600)
    assert probed.total["cpu_hours"] == pytest.approx(sum(r["cpu_hours"] for r in rows))
    probes = [e for e in probed.cache.values() if "model" in e["key"]]  # and a worker's start, timed once
    starts = [e for e in probed.cache.values() if e["key"].get("worker_start")]
    assert len(probes) == 4 and len(starts) == 1 and len(probed.cache) == 5
    assert {e["key"]["host"] for e in probed.cache.values()} == {socket.gethostname()}
    assert {e["key"]["model"]["d_model"] for e in probes} == {r["d_model"] for r in rows}
    assert all(0 < e["share"] <= 1 for e in probes)
    assert sorted(e["tokens_per_s"] for e in probes) == sorted(r["cpu_tokens_per_s"] for r in rows)
    start_s = probed.total["worker_start_s"] * probed.total["core_share"] / starts[0]["share"]  # at the sweep's share
    assert starts[0]["start_s"] == pytest.approx(start_s)

    *again, total_again = _json_lines(run_cli(["plan", *DEMO_R1, "--json"], env=env))  # measured nothing
    assert [r["probe_cached"] for r in again] == [True] * 4 and total_again["total"]["probe_s"] == 0
    assert [r["cpu_tokens_per_s"] for r in again] == [r["cpu_tokens_per_s"] for r in rows]

    *skipped, _ = _json_lines(run_cli(["plan", *DEMO_R1, "--json", "--no-probe"], env=env))
    assert {r["cpu_hours"] for r in skipped} == {None}


def test_plan_table_cells_read_as_numbers(probed):
    res = run_cli(["plan", *DEMO_R1], env=probed.env)
    assert res.returncode == 0, res.stderr
    body = [line for line in res.stdout.splitlines() if line.startswith("│ baseline-")]
    assert len(body) == 4
    for line in body:
        cells = [c.strip() for c in line.strip("│").split("│")]
        for cell in cells[1:-1]:  # every column but the run name and the compile choice is one number
            float(cell)
        assert cells[-1] in ("compiles", "cached", "eager")
    assert "CPU time: ~" in res.stdout and "hydra/launcher=local_pool" in res.stdout


def test_sweep_shows_a_forked_jobs_own_compute(tmp_path):
    """A forked job costs its parent's stable phase up to the largest budget plus a cooldown of c = 0.2 of each
    branch: C = (1 - c) max C_i + c sum C_i (docs/operations.md, forked sweeps), to the step's rounding; the
    demo's r = 1 jobs: d16 branches at 2.5e11 and 3.54e11, the others at 2.5e11, 3.54e11 and 5e11."""
    rows = _json_lines(run_cli(["sweep", *DEMO_R1, "--json", "--no-probe"]))
    # the demo's jobs carry the tuned lr rule's multiplier in their names (-lrt<x>)
    rows = {re.sub(r"-lrt[0-9.]+$", "", row["run_name"]): row for row in rows}
    expected = {
        "baseline-r1-d16": (2, 0.8 * 3.54e11 + 0.2 * (2.5e11 + 3.54e11)),  # 4.04e11
        "baseline-r1-d24": (3, 0.8 * 5e11 + 0.2 * (2.5e11 + 3.54e11 + 5e11)),  # 6.208e11
        "baseline-r1-d32": (3, 6.208e11),
        "baseline-r1-d48": (3, 6.208e11),
    }
    assert set(rows) == set(expected)
    for name, (points, C) in expected.items():
        row = rows[name]
        assert row["points"] == points and row["C"] == pytest.approx(C, rel=0.005), row
        assert row["C_budget"] != row["C"]  # not the parent's budget alone


def test_the_pools_wall_time_is_its_list_schedule():
    """Jobs cannot be split between workers and are handed out longest first to the first free worker
    (issue 41, 7): 3 equal jobs on 2 workers take 2 job-lengths, not 1.5; one long job and many short ones
    take the long one's time. Plus each job's set-up (at the pool's core share) and the workers' start."""
    from loopscale.launch.grid_cost import cpu_totals
    from loopscale.launch.wall_time import JOB_SETUP_CPU_S, POINT_CPU_S, PoolPlan, list_schedule_s

    job = {"cpu_hours": 1.0, "cpu_threads": 1, "probe_s": 1.0, "points": 1}
    pool = PoolPlan(workers=2, threads=1)
    setup_h = (JOB_SETUP_CPU_S + POINT_CPU_S) / 3600
    assert cpu_totals([job] * 3, pool)["cpu_pool_wall_h"] == pytest.approx(2 * (1 + setup_h))
    # the rows in any order: the pool hands out the 2-hour job first, so 2 + 2 set-ups, not 1 + 2 after 1 (blind 3)
    short_first = [{**job, "cpu_hours": 1.0}, {**job, "cpu_hours": 1.0}, {**job, "cpu_hours": 2.0}]
    assert cpu_totals(short_first, pool)["cpu_pool_wall_h"] == pytest.approx(2 + 2 * setup_h)
    assert list_schedule_s([10, 1, 1, 1, 1, 1, 1, 1], 2) == 10
    assert list_schedule_s([3, 3, 2, 2, 2], 2) == 7  # longest first: 3+2+2 on one worker, 3+2 on the other
    assert list_schedule_s([1.0], 2, busy_s=[5.0, 0.5]) == 5.0  # the ETA: a job still running first
    # a busier machine: the same CPU work at half the core share takes twice the wall time, start included
    busy = PoolPlan(workers=2, threads=1, start_s=10.0, core_share=0.5)
    slow = cpu_totals([{**job, "cpu_core_share": 1.0}] * 3, busy)["cpu_pool_wall_h"] * 3600
    assert slow == pytest.approx(10 + 10 + 2 * (2 * 3600 + (JOB_SETUP_CPU_S + POINT_CPU_S) / 0.5))
    assert cpu_totals([{"cpu_hours": None, "probe_s": None}])["cpu_pool_wall_h"] is None


def test_plan_honours_the_pools_workers_and_threads(probed):
    """Probed again at 2 threads (their own cache keys), with the worker's start the module's plan timed: a
    pool of one worker starts one process, as a pool of two does (one starts beside the plan), so nothing
    new is started for it."""
    pool = ["hydra/launcher=local_pool", "hydra.launcher.workers=1", "hydra.launcher.threads_per_worker=2"]
    d16 = [*DEMO_R1, "point=C2.5e11_3.54e11-d16"]  # one job: a 2-thread probe is slow on a busy 2-core machine
    *rows, total = _json_lines(run_cli(["plan", *d16, *pool, "--json"], env=probed.env))
    assert total["total"]["cpu_pool_workers"] == 1 and total["total"]["cpu_pool_threads"] == 2
    assert [(r["d_model"], r["cpu_threads"]) for r in rows] == [(16, 2)]  # probed at the job's own threads
    assert [r["probe_cached"] for r in rows] == [False]  # not the module plan's 1-thread number
    cache = json.loads((Path(probed.env["LOOPSCALE_CACHE"]) / "throughput.json").read_text())
    assert [e for e in cache.values() if e["key"].get("worker_start")] == [
        e for e in probed.cache.values() if e["key"].get("worker_start")
    ]
    res = run_cli(["plan", *d16, *pool], env=probed.env)
    assert "with 1 worker(s) x 2 thread(s)" in res.stdout, res.stdout[-2000:]


def test_plan_shows_each_jobs_compile_and_the_cost_of_seeds(tmp_path):
    """seed=0,1,2 on one model: the first seed compiles for all three or none does (loopscale/launch/
    compile_order.py); the further seeds cost no more than the first; the table says what a seed costs."""
    args = [*DEMO_R1, "point=C2.5e11_3.54e11-d16", "seed=0,1,2"]
    env = {"LOOPSCALE_CACHE": str(tmp_path / "cache")}
    *rows, _ = _json_lines(run_cli(["plan", *args, "--json"], env=env))
    assert [r["seed"] for r in rows] == [0, 1, 2]
    labels = [r["compile"] for r in rows]
    assert labels in (["compiles", "cached", "cached"], ["eager"] * 3), labels
    res = run_cli(["plan", *args], env=env)
    assert res.returncode == 0, res.stderr
    line = next(line for line in res.stdout.splitlines() if line.startswith("seeds 0, 1, 2:"))
    assert "1 jobs each" in line and "each further seed ~" in line
