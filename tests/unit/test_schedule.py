"""Learning-rate schedules (pure functions of the step): warmup in absolute steps, the wsd cooldown, and the
property forked sweeps rest on: a branch's lr equals its stable parent's lr at every step before the fork."""

from __future__ import annotations

import math

import pytest

from loopscale.config.schema import OptimConfig
from loopscale.train.optim.schedule import lr_multiplier, warmup_steps, wsd_decay_start


def test_warmup_steps_absolute_overrides_fraction():
    assert warmup_steps(100, 0.05) == 5
    assert warmup_steps(100, 0.05, absolute=7) == 7
    assert warmup_steps(4, 0.05, absolute=7) == 4  # never longer than the run
    opt = OptimConfig(schedule="constant", warmup_steps=4)
    assert [lr_multiplier(s, 1000, opt) for s in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="warmup_steps"):
        OptimConfig(warmup_steps=-1)


def test_wsd_cooldown_shape_and_endpoints():
    total, opt = 50, OptimConfig(schedule="wsd", warmup_steps=5, decay_frac=0.2, final_lr_frac=0.0)
    start = wsd_decay_start(total, 0.2)
    assert start == 40
    mult = [lr_multiplier(s, total, opt) for s in range(total)]
    assert mult[4] == 1.0 and mult[39] == 1.0 and mult[start] == 1.0  # cooldown starts at the peak
    # ... and would reach final_lr_frac at step `total`, one past the last (the published end): the last step
    # runs at 1 / 10 of the peak here. linear: 1 - progress, progress = (s - start) / (total - start)
    assert mult[-1] == pytest.approx(1 / 10)
    assert mult[45] == pytest.approx(1 - 5 / 10)
    sqrt_opt = OptimConfig(schedule="wsd", warmup_steps=5, decay_frac=0.2, final_lr_frac=0.0, decay_shape="sqrt")
    assert lr_multiplier(45, total, sqrt_opt) == pytest.approx(1 - math.sqrt(5 / 10))


@pytest.mark.parametrize("steps", [1, 2, 7, 1000, 3761])
def test_linear_schedule_is_the_published_one(steps):
    """optim=muonh's schedule: no warmup, multiplier 1 - 0.9 i / steps at step i (the published code's
    linear warmdown to 0.1 over the whole run), exactly."""
    opt = OptimConfig(schedule="linear", warmup_frac=0.0, final_lr_frac=0.1)
    for i in sorted({0, 1, steps // 2, steps - 2, steps - 1} - {-1}):
        if 0 <= i < steps:
            assert lr_multiplier(i, steps, opt) == pytest.approx(1 - 0.9 * i / steps, rel=1e-12, abs=0)


@pytest.mark.parametrize("shape", ["linear", "sqrt"])
def test_branch_lr_equals_parent_lr_before_its_fork(shape):
    """Branch of `steps` steps (wsd) vs the parent (constant, same absolute warmup): identical multipliers
    (exactly, not approximately) up to the fork step, where the cooldown begins."""
    warmup = 6
    parent = OptimConfig(schedule="constant", warmup_steps=warmup)
    branch = OptimConfig(schedule="wsd", warmup_steps=warmup, decay_frac=0.2, decay_shape=shape, final_lr_frac=0.0)
    parent_total = 400
    for steps in (30, 113, 226, 452):
        fork = wsd_decay_start(steps, 0.2)
        assert [lr_multiplier(s, steps, branch) for s in range(fork + 1)] == [
            lr_multiplier(s, parent_total, parent) for s in range(fork + 1)
        ]
        assert lr_multiplier(fork + 1, steps, branch) < 1.0


@pytest.mark.parametrize("steps,frac,cool", [(13, 0.2, 3), (113, 0.2, 23), (7, 0.3, 2), (10, 0.25, 2), (50, 0.2, 10)])
def test_the_wsd_cooldown_is_the_last_round_of_decay_frac_steps(steps, frac, cool):
    """docs/operations.md / train/forks.py: the cooldown covers the last round(decay_frac x steps) steps (2.6 -> 3,
    22.6 -> 23, 2.1 -> 2, 2.5 -> 2 as Python rounds half to even), so a branch leaves its parent at
    steps - round(decay_frac x steps): the multiplier is 1 up to that step and below 1 after it."""
    assert wsd_decay_start(steps, frac) == steps - cool
    opt = OptimConfig(schedule="wsd", warmup_steps=1, decay_frac=frac, final_lr_frac=0.0)
    mult = [lr_multiplier(s, steps, opt) for s in range(steps)]
    assert mult[steps - cool] == 1.0 and all(m < 1.0 for m in mult[steps - cool + 1 :])
    assert all(m == 1.0 for m in mult[1 : steps - cool])


def test_wsd_cools_down_to_final_lr_frac_from_a_given_start_never_inside_the_warmup():
    """final_lr_frac != 0 (the end the cooldown heads for: 1 - (1 - final) x shape), a forked branch's explicit
    decay_start, and a cooldown that would begin inside the warmup starting at its end instead."""
    opt = OptimConfig(schedule="wsd", warmup_steps=5, decay_frac=0.2, final_lr_frac=0.1)
    assert lr_multiplier(45, 50, opt) == pytest.approx(1 - 0.9 * 5 / 10, rel=1e-12)
    sqrt_opt = OptimConfig(schedule="wsd", warmup_steps=5, decay_frac=0.2, final_lr_frac=0.1, decay_shape="sqrt")
    assert lr_multiplier(45, 50, sqrt_opt) == pytest.approx(1 - 0.9 * math.sqrt(5 / 10), rel=1e-12)
    # a branch given its fork step: the cooldown from there, whatever decay_frac says
    assert lr_multiplier(29, 50, opt, decay_start=30) == 1.0
    assert lr_multiplier(40, 50, opt, decay_start=30) == pytest.approx(1 - 0.9 * 10 / 20, rel=1e-12)
    # 10 steps, warmup 6, decay_frac 0.6: the cooldown would start at 4, inside the warmup; it starts at 6
    short = OptimConfig(schedule="wsd", warmup_steps=6, decay_frac=0.6, final_lr_frac=0.1)
    assert [lr_multiplier(s, 10, short) for s in (4, 5, 6)] == [pytest.approx(5 / 6), 1.0, 1.0]
    assert lr_multiplier(8, 10, short) == pytest.approx(1 - 0.9 * 2 / 4, rel=1e-12)
    # the constant schedule holds the peak after its warmup, whatever final_lr_frac says
    assert lr_multiplier(49, 50, OptimConfig(schedule="constant", warmup_steps=5, final_lr_frac=0.1)) == 1.0
