"""A job's plan by hand (loopscale/train/job_plan.py, `plan_job`; issue 58): what a forked job trains and spends
(its parent to the last fork plus every cooldown, against its points trained alone), its points' tokens, FLOPs and
fork steps, the records it writes and the parent it names; a single run's plan is its run's."""

from __future__ import annotations

from pathlib import Path

from loopscale.model.accounting import flops_per_token
from loopscale.train.job_plan import plan_job
from support.train import TINY, train_config

# 16 x 64 = 1024 tokens a step: branches of 5, 10 and 15 steps cool down over their last round(0.2 x steps),
# so they leave the parent at 4, 8 and 12; the shared warmup is 2 steps
FORKED = [
    *TINY,
    "optim=wsd",
    "budget.mode=forks",
    "budget.fork_tokens=[15360,5120,10240]",
    "optim.warmup_steps=2",
    "run_name=job-d64",
    "runs_dir=/runs",
    "sweep=s",
]


def test_a_forked_job_trains_its_parent_to_the_last_fork_and_each_cooldown():
    cfg = train_config(FORKED)
    job = plan_job(cfg)
    F = flops_per_token(cfg.model)
    assert [(p.steps, p.fork_step, p.D, p.C_budget) for p in job.points] == [
        (5, 4, 5120, None),
        (10, 8, 10240, None),
        (15, 12, 15360, None),
    ]
    assert [p.C for p in job.points] == [F * 5120, F * 10240, F * 15360]
    assert job.run.steps == 12 and job.run_cfg.optim.schedule == "constant"  # the stable parent
    assert job.tokens == (12 + 1 + 2 + 3) * 1024 and job.steps == 18
    assert job.flops == F * 18 * 1024 and job.flops_independent == F * 30 * 1024
    assert job.parent == "job-d64" and job.run_dir == Path("/runs/s/job-d64")
    assert job.record_files == (
        Path("/runs/s/job-d64/fork_parent.json"),
        Path("/runs/s/job-d64-D1.02e4/run.json"),
        Path("/runs/s/job-d64-D1.54e4/run.json"),
        Path("/runs/s/job-d64-D5.12e3/run.json"),
    )


def test_a_single_runs_job_is_its_run():
    cfg = train_config([*TINY, "runs_dir=/runs", "sweep=s", "run_name=one"])
    job = plan_job(cfg)
    (point,) = job.points
    assert (point.steps, point.D, point.fork_step, job.steps) == (30, 30 * 1024, None, 30)
    assert job.tokens == 30 * 1024 and job.flops == job.flops_independent == point.C == job.run.F * 30 * 1024
    assert job.parent == "" and job.record_files == (Path("/runs/s/one/run.json"),) and job.run_cfg is cfg


def test_the_shared_warmup_is_warmup_frac_of_the_shortest_branch():
    job = plan_job(train_config([*FORKED, "optim.warmup_steps=null", "optim.warmup_frac=0.3"]))
    # round(0.3 x 5) = 2 steps (the longest branch's share would be round(0.3 x 15) = 4), the same for all
    assert job.forks.warmup_steps == 2 and job.run_cfg.optim.warmup_steps == 2
    assert [p.cfg.optim.warmup_steps for p in job.points] == [2, 2, 2]
