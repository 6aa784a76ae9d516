"""The launch side's formulas pinned to hand-computed numbers (issue 58: a test per rule, not per outcome): the
pool's wall time (loopscale/launch/wall_time.py), a grid's totals and the lines `plan` / `sweep` print
(launch/grid_cost.py), the lr grid's jobs (launch/lr_grid.py) and the names runs carry (config/naming.py). Every
expected value is written out here, from the docstrings and docs/operations.md, never by the helper under test.
Pure functions, milliseconds."""

from __future__ import annotations

import os

import pytest

from loopscale.config.naming import (
    budget_tag,
    check_name,
    lr_rule_tag,
    lr_tag,
    paper_width,
    parse_fork_point,
    seed_tag,
)
from loopscale.errors import ConfigError
from loopscale.launch import grid_cost, wall_time
from loopscale.launch.grid_cost import (
    cpu_line,
    cpu_totals,
    lr_grid_line,
    over_limit_lines,
    plan_cells,
    sweep_cells,
    totals,
)
from loopscale.launch.lr_grid import LrGrid, lr_grid_jobs, split_point
from loopscale.launch.wall_time import PoolPlan, expected_share, job_wall_s, list_schedule_s, pool_wall_s

# --- wall_time: the pool's share, a job's wall time, the sweep's ---------------------------------------------


def test_expected_share_is_the_cores_over_the_load_plus_workers_times_threads():
    assert expected_share(load=0.5, workers=2, threads=1, cores=2) == pytest.approx(2 / 2.5)
    assert expected_share(load=3.0, workers=2, threads=2, cores=4) == pytest.approx(4 / 7)  # x threads, not +
    assert expected_share(load=1.0, workers=1, threads=3, cores=8) == 1.0  # fewer wanted than cores: a whole core
    assert expected_share(load=0.0, workers=3, threads=1, cores=3) == 1.0  # exactly the cores
    assert expected_share(load=0.0, workers=0, threads=1, cores=2) == 1.0  # nothing wanted: no division by zero


def test_a_job_is_its_training_plus_its_set_up_and_one_validation_per_point_at_the_pools_share():
    """JOB_SETUP_CPU_S = 1.0 and POINT_CPU_S = 0.5 CPU seconds (bench_plan_estimate.py), divided by the share."""
    pool = PoolPlan(workers=2, threads=1, core_share=0.25)
    assert job_wall_s(100.0, 3, pool) == pytest.approx(100.0 + (1.0 + 0.5 * 3) / 0.25)  # 110
    assert job_wall_s(0.0, 1, PoolPlan(workers=1, threads=1)) == pytest.approx(1.5)


def test_the_sweep_adds_the_launchers_start_each_workers_unless_one_and_the_first_tokenizing():
    jobs_s, points = [50.0, 100.0], [2, 1]
    one = PoolPlan(workers=1, threads=1, start_s=7.0, core_share=0.5, tokenize_s=3.0)
    # each job: 100 + (1 + 0.5) / 0.5 = 103, 50 + (1 + 1) / 0.5 = 54; one worker runs them in the launcher
    assert pool_wall_s(jobs_s, points, one) == pytest.approx(7 + 0 + 3 + 103 + 54)
    two = PoolPlan(workers=2, threads=1, start_s=7.0, core_share=0.5, tokenize_s=3.0)
    assert pool_wall_s(jobs_s, points, two) == pytest.approx(7 + 7 + 3 + 103)


def test_the_schedule_refuses_no_workers_and_reads_at_most_one_busy_time_per_worker():
    with pytest.raises(ValueError, match="workers=0"):
        list_schedule_s([1.0], 0)
    assert list_schedule_s([1.0], 1) == 1.0
    assert list_schedule_s([], 1, busy_s=[3.0, 9.0]) == 3.0  # a second busy time is no worker of this pool
    assert list_schedule_s([4.0, 4.0], 3, busy_s=[1.0]) == 4.0  # the free workers take them
    assert list_schedule_s([2.0, 2.0], 2, busy_s=[1.0, 5.0]) == 5.0  # 1 + 2 + 2 on the first worker
    assert list_schedule_s([2.0, 2.0, 2.0], 2, busy_s=[5.0, 1.0]) == 7.0  # the third waits for a 5


