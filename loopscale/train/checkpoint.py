"""Checkpointing for resume: one `last.ckpt` per run, replaced atomically every N optimizer steps.

A kill during the write leaves the previous checkpoint intact (temp file + rename), so a restarted run never
loads a half-written file. Lightning's own checkpoint holds model, optimizer, lr scheduler, loop progress
(global step) and callbacks; the data position is the global step itself (loopscale.data.windows draws the batch of
step s from (seed, s, rank) alone).
"""

from __future__ import annotations

import errno
import os
import pickle
import time
from pathlib import Path

from lightning.pytorch.callbacks import Callback

from loopscale.errors import InputError, exception_chain


class CheckpointRefused(InputError):
    """A checkpoint to resume from holds more than tensors and plain containers: unpickling it could run
    code, so it is not loaded (weights_only=True), whatever torch's own message suggests."""


def refused_checkpoint(err: BaseException, path: Path | None) -> CheckpointRefused | None:
    """CheckpointRefused, saying what loopscale does and what the user can do, when `err` (from loading the
    checkpoint at `path`) is torch's weights-only refusal, whose own text advises weights_only=False, which
    loopscale never uses; else None."""
    for link in exception_chain(err):
        if isinstance(link, pickle.UnpicklingError) and "weights only load failed" in str(link).lower():
            return CheckpointRefused(
                f"{path} holds more than tensors and plain containers, so loading it could run code: loopscale "
                "loads checkpoints with weights_only=True only and refused it (nothing of it was loaded). If "
                "you trust where it came from, it is not a checkpoint loopscale wrote; delete it (or relaunch "
                "with restart=true) to train this run from scratch"
            )
    return None


def save_atomic(trainer, path: Path) -> None:
    """Write a full Lightning checkpoint to `path` via a temp file and a rename (all ranks must call it)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    if trainer.is_global_zero:
        path.parent.mkdir(parents=True, exist_ok=True)
    try:
        trainer.save_checkpoint(str(tmp), weights_only=False)  # every rank calls it (sharded strategies gather)
        if trainer.is_global_zero:
            os.replace(tmp, path)
    except BaseException as err:
        if trainer.is_global_zero:
            tmp.unlink(missing_ok=True)  # a partial checkpoint frees its space for the failure record
        if _disk_full(err):
            raise OSError(errno.ENOSPC, "No space left on device while writing a checkpoint", str(tmp)) from err
        raise
    trainer.strategy.barrier("loopscale-ckpt")


# Lightning's SLURM auto-requeue (SIGUSR1 under slurm/train.sbatch) saves hpc_ckpt_<n>.ckpt in the run dir.
HPC_CHECKPOINT_GLOB = "hpc_ckpt_*.ckpt"


def newest_checkpoint(last: Path, hpc_dir: Path) -> Path | None:
    """The checkpoint to resume from: `last` (last.ckpt) or the newest hpc checkpoint in `hpc_dir`, whichever
    was written later; None when there is neither. An hpc checkpoint is newer when SIGUSR1 came between two
    last.ckpt saves, and then holds the steps since the last one."""
    candidates = [p for p in (Path(last), *Path(hpc_dir).glob(HPC_CHECKPOINT_GLOB)) if p.is_file()]
    return max(candidates, key=lambda p: p.stat().st_mtime_ns, default=None)


def prune_hpc_checkpoints(hpc_dir: Path) -> None:
    """Delete the hpc checkpoints in `hpc_dir` (~15 GB each at s = 34): called once a newer last.ckpt exists."""
    for path in Path(hpc_dir).glob(HPC_CHECKPOINT_GLOB):
        path.unlink(missing_ok=True)


def _disk_full(err: BaseException) -> bool:
    """torch.save reports a full disk as RuntimeError('... file write failed'), not as OSError(ENOSPC)."""
    if isinstance(err, OSError):
        return err.errno in (errno.ENOSPC, errno.EDQUOT)
    return isinstance(err, RuntimeError) and "write failed" in str(err)


def fork_checkpoint_path(checkpoint_dir: Path, step: int) -> Path:
    return Path(checkpoint_dir) / f"fork-{step}.ckpt"


class ForkCheckpoints(Callback):
    """Keep a checkpoint at each fork step of a stable-phase parent run (loopscale/train/forks.py): after optimizer
    step s, `fork-<s>.ckpt` holds the weights, optimizer and loop state a cooldown branch starts from."""

    def __init__(self, checkpoint_dir: Path, steps: list[int]):
        self.checkpoint_dir = Path(checkpoint_dir)
        # decided once, identically on every rank: a resumed parent does not rewrite forks it already saved
        self.pending = {s for s in steps if not fork_checkpoint_path(checkpoint_dir, s).exists()}

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        step = trainer.global_step
        if step in self.pending:  # once per optimizer step (a step spans grad_accum micro-batches)
            self.pending.discard(step)
            save_atomic(trainer, fork_checkpoint_path(self.checkpoint_dir, step))


class AtomicLastCheckpoint(Callback):
    """last.ckpt every `every_n_steps` optimizer steps, and also once `every_minutes` of wall time passed since
    the last save (0: off), so a job killed at its time limit loses minutes, not up to every_n_steps steps.
    The clock is read every `time_check_every` steps (the log steps, where training checks for divergence and
    syncs anyway)."""

    def __init__(self, path: Path, every_n_steps: int, every_minutes: float = 0.0, time_check_every: int = 1):
        self.path = Path(path)
        self.every_n_steps = every_n_steps
        self.every_s = every_minutes * 60
        self.time_check_every = max(1, time_check_every)
        self._saved_at = time.monotonic()

    def _save(self, trainer) -> None:
        if trainer.received_sigterm:
            # SLURM is requeueing or cancelling the job: the hpc checkpoint Lightning just saved on SIGUSR1
            # (or the last save) is what the rerun resumes from; a new last.ckpt now would prune that one
            # and spend the seconds of grace before the kill writing gigabytes
            return
        save_atomic(trainer, self.path)
        self._saved_at = time.monotonic()
        if trainer.is_global_zero:  # the hpc checkpoints Lightning saved on SIGUSR1 are older now
            prune_hpc_checkpoints(trainer.default_root_dir)

    def on_train_start(self, trainer, pl_module):
        self._saved_at = time.monotonic()

    def _time_due(self, trainer) -> bool:
        if not self.every_s or trainer.global_step % self.time_check_every:
            return False
        due = time.monotonic() - self._saved_at >= self.every_s
        # rank 0's clock decides: every rank must enter the save (a collective) together
        return bool(trainer.strategy.broadcast(due, src=0)) if trainer.world_size > 1 else due

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        step = trainer.global_step
        # save once per optimizer step (a step spans grad_accum micro-batches)
        if step == 0 or step == getattr(self, "_last_saved", None):
            return
        if step % self.every_n_steps == 0 or (step != getattr(self, "_time_checked", None) and self._time_due(trainer)):
            self._last_saved = step
            self._save(trainer)
        self._time_checked = step

    def on_train_end(self, trainer, pl_module):
        if trainer.global_step != getattr(self, "_last_saved", None):
            self._last_saved = trainer.global_step
            self._save(trainer)
