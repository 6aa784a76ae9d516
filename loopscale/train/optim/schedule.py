"""Learning-rate schedules as pure functions of the step: lr(step) = peak_lr * lr_multiplier(step, ...).

Pure functions make resume exact (the multiplier depends only on the step) and let the warmup-stable-decay
branches of a forked sweep (issue 8) share a stable phase bit-for-bit with their parent.
"""

from __future__ import annotations

import math

from loopscale.config.schema import OptimConfig


def warmup_steps(total_steps: int, warmup_frac: float, absolute: int | None = None) -> int:
    """Warmup length in steps: `absolute` when given (OptimConfig.warmup_steps), else warmup_frac x total."""
    wanted = absolute if absolute is not None else int(round(warmup_frac * total_steps))
    return min(total_steps, wanted)


def wsd_decay_start(total_steps: int, decay_frac: float) -> int:
    """First step of the wsd cooldown: the last round(decay_frac x total) steps cool down. A forked branch
    of `total_steps` leaves its stable parent exactly here (loopscale/train/forks.py uses this same function)."""
    return total_steps - int(round(decay_frac * total_steps))


def lr_multiplier(step: int, total_steps: int, optim: OptimConfig, decay_start: int | None = None) -> float:
    """Multiplier of the peak lr for optimizer step `step` (0-based) of `total_steps`.

    The warmup is optim.warmup_steps steps when set, else warmup_frac x total_steps.
    linear:   ramp 0 -> 1 over the warmup, then straight down towards final_lr_frac, which it would reach at
              step total_steps (one past the last): 1 - (1 - final) (step - warmup) / (total - warmup), the
              published schedule (1 - 0.9 i / steps with no warmup).
    wsd:      ramp, hold at 1, then cool down towards final_lr_frac over the last decay_frac of the steps
              (or from `decay_start` when a forked branch gives it), linearly or as 1 - sqrt(progress), with
              the same end as linear.
    constant: ramp, then hold.
    """
    n_warmup = warmup_steps(total_steps, optim.warmup_frac, optim.warmup_steps)
    if step < n_warmup:
        return (step + 1) / n_warmup
    final = optim.final_lr_frac
    if optim.schedule == "constant":
        return 1.0
    if optim.schedule == "linear":
        span = max(1, total_steps - n_warmup)
        progress = min(1.0, (step - n_warmup) / span)
        return 1.0 - (1.0 - final) * progress
    # wsd
    if decay_start is None:
        decay_start = wsd_decay_start(total_steps, optim.decay_frac)
    decay_start = max(decay_start, n_warmup)
    if step < decay_start:
        return 1.0
    span = max(1, total_steps - decay_start)
    progress = min(1.0, (step - decay_start) / span)
    shape = math.sqrt(progress) if optim.decay_shape == "sqrt" else progress
    return 1.0 - (1.0 - final) * shape
