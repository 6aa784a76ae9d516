"""Launch estimates: GPU hours from training and validation FLOPs at an assumed MFU, plus compile; a message
naming the overrides for a GPU job that cannot finish within its launcher's timeout x (max requeues + 1) or
does not fit its plan device's memory (the SLURM launcher refuses it: tests/system/test_slurm_refusal.py)."""

from __future__ import annotations

import re

import pytest

from loopscale.cli import main as cli_main
from loopscale.config.dirs import compose
from loopscale.launch.estimate import (
    LaunchLimits,
    estimate_job,
    launch_limits,
    launch_problems,
    launcher_limits_of,
    limit_warning,
    limit_warnings,
)
from loopscale.model.accounting import eval_flops_at, eval_flops_per_token
from loopscale.train.job_plan import curve_cost, plan_job
from loopscale.train.mfu import PEAK_BF16_FLOPS
from loopscale.train.plan import plan_run
from support.train import train_config

# a synthetic plan: the published model at s = 34 with its 32k vocabulary, a compute budget chosen per test
PAPER = ["model=paper", "model.d_model=2176", "model.vocab_size=32000", "budget=paper", "trainer=gpu"]


def test_gpu_hours_follow_from_training_and_validation_at_the_assumed_mfu_and_the_device_peak():
    cfg = train_config([*PAPER, "data=fineweb_edu_packed", "budget.compute_flops=1e19", "trainer.assumed_mfu=0.5"])
    est = estimate_job(cfg, None)
    peak = PEAK_BF16_FLOPS[cfg.trainer.plan_device]
    plan = plan_run(cfg)
    # trainer=gpu: every 250 steps the first 5% of the 34,560 val rows (1,728), and all of them once at the end
    val_rows = 34_560 + (plan.steps - 1) // 250 * 1_728
    assert est.C == pytest.approx(plan.C)
    # and its scoring: the loss curve's evaluations (curve_cost) and the final set again at each other r_eval (auto)
    r = cfg.model.r
    others = [n for n in (1, 2, r // 2, 2 * r, 4 * r) if n not in (r, 0)]
    scoring = 34_560 * 2048 * sum(eval_flops_at(cfg.model, n) for n in sorted(set(others)))
    curve = curve_cost(plan_job(cfg), 34_560)[1]
    assert 0 < curve <= 0.05 * plan.C and scoring > 0
    assert est.C_val == pytest.approx(val_rows * 2048 * eval_flops_per_token(cfg.model) + curve + scoring, rel=1e-12)
    assert eval_flops_per_token(cfg.model) == pytest.approx(plan.F / 3, rel=0.01)  # forward only: a third of F
    assert est.gpu_hours == pytest.approx((plan.C + est.C_val) / (0.5 * peak) / 3600)
    assert est.wall_h == pytest.approx(est.gpu_hours + est.compile_h)
    assert est.fits and est.allowed_h is None  # no launcher limit known: nothing to warn about


def test_the_curves_scored_across_r_are_priced_each_r_eval_at_its_own_flops():
    """trainer.curve_r_eval adds, per evaluation of the curve, the subset at each other r_eval's forward FLOPs."""
    base = [
        *PAPER,
        "data=fineweb_edu_packed",
        "budget.compute_flops=1e19",
        "trainer.r_eval=off",
        "trainer.curve_share=1",
    ]
    plain = train_config(base)
    scored = train_config([*base, "trainer.curve_r_eval=[1,8]"])
    r, subset = plain.model.r, 1_728  # trainer=gpu: the first 5% of 34,560 val rows
    points = curve_cost(plan_job(plain), 34_560)[0]
    assert points == curve_cost(plan_job(scored), 34_560)[0] > 10  # a share that holds every point either way
    extra = points * subset * 2048 * sum(eval_flops_at(plain.model, n) for n in {1, 8} - {r})
    assert estimate_job(scored, None).C_val - estimate_job(plain, None).C_val == pytest.approx(extra, rel=1e-9)


def test_a_job_that_cannot_finish_is_named_with_the_overrides_that_let_it_through():
    limits = LaunchLimits(timeout_min=240, max_num_timeout=3)  # 16 h in all, less requeue losses
    big = train_config([*PAPER, "budget.compute_flops=2.15e19"])  # ~15 GPU hours at 40% MFU on an H100
    small = train_config([*PAPER, "budget.compute_flops=1e18"])
    warning = limit_warning(estimate_job(big, limits), limits, big)
    assert warning is not None and big.run_name in warning and "4 x 240 min" in warning
    assert limit_warning(estimate_job(small, limits), limits, small) is None
    assert limit_warnings([big, small], limits) == [warning]
    # each suggested override alone lets it through, and one less would not
    timeout = int(re.search(r"timeout_min=(\d+)", warning).group(1))
    requeues = int(re.search(r"max_num_timeout=(\d+)", warning).group(1))
    assert estimate_job(big, LaunchLimits(timeout, 3)).fits and not estimate_job(big, LaunchLimits(timeout - 1, 3)).fits
    assert estimate_job(big, LaunchLimits(240, requeues)).fits
    assert not estimate_job(big, LaunchLimits(240, requeues - 1)).fits
    assert "trainer.check_limits=false" in warning
    unchecked = train_config([*PAPER, "budget.compute_flops=2.15e19", "trainer.check_limits=false"])
    assert launch_problems(unchecked, limits) == []
    cpu = train_config(["model=paper", "budget=paper", "budget.compute_flops=2.15e19"])  # CPU speed is not an H100's
    assert launch_problems(cpu, limits) == []


def test_a_device_batch_that_does_not_fit_the_plan_device_is_a_problem_naming_one_that_does():
    cfg = train_config([*PAPER, "budget.device_batch=64"])  # s = 34 at 64 x 2048 tokens per micro-batch
    (problem,) = launch_problems(cfg, None)
    assert "budget.device_batch=8" in problem and "NVIDIA H100 80GB HBM3" in problem and "GiB" in problem
    assert launch_problems(train_config([*PAPER, "budget.device_batch=8"]), None) == []
    assert launch_problems(train_config(PAPER), None) == []  # auto picks one that fits


def test_limits_come_from_the_composed_launcher_config():
    hydra = compose(["hydra/launcher=slurm"], return_hydra_config=True).hydra
    limits = launch_limits(hydra)
    assert limits == LaunchLimits(float(hydra.launcher.timeout_min), int(hydra.launcher.max_num_timeout))
    assert (
        launcher_limits_of(["hydra/launcher=slurm", "hydra.launcher.timeout_min=30", "model.r=1,2"]).timeout_min == 30
    )
    assert launch_limits(compose([], return_hydra_config=True).hydra) is None  # Hydra's basic launcher: no limit


def test_sweep_and_plan_warn_on_stderr_before_submission(capsys):
    args = [
        "experiment=isodepth",
        "point=C2.15e19-s34,C4.64e17-s6",
        "model.r=1",
        "hydra/launcher=slurm",
        "hydra.launcher.timeout_min=60",
        "hydra.launcher.max_num_timeout=1",
    ]
    assert cli_main(["sweep", *args, "--json"]) == 0
    err = capsys.readouterr().err
    assert "baseline-r1-C2.15e19-s34" in err and "C4.64e17-s6" not in err and "1 problem(s) in 2 jobs" in err
    assert cli_main(["plan", *args, "--json"]) == 0
    err = capsys.readouterr().err
    assert "baseline-r1-C2.15e19-s34" in err and "C4.64e17-s6" not in err
