"""Issue 29 (5): cost before launch. `loopscale plan` / `sweep` estimate a CPU job's wall time from a measured
throughput probe of its own model (loopscale/launch/throughput.py), cached per machine in $LOOPSCALE_CACHE;
plan's table cells read as numbers (no comma-joined step lists); `sweep` shows a forked job's own C (its
parent and every cooldown), not its parent's. In-process, real models, a real cache file."""

from __future__ import annotations

import json
import socket

import pytest

from support.cli import run_cli

DEMO_R1 = ["experiment=isodepth_cpu_demo", "model.r=1"]  # 4 forked CPU jobs, one per width


def _json_lines(res):
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr[-3000:]
    return [json.loads(line) for line in res.stdout.splitlines()]


def test_plan_probes_cpu_throughput_once_per_machine(tmp_path):
    env = {"LOOPSCALE_CACHE": str(tmp_path / "cache")}
    *rows, total = _json_lines(run_cli(["plan", *DEMO_R1, "--json"], env=env))
    assert len(rows) == 4
    for row in rows:
        assert row["cpu_tokens_per_s"] > 0 and row["probe_cached"] is False and row["cpu_threads"] == 1
        assert row["cpu_hours"] == pytest.approx(row["tokens"] / row["cpu_tokens_per_s"] / 3600)
    assert total["total"]["cpu_hours"] == pytest.approx(sum(r["cpu_hours"] for r in rows))
    cache = json.loads((tmp_path / "cache" / "throughput.json").read_text())
    probes = [e for e in cache.values() if "model" in e["key"]]  # and a worker's start, timed once
    assert len(probes) == 4 and {e["key"]["host"] for e in cache.values()} == {socket.gethostname()}
    assert {e["key"]["model"]["d_model"] for e in probes} == {r["d_model"] for r in rows}
    assert all(0 < e["share"] <= 1 for e in probes)
    assert sorted(e["tokens_per_s"] for e in probes) == sorted(r["cpu_tokens_per_s"] for r in rows)

    *again, total_again = _json_lines(run_cli(["plan", *DEMO_R1, "--json"], env=env))  # measured nothing
    assert [r["probe_cached"] for r in again] == [True] * 4 and total_again["total"]["probe_s"] == 0
    assert [r["cpu_tokens_per_s"] for r in again] == [r["cpu_tokens_per_s"] for r in rows]

    *skipped, _ = _json_lines(run_cli(["plan", *DEMO_R1, "--json", "--no-probe"], env=env))
    assert {r["cpu_hours"] for r in skipped} == {None}


def test_plan_table_cells_read_as_numbers(tmp_path):
    res = run_cli(["plan", *DEMO_R1], env={"LOOPSCALE_CACHE": str(tmp_path / "cache")})
    assert res.returncode == 0, res.stderr
    body = [line for line in res.stdout.splitlines() if line.startswith("│ baseline-")]
    assert len(body) == 4
    for line in body:
        cells = [c.strip() for c in line.strip("│").split("│")]
        for cell in cells[1:]:  # every column but the run name is one number
            float(cell)
    assert "CPU time: ~" in res.stdout and "hydra/launcher=local_pool" in res.stdout


def test_sweep_shows_a_forked_jobs_own_compute(tmp_path):
    """A forked job costs its parent's stable phase up to the largest budget plus a cooldown of c = 0.2 of each
    branch: C = (1 - c) max C_i + c sum C_i (docs/operations.md, forked sweeps), to the step's rounding; the
    demo's r = 1 jobs: d16 branches at 2.5e11 and 3.54e11, the others at 2.5e11, 3.54e11 and 5e11."""
    rows = {row["run_name"]: row for row in _json_lines(run_cli(["sweep", *DEMO_R1, "--json", "--no-probe"]))}
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
    from loopscale.cli.plan import cpu_totals
    from loopscale.launch.wall_time import JOB_SETUP_CPU_S, POINT_CPU_S, PoolPlan, list_schedule_s

    job = {"cpu_hours": 1.0, "cpu_threads": 1, "probe_s": 1.0, "points": 1}
    pool = PoolPlan(workers=2, threads=1)
    setup_h = (JOB_SETUP_CPU_S + POINT_CPU_S) / 3600
    assert cpu_totals([job] * 3, pool)["cpu_pool_wall_h"] == pytest.approx(2 * (1 + setup_h))
    assert list_schedule_s([10, 1, 1, 1, 1, 1, 1, 1], 2) == 10
    assert list_schedule_s([3, 3, 2, 2, 2], 2) == 7  # longest first: 3+2+2 on one worker, 3+2 on the other
    assert list_schedule_s([1.0], 2, busy_s=[5.0, 0.5]) == 5.0  # the ETA: a job still running first
    # a busier machine: the same CPU work at half the core share takes twice the wall time, start included
    busy = PoolPlan(workers=2, threads=1, start_s=10.0, core_share=0.5)
    slow = cpu_totals([{**job, "cpu_core_share": 1.0}] * 3, busy)["cpu_pool_wall_h"] * 3600
    assert slow == pytest.approx(10 + 10 + 2 * (2 * 3600 + (JOB_SETUP_CPU_S + POINT_CPU_S) / 0.5))
    assert cpu_totals([{"cpu_hours": None, "probe_s": None}])["cpu_pool_wall_h"] is None


def test_plan_honours_the_pools_workers_and_threads(tmp_path):
    env = {"LOOPSCALE_CACHE": str(tmp_path / "cache")}
    pool = ["hydra/launcher=local_pool", "hydra.launcher.workers=1", "hydra.launcher.threads_per_worker=2"]
    *rows, total = _json_lines(run_cli(["plan", *DEMO_R1, *pool, "--json"], env=env))
    assert total["total"]["cpu_pool_workers"] == 1 and total["total"]["cpu_pool_threads"] == 2
    assert {r["cpu_threads"] for r in rows} == {2}  # probed at the threads each job will train with
    res = run_cli(["plan", *DEMO_R1, *pool], env=env)
    assert "with 1 worker(s) x 2 thread(s)" in res.stdout, res.stdout[-2000:]
