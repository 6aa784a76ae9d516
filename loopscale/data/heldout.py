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
"""

from __future__ import annotations

import math

from loopscale.config.schema import DataConfig


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
