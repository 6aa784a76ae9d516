"""Where a run evaluates its loss curve (issue 55, loopscale/data/heldout.py): log-spaced and regular steps,
the schedule's corners, a cooldown's own points, thinned to the FLOPs share; and what a run plans from its
config (loopscale/train/plan.py, curve_evaluations)."""

import numpy as np
import pytest

from loopscale.data.heldout import curve_plan, curve_steps
from loopscale.model.accounting import eval_flops_per_token
from loopscale.train.plan import curve_evaluations, plan_run
from support.train import TINY, train_config


def test_log_spaced_regular_corners_and_cooldown():
    steps = curve_steps(1000, 24, corners=(20, 800), cooldown_start=800)
    assert steps[0] == 1 and steps[-1] == 1000 and {20, 800, 250, 500, 750} <= set(steps)
    assert steps == sorted(set(steps))
    early = [s for s in steps if s < 100]
    assert len(early) >= 6  # log-spaced: the fast early fall is sampled
    assert len([s for s in steps if s > 800]) >= 4  # the cooldown has points of its own
    assert curve_steps(1000, 0) == [] and curve_steps(3, 24) == [1, 2, 3]


def test_thinned_to_the_flops_share():
    full = curve_steps(1000, 24, (20, 800), 800)
    per_point = 1e9
    fits = curve_plan(1000, 24, 0.05, 1e12, per_point, (20, 800), 800)
    assert len(fits) * per_point <= 0.05 * 1e12 and len(fits) == len(full)  # 25 points of 1e9 fit 5e10
    thin = curve_plan(1000, 24, 0.05, 1e12, 4e9, (20, 800), 800)
    assert len(thin) * 4e9 <= 5e10 < (len(thin) + 2) * 4e9 and {20, 800, 1000} <= set(thin)
    assert curve_plan(1000, 24, 0.05, 1e12, 3e10, (20, 800), 800) == [1000]  # the corners alone cost too much
    assert curve_plan(1000, 24, 0.05, 1e12, 6e10, (20, 800), 800) == []


def test_a_runs_plan_prices_each_evaluation_at_the_subset_forward_flops():
    cfg = train_config([*TINY, "optim=wsd", "optim.warmup_steps=2"])
    run = plan_run(cfg)
    val_sequences = cfg.data.val_tokens // (cfg.model.seq_len + 1)
    steps, per_point = curve_evaluations(cfg, run, val_sequences)
    subset = int(np.ceil(cfg.trainer.val_subset * val_sequences))
    assert per_point == pytest.approx(subset * cfg.model.seq_len * eval_flops_per_token(cfg.model))
    assert 0 < len(steps) * per_point <= cfg.trainer.curve_share * run.C
    assert {2, run.steps - round(0.2 * run.steps), run.steps} <= set(steps)
    none, _ = curve_evaluations(train_config([*TINY, "trainer.curve_points=0"]), run, val_sequences)
    assert none == []