def test_others_load_is_the_load_average_unless_the_cpus_are_idler_now(monkeypatch):
    monkeypatch.setattr(os, "getloadavg", lambda: (1.3, 0.9, 0.4))
    monkeypatch.setattr(wall_time, "busy_cpus", lambda sample_s: 0.25)
    assert wall_time.others_load() == 0.25
    monkeypatch.setattr(wall_time, "busy_cpus", lambda sample_s: 1.9)
    assert wall_time.others_load() == 1.3  # the 1-minute average, not the 5- or 15-minute one
    monkeypatch.setattr(wall_time, "busy_cpus", lambda sample_s: None)
    assert wall_time.others_load() == 1.3


def test_first_tokenizing_is_priced_per_megabyte_of_a_local_corpus_not_yet_cached(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("x" * 500_000)  # 0.5 MB at TOKENIZE_CPU_S_PER_MB = 1.4
    data = ["data.source=text", f"data.path={corpus}", f"data.data_dir={tmp_path / 'cache'}"]
    assert wall_time.tokenize_cpu_s([*data, "model.r=1,2"]) == pytest.approx(0.7)  # a swept value is no job's data
    hub = ["data.source=hf", "data.hf_name=some/dataset", f"data.data_dir={tmp_path / 'cache'}"]
    assert wall_time.tokenize_cpu_s(hub) == 0.0


# --- grid_cost: totals, the CPU line, the tables' cells ---------------------------------------------------------


def _row(**kw):
    return {"points": 1, "gpu_hours": 0.0, "C_independent": 1.0, "C_forked": 1.0, "cpu_hours": None, **kw}


def test_totals_sum_each_column_and_divide_independent_by_forked():
    rows = [
        _row(points=3, C_independent=6e12, C_forked=2e12, gpu_hours=1.5),
        _row(points=2, C_independent=1e12, C_forked=1.5e12, gpu_hours=0.25),
    ]
    total = totals(rows)
    assert (total["jobs"], total["points"]) == (2, 5)
    assert (total["C_independent"], total["C_forked"]) == (7e12, 3.5e12)
    assert total["ratio"] == pytest.approx(2.0)  # independent / forked: forking is cheaper
    assert total["gpu_hours"] == pytest.approx(1.75)
    assert total["cpu_hours"] is None and total["cpu_pool_wall_h"] is None


def test_cpu_totals_scale_each_probe_to_the_pools_share_and_default_to_the_machines_pool(monkeypatch):
    pool = PoolPlan(workers=1, threads=1, core_share=0.25, speed_scale=3.0)
    rows = [
        _row(cpu_hours=1.0, cpu_threads=1, cpu_core_share=0.5, probe_s=2.0),  # probed at 0.5: x 0.5 / 0.25 = 2
        _row(cpu_hours=1.0, cpu_threads=1, probe_s=1.0),  # no share of its own: the pool's speed_scale, x 3
        _row(cpu_hours=None, probe_s=None),  # a GPU job: not in the CPU total
    ]
    total = cpu_totals(rows, pool)
    each_s = [2 * 3600 + 1.5 / 0.25, 3 * 3600 + 1.5 / 0.25]
    assert total["cpu_hours"] == pytest.approx(2.0)  # the probed hours, unscaled
    assert total["cpu_pool_wall_h"] == pytest.approx(sum(each_s) / 3600)  # one worker: one after the other
    assert total["probe_s"] == pytest.approx(3.0)
    assert (total["cpu_pool_workers"], total["cpu_pool_threads"], total["core_share"]) == (1, 1, 0.25)

    # no pool given: threads the most any job asks for, workers cores // threads, at most one per job
    monkeypatch.setattr(grid_cost, "usable_cores", lambda: 7)
    three = [_row(cpu_hours=1.0, cpu_threads=t, points=1) for t in (1, 3, 2)]
    assert (cpu_totals(three)["cpu_pool_workers"], cpu_totals(three)["cpu_pool_threads"]) == (2, 3)
    assert cpu_totals(three[:1])["cpu_pool_workers"] == 1
    monkeypatch.setattr(grid_cost, "usable_cores", lambda: 2)
    assert cpu_totals(three)["cpu_pool_workers"] == 1  # 2 // 3 = 0 cores' worth: still one worker


def test_the_cpu_line_states_hours_in_seconds_minutes_or_hours():
    total = {"cpu_hours": 0.02, "cpu_pool_wall_h": 0.5, "probe_s": 1.25, "cpu_pool_workers": 2, "cpu_pool_threads": 3}
    total |= {"worker_start_s": 4.4, "tokenize_s": 0.0, "load": 1.26, "core_share": 0.625}
    line = cpu_line(total)
    assert "CPU time: ~72 s in one process" in line  # 0.02 h = 1.2 min < 2 min: in seconds
    assert "probe 1.2 s" in line or "probe 1.3 s" in line
    assert "~30 min wall" in line and "2 worker(s) x 3 thread(s)" in line
    assert "a worker's start ~4 s;" in line and "first tokenizing" not in line
    assert "at load 1.3, 62% of a core per process" in line or "at load 1.3, 63% of a core per process" in line
    assert "~2 min in one process" in cpu_line(total | {"cpu_hours": 2 / 60})  # exactly 2 minutes: minutes
    assert "~2.5 h wall" in cpu_line(total | {"cpu_pool_wall_h": 2.5})
    assert "~1.0 h wall" in cpu_line(total | {"cpu_pool_wall_h": 1.0})  # an hour: hours
    assert ", first tokenizing ~12 s" in cpu_line(total | {"tokenize_s": 12.3})
    assert cpu_line({"cpu_hours": None}).startswith("CPU time: no CPU jobs probed")


def test_the_lr_grid_line_prices_the_extra_jobs_against_the_grids_own():
    rows = [
        {"lr_scale": 1.0, "C": 1e12, "C_budget": 2.5e11, "cpu_hours": 1.0},
        {"lr_scale": 1.0, "C": 2e12, "C_budget": 5e11, "cpu_hours": 1.0},
        {"lr_scale": 2.0, "C": 3e11, "C_budget": 2.5e11, "cpu_hours": 0.2},
        {"lr_scale": 0.5, "C": 1e11, "C_budget": 2.5e11, "cpu_hours": 0.1},
        {"lr_scale": 2**-0.5, "C": 1e11, "C_budget": 2.5e11, "cpu_hours": 0.1},
    ]
    assert lr_grid_line(rows) == (
        "lr grid: 3 extra jobs at C = 2.5e+11, lr x 0.5, 0.707, 2 (x1 is the grid's run): "
        "5e+11 FLOPs = 16.7% of the grid's 3e+12 FLOPs, 0.4 CPU h"
    )
    rows[2]["cpu_hours"] = None  # one job not probed: no CPU hours at all
    assert lr_grid_line(rows).endswith("of the grid's 3e+12 FLOPs")
    assert lr_grid_line(rows[:2]) is None


def test_a_job_over_its_launchers_limits_is_named_with_its_hours():
    rows = [
        {"run_name": "a", "wall_h": 30.04, "allowed_h": 23.96, "fits_limits": False},
        {"run_name": "b", "wall_h": 1.0, "allowed_h": 2.0, "fits_limits": True},
    ]
    assert over_limit_lines(rows) == [
        "WARNING: job a needs ~30.0 h but the launcher allows 24.0 h "
        "(timeout x (max requeues + 1), less requeue losses)"
    ]


def test_plan_and_sweep_cells_are_the_rows_own_numbers_in_the_columns_order():
    row = {
        "run_name": "j",
        "r": 4,
        "d_model": 96,
        "points": 3,
        "steps_trained": 1234,
        "steps": [300, 900, 700],
        "C_independent": 9.87654e12,
        "C_forked": 4.5e12,
        "gpu_hours": 12.34,
        "fits_limits": False,
        "cpu_tokens_per_s": 1234.6,
        "cpu_hours": 0.01234,
        "compile": "cached",
    }
    expected = [
        "j",
        "4",
        "96",
        "3",
        "1234",
        "900",
        "9.877e+12",
        "4.5e+12",
        "2.19",
        "12.3 !",
        "1235",
        "0.0123",
        "cached",
    ]
    assert plan_cells(row) == expected
    assert len(expected) == len(grid_cost.PLAN_COLUMNS)
    assert plan_cells(row | {"fits_limits": True, "cpu_hours": None, "cpu_tokens_per_s": None})[9:12] == [
        "12.3",
        "-",
        "-",
    ]
    sweep_row = {
        "run_name": "j",
        "r": 2,
        "recipe": "hyper",
        "d_model": 64,
        "N_once": 111,
        "N_rec": 222,
        "points": 2,
        "D": 1.23456e9,
        "steps": 77,
        "C": 4.5678e15,
        "world": 2,
        "device_batch": 8,
        "grad_accum": 4,
        "peak_gib": 70.06,
        "fits_memory": False,
        "gpu_hours": 3.0,
        "fits_limits": True,
        "cpu_hours": None,
        "compile": "eager",
    }
    cells = ["j", "2", "hyper", "64", "111", "222", "2", "1.23e+09", "77", "4.57e+15", "2x8x4", "70.1 !", "3.0", "-"]
    assert sweep_cells(sweep_row) == [*cells, "eager"]
    assert len(cells) + 1 == len(grid_cost.SWEEP_COLUMNS)


# --- lr_grid: which jobs, at which multipliers --------------------------------------------------------------


def test_the_multipliers_are_step_powers_around_one_smallest_first():
    expected = [float(f"{1.5**k:.12g}") for k in (-3, -2, -1)] + [1.0, 1.5, 2.25, 3.375]  # 12 digits: 0.5, not 0.4999..
    assert LrGrid(points=7, step=1.5).multipliers() == expected
    assert LrGrid(points=3, step=3.0).multipliers() == [float(f"{1 / 3:.12g}"), 1.0, 3.0]
    with pytest.raises(ConfigError, match="odd integer"):
        LrGrid(points=1)
    with pytest.raises(ConfigError, match="must be > 1"):
        LrGrid(step=1.0)
    LrGrid(points=3, step=1.01)  # the smallest grid and step allowed


def test_the_lr_grid_takes_the_lower_of_two_middle_widths_whatever_the_jobs_order():
    jobs = [
        ["model.r=3", "point=C1e12_2e12-d64"],
        ["model.r=3", "point=C1e12-d32"],
        ["model.r=3", "point=C2e12-d16"],  # not at the smallest budget: never chosen
        ["model.r=3", "point=C1e12_4e12-d128"],
        ["model.r=3", "point=C1e12-d96"],
    ]
    extra = lr_grid_jobs(jobs, LrGrid(points=3, step=2.0))
    # widths at 1e12: 32, 64, 96, 128 -> the lower middle, 64, as a one-budget point at the smallest budget
    assert extra == [
        ["model.r=3", "point=C1e12-d64", "optim.lr_scale=0.5"],
        ["model.r=3", "point=C1e12-d64", "optim.lr_scale=2.0"],
    ]
    paper = [["point=C1e18-s12", "model.recipe=a"], ["point=C1e18-s8", "model.recipe=a"]]
    assert [j[0] for j in lr_grid_jobs(paper, LrGrid(points=3))] == ["point=C1e18-s8"] * 2
    with pytest.raises(ConfigError, match="drop optim.lr_scale"):
        lr_grid_jobs([["point=C1e12-d64", "optim.lr_scale=2"]], LrGrid())
    with pytest.raises(ConfigError, match="needs a width"):
        lr_grid_jobs([["point=C1e12-x64"]], LrGrid())
    assert lr_grid_jobs([], LrGrid()) == []


def test_a_point_splits_into_its_budgets_as_written_and_its_other_parts():
    assert split_point("C2.5e11_3.54e11-d24") == (["2.5e11", "3.54e11"], ["d24"])
    with pytest.raises(ConfigError, match="budget of each grid point"):
        split_point("d24")
    with pytest.raises(ConfigError, match="not numbers"):
        split_point("Cx_1e12-d24")


# --- naming: widths, tags, safe names -----------------------------------------------------------------------


def test_paper_width_is_64_s_rounded_up_to_a_multiple_of_128():
    assert [paper_width(s) for s in (1, 2, 5, 6, 7, 10, 17, 30)] == [128, 128, 384, 384, 512, 640, 1152, 1920]


def test_tags_are_short_deterministic_and_empty_at_their_defaults():
    assert budget_tag("flops", 1e18, None, None) == "C1e18"
    assert budget_tag("flops", 2.5e11, None, None) == "C2.5e11"
    assert budget_tag("tokens", None, 1.5e9, None) == "D1.5e9"
    assert budget_tag("ratio", None, None, 20) == "R20"
    assert budget_tag("forks", 1e18, 2e6, 20) == "forks"
    assert budget_tag("flops", 123456789, None, None) == "C1.23e8"  # 3 significant digits
    assert (seed_tag(0), seed_tag(3), seed_tag("12")) == ("", "-seed3", "-seed12")
    assert (lr_tag(1.0), lr_tag(2**0.5), lr_tag(0.5)) == ("", "-lrx1.41", "-lrx0.5")
    assert (lr_rule_tag(1), lr_rule_tag(1.934), lr_rule_tag(0.5)) == ("", "-lrt1.93", "-lrt0.5")


def test_safe_names_are_1_to_200_allowed_characters_starting_with_a_letter_digit_or_underscore():
    for ok in ("a", "_x", "9", "a=b,c+d-e.f", "x" * 200):
        check_name("run_name", ok)
    for bad in ("", "x" * 201, ".hidden", "-flag", "a..b", "a/b", "a b", None, 3):
        with pytest.raises(ConfigError, match="not a safe name"):
            check_name("run_name", bad)


def test_a_fork_point_is_its_budgets_and_its_width():
    assert parse_fork_point("C2.5e11_5e11_1e12-d64") == ([2.5e11, 5e11, 1e12], 64)
    with pytest.raises(ConfigError, match="must look like"):
        parse_fork_point("C2.5e11-s6")  # a paper size is no d_model


# --- estimate: what a requeue loses, what the launcher allows, the overrides that let a job through -------------


def test_the_launcher_allows_its_attempts_less_each_requeues_checkpoint_restart_and_compile():
    """launch/estimate.py: allowed = (requeues + 1) x timeout - requeues x (the steps since the last checkpoint at
    the assumed speed on all devices, or ckpt_every_minutes when sooner, + RESTART_S = 300 s + the compile)."""
    from loopscale.launch.estimate import LaunchLimits, estimate_job
    from loopscale.train.plan import plan_run
    from support.train import train_config

    paper = ["model=paper", "model.d_model=2176", "model.vocab_size=32000", "budget=paper", "trainer=gpu"]
    two_gpus = [*paper, "budget.compute_flops=1e19", "trainer.devices=2", "trainer.compile=blocks"]
    cfg = train_config(two_gpus)
    plan, peak, u, world = plan_run(cfg), 989.4e12, cfg.trainer.assumed_mfu, 2  # the H100 SXM's peak
    est = estimate_job(cfg, LaunchLimits(timeout_min=120, max_num_timeout=2))
    lost_s = cfg.trainer.ckpt_every_steps * plan.C / plan.steps / (u * peak * world)
    loss_h = (lost_s + 300 + 180) / 3600  # compile=blocks: 180 s per attempt
    assert est.requeue_loss_h == pytest.approx(loss_h, rel=1e-12)
    assert est.allowed_h == pytest.approx(3 * 120 / 60 - 2 * loss_h, rel=1e-12)
    assert est.gpu_hours == pytest.approx((plan.C + est.C_val) / (u * peak) / 3600, rel=1e-12)  # device hours
    assert est.wall_h == pytest.approx(est.gpu_hours / world + 180 / 3600, rel=1e-12)  # on 2 devices, + compile
    assert est.compile_h == pytest.approx(180 / 3600)
    assert lost_s > 30  # so half a minute of checkpoint interval is the sooner one below
    timed = train_config([*two_gpus, "trainer.ckpt_every_minutes=0.5"])
    assert estimate_job(timed, LaunchLimits(120, 2)).requeue_loss_h == pytest.approx((30 + 300 + 180) / 3600)


def test_the_overrides_named_are_the_smallest_that_let_the_job_through():
    from loopscale.launch.estimate import JobEstimate, LaunchLimits, needed_limits

    def estimate(wall_h, loss_h):
        return JobEstimate("j", 1.0, 0.0, wall_h, 0.0, wall_h, 0.0, loss_h)

    limits = LaunchLimits(timeout_min=120, max_num_timeout=2)
    # timeout: ceil((10 + 2 x 0.25) / 3 h) = 210 min; requeues: each adds 2 - 0.25 h: ceil((10 - 2) / 1.75) = 5
    assert needed_limits(estimate(10.0, 0.25), limits) == (210, 5)
    assert needed_limits(estimate(9.5, 0.25), limits)[1] == 5  # (9.5 - 2) / 1.75 = 4.3 requeues: 5, not 4
    assert needed_limits(estimate(1.0, 0.25), limits) == (30, 2)  # never fewer requeues than it has
    assert needed_limits(estimate(10.0, 2.5), limits) == (300, 2)  # an attempt gains nothing: the requeues as are


# --- throughput: the probe's two numbers, the pool's share ---------------------------------------------------


def test_the_probe_is_tokens_over_wall_seconds_and_cpu_seconds_per_wall_second_per_thread(monkeypatch):
    """launch/probe_steps.measure: PROBE_STEPS = 3 timed steps of device_batch x T tokens after one warm-up; the
    share is CPU s / wall s / threads, at most 1. The clocks are replaced by fixed readings: wall 2 s, CPU 1.5 s."""
    import types

    import torch

    from loopscale.launch import probe_steps
    from support.train import train_config

    cfg = train_config(["model=tiny", "model.seq_len=16"])
    clocks = types.SimpleNamespace(perf_counter=iter([10.0, 12.0]).__next__, process_time=iter([5.0, 6.5]).__next__)
    monkeypatch.setattr(probe_steps, "time", clocks)
    threads_before = torch.get_num_threads()
    tokens_per_s, share = probe_steps.measure(cfg, device_batch=2, threads=1)
    assert tokens_per_s == pytest.approx(3 * 2 * 16 / 2.0) and share == pytest.approx(1.5 / 2.0 / 1)
    assert torch.get_num_threads() == threads_before  # the process's threads given back
    for cpu_s, threads, share in ((1.5, 2, 0.75), (3.0, 2, 1.0)):  # per thread; 3 CPU s on 2 threads in 1 s: capped
        clocks = types.SimpleNamespace(perf_counter=iter([0.0, 1.0]).__next__, process_time=iter([0.0, cpu_s]).__next__)
        monkeypatch.setattr(probe_steps, "time", clocks)
        assert probe_steps.measure(cfg, device_batch=2, threads=threads, steps=1)[1] == share


def test_the_pools_share_is_the_median_of_the_probes_shares(monkeypatch):
    from loopscale.launch import throughput

    monkeypatch.setattr(throughput, "_SHARES", [0.2, 0.9, 0.5, 0.4])
    assert throughput.core_share() == pytest.approx(0.45)  # not the mean (0.5), not the last (0.4)
    assert throughput.probe_shares() == [0.2, 0.9, 0.5, 0.4]
    monkeypatch.setattr(throughput, "_SHARES", [])
    assert throughput.core_share() is None


def test_busy_cpus_are_the_non_idle_non_iowait_share_of_the_jiffies_times_the_cpus(monkeypatch):
    """wall_time.busy_cpus over /proc/stat's all-CPU line (user nice system idle iowait irq softirq ...): busy is
    everything but idle and iowait."""
    lines = iter(["cpu  100 5 50 1000 40 3 2 0 0 0\n", "cpu  160 5 70 1100 70 3 2 0 0 0\n"])

    class Stat:
        def __init__(self, path):
            assert path == "/proc/stat"

        def read_text(self):
            return next(lines)

    monkeypatch.setattr(wall_time, "Path", Stat)
    monkeypatch.setattr(wall_time.time, "sleep", lambda s: None)
    monkeypatch.setattr(wall_time.os, "cpu_count", lambda: 4)
    # busy: 60 user + 20 system = 80 of 210 jiffies (idle 100 and iowait 30 left out) on 4 CPUs
    assert wall_time.busy_cpus(0.5) == pytest.approx(80 / 210 * 4)
