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
    assert len(cache) == 4 and {e["key"]["host"] for e in cache.values()} == {socket.gethostname()}
    assert {e["key"]["model"]["d_model"] for e in cache.values()} == {r["d_model"] for r in rows}
    assert sorted(e["tokens_per_s"] for e in cache.values()) == sorted(r["cpu_tokens_per_s"] for r in rows)

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


def test_the_pools_wall_time_is_never_shorter_than_its_longest_job():
    """Jobs cannot be split between workers: one 10 h job and seven of 0.1 h take 10 h on two cores, not
    10.7 / 2; eight 1 h jobs take 4 h on two cores, 8 h on one (cli/plan.cpu_totals, used by both plan and
    sweep; the cores are this process's affinity mask, pinned here)."""
    import os

    from loopscale.cli.plan import cpu_totals

    long_and_short = [{"cpu_hours": 10.0, "cpu_threads": 1, "probe_s": 1.0}] + [
        {"cpu_hours": 0.1, "cpu_threads": 1, "probe_s": 0.5} for _ in range(7)
    ]
    equal = [{"cpu_hours": 1.0, "cpu_threads": 1, "probe_s": 0.0} for _ in range(8)]
    cores = sorted(os.sched_getaffinity(0))
    try:
        os.sched_setaffinity(0, cores[:1])
        total = cpu_totals(long_and_short)
        assert total["cpu_hours"] == pytest.approx(10.7) and total["probe_s"] == pytest.approx(4.5)
        assert total["cpu_pool_workers"] == 1 and total["cpu_pool_wall_h"] == pytest.approx(10.7)
        assert cpu_totals(equal)["cpu_pool_wall_h"] == pytest.approx(8.0)
        if len(cores) >= 2:
            os.sched_setaffinity(0, cores[:2])
            total = cpu_totals(long_and_short)
            assert total["cpu_pool_workers"] == 2 and total["cpu_pool_wall_h"] == pytest.approx(10.0)
            assert cpu_totals(equal)["cpu_pool_wall_h"] == pytest.approx(4.0)
            two_threads = [{**row, "cpu_threads": 2} for row in equal]  # one worker of two threads
            assert cpu_totals(two_threads)["cpu_pool_wall_h"] == pytest.approx(8.0)
    finally:
        os.sched_setaffinity(0, cores)
    assert cpu_totals([{"cpu_hours": None, "probe_s": None}])["cpu_pool_wall_h"] is None
