"""A run's progress while it trains, for whoever asked: a pool worker (loopscale/launch/local_workers.py) sets a
sink, and every run this process then trains reports the tokens of each training batch to it, so the sweep's
bar and ETA move with the steps, not only when a job ends. With no sink (a plain loopscale-train) nothing is
added to the trainer. Setting a sink imports nothing (a pool of non-training jobs never loads Lightning)."""

from __future__ import annotations

from collections.abc import Callable

_SINK: Callable[[int], None] | None = None  # called with each training batch's tokens (all ranks together)


def report_to(sink: Callable[[int], None] | None) -> None:
    """From now on, runs in this process report their trained tokens to `sink` (None: to no one)."""
    global _SINK
    _SINK = sink


def progress_callbacks() -> list:
    """[a Lightning callback that reports each training batch's tokens as the batch ends] while a sink is set
    (a resumed run reports only what it trains now), else []."""
    if _SINK is None:
        return []
    from lightning.pytorch.callbacks import (
        Callback,
    )  # Lightning: only in a training process (the pool's parent reads the sink)

    class TokensReported(Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            if _SINK is not None:
                _SINK(int(batch[0].numel()) * trainer.world_size)

    return [TokensReported()]
