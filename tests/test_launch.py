"""Launch estimates: GPU hours from F x D at an assumed MFU, and a warning before submission for a job that
cannot finish within its launcher's timeout x (max requeues + 1)."""

from __future__ import annotations

import pytest
from train_helpers import train_config

from loopscale.cli import main as cli_main
from loopscale.launch import (
    LaunchLimits,
    estimate_job,
    launch_limits,
    launcher_limits_of,
    limit_warning,
    limit_warnings,
)
from loopscale.mfu import PEAK_BF16_FLOPS
from loopscale.sweep import compose
from loopscale.train import plan_run

# a synthetic plan: the published model at s = 34 with its 32k vocabulary, a compute budget chosen per test
PAPER = ["model=paper", "model.d_model=2176", "model.vocab_size=32000", "budget=paper", "trainer=gpu"]


def test_gpu_hours_follow_from_C_the_assumed_mfu_and_the_device_peak():
    cfg = train_config([*PAPER, "budget.compute_flops=1e19", "trainer.assumed_mfu=0.5"])
    est = estimate_job(cfg, None)
    peak = PEAK_BF16_FLOPS[cfg.trainer.plan_device]
    assert est.C == pytest.approx(plan_run(cfg).C)
    assert est.gpu_hours == pytest.approx(plan_run(cfg).C / (0.5 * peak) / 3600)
    assert est.fits and est.allowed_h is None  # no launcher limit known: nothing to warn about


def test_a_job_that_cannot_finish_within_its_limits_is_warned_about():
    limits = LaunchLimits(timeout_min=240, max_num_timeout=3)  # 16 h in all, less requeue losses
    big = train_config([*PAPER, "budget.compute_flops=2.15e19"])  # ~15 GPU hours at 40% MFU on an H100
    small = train_config([*PAPER, "budget.compute_flops=1e18"])
    warning = limit_warning(estimate_job(big, limits), limits, big)
    assert warning is not None and big.run_name in warning and "4 x 240 min" in warning
    assert limit_warning(estimate_job(small, limits), limits, small) is None
    # more attempts fit it; so does the wall-time checkpoint that shrinks each requeue's loss
    assert estimate_job(big, LaunchLimits(240, 4)).fits
    assert limit_warnings([big, small], limits) == [warning]


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
    assert "baseline-r1-C2.15e19-s34" in err and "C4.64e17-s6" not in err and "1 of 2 jobs" in err
    assert cli_main(["plan", *args, "--json"]) == 0
    err = capsys.readouterr().err
    assert "baseline-r1-C2.15e19-s34" in err and "C4.64e17-s6" not in err
