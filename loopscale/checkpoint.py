"""Checkpointing for resume: one `last.ckpt` per run, replaced atomically every N optimizer steps.

A kill during the write leaves the previous checkpoint intact (temp file + rename), so a restarted run never
loads a half-written file. Lightning's own checkpoint holds model, optimizer, lr scheduler, loop progress
(global step) and callbacks; the data position is the global step itself (loopscale.data draws the batch of
step s from (seed, s, rank) alone).
"""

from __future__ import annotations

import os
from pathlib import Path

from lightning.pytorch.callbacks import Callback


class AtomicLastCheckpoint(Callback):
    def __init__(self, path: Path, every_n_steps: int):
        self.path = Path(path)
        self.every_n_steps = every_n_steps

    def _save(self, trainer) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        if trainer.is_global_zero:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        trainer.save_checkpoint(str(tmp), weights_only=False)  # every rank must call it (sharded strategies gather here)
        if trainer.is_global_zero:
            os.replace(tmp, self.path)
        trainer.strategy.barrier("loopscale-ckpt")

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        step = trainer.global_step
        # save once per optimizer step (a step spans grad_accum micro-batches)
        if step > 0 and step % self.every_n_steps == 0 and step != getattr(self, "_last_saved", None):
            self._last_saved = step
            self._save(trainer)

    def on_train_end(self, trainer, pl_module):
        if trainer.global_step != getattr(self, "_last_saved", None):
            self._last_saved = trainer.global_step
            self._save(trainer)
