"""Issue 29 (5): cost before launch. `loopscale plan` / `sweep` estimate a CPU job's wall time from a measured
throughput probe of its own model (loopscale/launch/throughput.py), cached per machine in $LOOPSCALE_CACHE;
plan's table cells read as numbers (no comma-joined step lists); `sweep` shows a forked job's own C (its
parent and every cooldown), not its parent's. In-process, real models, a real cache file."""

from __future__ import annotations

import json
import socket

import pytest

from loopscale.config.schema import with_vocab
from loopscale.launch.sweep import expand
from loopscale.train.plan import plan_forks, plan_run
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
        for cell in cells[1:-1]:  # every column but the run name and the compile choice is one number
            float(cell)
        assert cells[-1] in ("compiles", "cached", "eager")
    assert "CPU time: ~" in res.stdout and "hydra/launcher=local_pool" in res.stdout


def test_sweep_shows_a_forked_jobs_own_compute(tmp_path):
    rows = _json_lines(run_cli(["sweep", *DEMO_R1, "--json", "--no-probe"]))
    for row, job in zip(rows, expand(DEMO_R1)):
        cfg = with_vocab(job.cfg, job.cfg.data.vocab_size)
        forks = plan_forks(cfg)
        assert row["run_name"] == cfg.run_name and row["points"] == len(forks.branches)
        assert row["C"] == pytest.approx(forks.C_forked) and row["C"] > plan_run(cfg).C  # not the parent's alone
        assert row["D"] == round(forks.C_forked / forks.F)


def test_the_pools_wall_time_is_never_shorter_than_its_longest_job():
    """Jobs cannot be split between workers: one long job and many short ones take at least the long one's
    hours, not the hours shared out (cli/plan.cpu_totals, used by both plan and sweep)."""
    from loopscale.cli.plan import cpu_totals
    from loopscale.machine import usable_cores

    rows = [{"cpu_hours": 10.0, "cpu_threads": 1, "probe_s": 1.0}] + [
        {"cpu_hours": 0.1, "cpu_threads": 1, "probe_s": 0.5} for _ in range(7)
    ]
    total = cpu_totals(rows)
    assert total["cpu_hours"] == pytest.approx(10.7) and total["probe_s"] == pytest.approx(4.5)
    assert total["cpu_pool_workers"] == max(1, min(usable_cores(), 8))
    assert total["cpu_pool_wall_h"] == pytest.approx(max(10.0, 10.7 / total["cpu_pool_workers"]))
    assert cpu_totals([{"cpu_hours": None, "probe_s": None}])["cpu_pool_wall_h"] is None


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
