"""The held-out loss of a run: which validation runs when, and on what: intermediate validations on a fixed
subset, the final one on the whole set, once. (Not `loopscale validate`, the out-of-sample checks of a fit: that is
loopscale/fit/validation/.)

The final validation (the run's L) reads the whole fixed set: data.val_rows packed rows (34,560 in the
published runs, ~71M tokens) or the windows of data.val_tokens. Validating all of it every
trainer.val_every_steps steps would cost ~9% of a published run's compute; the intermediate validations
(the loss curve) read only its first trainer.val_subset share instead (5% by default: 1,728 rows), the
same rows in every run and at every step, so curves stay comparable.

Lightning validates inside fit every val_every_steps steps, also when that step is the last; the runner
then validates the whole set. `SkipFinalStepValidation` (loopscale/train/lightning_module.py, with the run's
other callbacks: this module stays free of Lightning, so `sweep` and `plan` count validations without it)
drops the intermediate one at the last step, so a run whose steps are a multiple of the interval is
validated once at its end, not twice.

The loss curve (issue 55, `curve_steps`): the same subset evaluated after a planned set of optimizer steps,
half of trainer.curve_points log-spaced from step 1 (the fast early fall), half at regular intervals, more in
the cooldown, and the schedule's corners (the warmup's end, the cooldown's start, a stable parent's fork
steps, the last step: with these, the lr read linearly between evaluations is the schedule itself). At most
trainer.curve_share (5%) of the run's training FLOPs: each evaluation costs the subset's tokens at the
forward-only FLOPs per token, and the points are thinned until the whole curve fits the share.
"""

from __future__ import annotations

import math

import numpy as np

from loopscale.config.schema import DataConfig, TrainerConfig


def subset_count(final: int, share: float) -> int:
    """Sequences of the intermediate subset: the first ceil(share x final), at least one."""
    return max(1, min(final, math.ceil(share * final)))


def final_val_sequences(data: DataConfig, seq_len: int) -> int:
    """Sequences of the final validation set as configured: data.val_rows packed rows (0 when None: the split's
    size is only known once the data is open), else the windows of T + 1 tokens in data.val_tokens."""
    if data.format == "packed":
        return data.val_rows or 0
    return data.val_tokens // (seq_len + 1)


def intermediate_validations(steps: int, every: int) -> int:
    """Intermediate validations of a run of `steps` optimizer steps (none at the last step)."""
    return (steps - 1) // every if every else 0


def curve_steps(total_steps: int, n_points: int, corners=(), cooldown_start: int | None = None) -> list[int]:
    """The optimizer steps after which a run of `total_steps` evaluates its curve (ascending, each in
    1..total_steps): n_points // 2 log-spaced from 1, the rest at regular intervals (a third of them inside the
    cooldown from `cooldown_start` when there is one), the `corners` and the last step. None for n_points 0."""
    if n_points <= 0 or total_steps < 1:
        return []
    n_log = n_points // 2
    n_regular = n_points - n_log
    n_cool = n_regular // 3 if cooldown_start is not None and 0 < cooldown_start < total_steps else 0
    points = [np.geomspace(1, total_steps, n_log), np.linspace(0, total_steps, n_regular - n_cool + 1)[1:]]
    if n_cool:
        points.append(np.linspace(cooldown_start, total_steps, n_cool + 2)[1:-1])
    picked = np.round(np.concatenate([*points, np.asarray(list(corners), dtype=float), [total_steps]]))
    return sorted({int(s) for s in picked if 1 <= s <= total_steps})


def curve_plan(
    total_steps: int,
    n_points: int,
    share: float,
    train_flops: float,
    flops_per_point: float,
    corners=(),
    cooldown_start: int | None = None,
) -> list[int]:
    """`curve_steps` thinned until its evaluations cost at most `share` of `train_flops` (each
    `flops_per_point`): the most points that fit with every corner, else the last step alone, else none."""
    budget = share * train_flops
    for n in range(n_points, 0, -1):
        steps = curve_steps(total_steps, n, corners, cooldown_start)
        if len(steps) * flops_per_point <= budget:
            return steps
    # the corners alone cost too much: the last step only, when even that fits
    return [total_steps] if n_points > 0 and total_steps >= 1 and flops_per_point <= budget else []



def subset_curve(trainer: TrainerConfig, final: int, T: int, flops_per_token: float, steps: int, C: float, corners):
    """(the steps after which a run of `steps` evaluates its loss curve, the FLOPs of one evaluation): the
    trainer.val_subset share of a final set of `final` sequences, T tokens each at `flops_per_token`, at `curve_plan`'s
    steps (`corners`: the schedule's, its cooldown's start) within trainer.curve_share of the run's training FLOPs C."""
    per_point = (subset_count(final, trainer.val_subset) if final else 0) * T * flops_per_token
    at = curve_plan(steps, trainer.curve_points, trainer.curve_share, C, per_point, *corners) if per_point > 0 else []
    return at, per_point
