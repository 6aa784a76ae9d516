"""Batches from token shards: a pure batch function and the LightningDataModule around it.

Training batches are random windows of seq_len + 1 tokens from the train shard: x = window[:-1],
y = window[1:], both int64 [B, T]. The window offsets for (seed, step, rank) come from a numpy Generator
seeded with exactly those three numbers, so

    batch_at(tokens, step, rank, seed, B, T)

is a pure function: an uninterrupted run, a resumed run and a benchmark loop all see the same batch at the
same step. A step's global batch is split into equal slices over DDP ranks and gradient-accumulation
micro-batches (micro_batch_at), so the data of a step does not depend on how many nodes and devices train
it. No state is carried from one batch to the next, so resuming needs nothing but the step to start from
(see TokenDataModule).

Validation is a FIXED set: the first val_tokens // (T + 1) non-overlapping windows of the val shard, the
same for every run on the same prepared data, so val losses are comparable across a sweep; validations
inside fit read its first trainer.val_subset share (loopscale/data/heldout.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Optional, Union

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, Subset

from loopscale.data.shards import PreparedData
from loopscale.data.heldout import subset_count
from loopscale.errors import InputError

TokenSource = Union[PreparedData, np.ndarray]


def _train_tokens(data: TokenSource) -> np.ndarray:
    return data.tokens("train") if isinstance(data, PreparedData) else data


def window_offsets(n_tokens: int, step: int, rank: int, seed: int, batch_size: int, seq_len: int) -> np.ndarray:
    """Start offsets [B] of the windows for (seed, step, rank), uniform over every full window."""
    n_starts = n_tokens - seq_len  # a window of seq_len + 1 tokens may start at 0 .. n_tokens - seq_len - 1
    if n_starts < 1:
        raise InputError(f"seq_len={seq_len} needs at least {seq_len + 1} tokens; the shard has {n_tokens}")
    if min(step, rank, seed) < 0:
        raise ValueError(f"step={step}, rank={rank}, seed={seed} must all be >= 0")
    rng = np.random.default_rng([seed, step, rank])  # SeedSequence of the triple: independent streams
    return rng.integers(0, n_starts, size=batch_size)


def batch_at(
    data: TokenSource, step: int, rank: int, seed: int, batch_size: int, seq_len: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The training batch (x, y), each int64 [B, T], of global step `step` on rank `rank`."""
    tokens = _train_tokens(data)
    return _windows(tokens, window_offsets(len(tokens), step, rank, seed, batch_size, seq_len), seq_len)


def _windows(tokens: np.ndarray, offsets: np.ndarray, seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    windows = np.stack([tokens[o : o + seq_len + 1] for o in offsets]).astype(np.int64)  # [B, T + 1]
    windows = torch.from_numpy(windows)
    return windows[:, :-1], windows[:, 1:]


def micro_batch_at(
    data: TokenSource,
    micro_step: int,
    rank: int,
    seed: int,
    batch_size: int,
    seq_len: int,
    world_size: int = 1,
    grad_accum: int = 1,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Micro-batch `micro_step` of `rank` (batch_size windows): one of the world_size x grad_accum equal slices
    of its optimizer step's global batch, which is batch_at(step, rank 0) with batch_size x world_size x
    grad_accum windows, step = micro_step // grad_accum. A step's global batch is thus the same however it
    is split over nodes, devices and accumulation: a 2-node run trains on exactly the one-process run's data.
    world_size = grad_accum = 1 gives batch_at(micro_step, 0)."""
    if not 0 <= rank < world_size or grad_accum < 1:
        raise ValueError(f"rank={rank} must be in [0, world_size={world_size}) and grad_accum={grad_accum} >= 1")
    step, accum_index = divmod(micro_step, grad_accum)
    part = accum_index * world_size + rank
    tokens = _train_tokens(data)
    offsets = window_offsets(len(tokens), step, 0, seed, batch_size * world_size * grad_accum, seq_len)
    return _windows(tokens, offsets[part * batch_size : (part + 1) * batch_size], seq_len)


class TrainStream(IterableDataset):
    """Infinite stream of training micro-batches start_step, start_step + 1, ... on one rank of world_size,
    with grad_accum micro-batches per optimizer step (micro_batch_at).

    Yields whole batches (use DataLoader(batch_size=None)). The memmap opens lazily in __iter__ so the
    object pickles cheaply; keep num_workers=0 (the loader is far faster than a training step, see
    benchmarks/bench_data.py, and workers would each replay the same steps)."""

    def __init__(
        self,
        data: TokenSource,
        seed: int,
        batch_size: int,
        seq_len: int,
        start_step: int = 0,
        rank: int = 0,
        world_size: int = 1,
        grad_accum: int = 1,
    ):
        super().__init__()
        if not 0 <= rank < world_size:
            raise ValueError(f"rank={rank} must be in [0, world_size={world_size})")
        self.data, self.seed, self.batch_size, self.seq_len = data, seed, batch_size, seq_len
        self.start_step, self.rank, self.world_size, self.grad_accum = start_step, rank, world_size, grad_accum

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        tokens = _train_tokens(self.data)
        micro_step = self.start_step
        while True:
            yield micro_batch_at(
                tokens,
                micro_step,
                self.rank,
                self.seed,
                self.batch_size,
                self.seq_len,
                self.world_size,
                self.grad_accum,
            )
            micro_step += 1


class ValWindows(Dataset):
    """The fixed validation set: n non-overlapping windows of seq_len + 1 tokens from the val shard."""

    def __init__(self, val_tokens: np.ndarray, n_tokens: int, seq_len: int):
        self.tokens, self.seq_len = val_tokens, seq_len
        self.n_windows = min(n_tokens, len(val_tokens)) // (seq_len + 1)
        if self.n_windows < 1:
            raise ValueError(
                f"the val split has {len(val_tokens)} tokens and val_tokens={n_tokens}: fewer "
                f"than one window of seq_len + 1 = {seq_len + 1}"
            )

    def __len__(self) -> int:
        return self.n_windows

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        start = i * (self.seq_len + 1)
        window = torch.from_numpy(self.tokens[start : start + self.seq_len + 1].astype(np.int64))  # [T + 1]
        return window[:-1], window[1:]


class StepResumableDataModule(L.LightningDataModule):
    """A DataModule whose train stream position is a pure function of (micro-batch index, rank).

    Resuming: the train stream starts at `self.start_step` (micro-batches, not optimizer steps), read when
    train_dataloader() is called. If you leave it None, it is taken from the attached trainer as
    trainer.global_step * accumulate_grad_batches (the number of micro-batches already consumed), which
    Lightning has restored from the checkpoint by the time it builds the train dataloader; set it
    explicitly (`set_start_step`) when you drive the loop yourself. Rank and world size come from the
    trainer (else torch.distributed, else 0 / 1)."""

    def __init__(self):
        super().__init__()
        self.start_step: Optional[int] = None
        self.val_subset = 1.0  # share of the val set read by validations inside fit (trainer.val_subset)

    def validation_count(self, final: int) -> int:
        """Sequences the next validation reads of a val set of `final`: all of it in trainer.validate (the
        final validation), its first val_subset share inside fit (loopscale/data/heldout.py)."""
        trainer = getattr(self, "trainer", None)
        fitting = trainer is not None and trainer.state.fn == "fit"
        return subset_count(final, self.val_subset) if fitting else final

    def set_start_step(self, step: int) -> None:
        """Index of the first batch the next train_dataloader() yields (batches, not optimizer steps)."""
        self.start_step = step

    def rank_and_world(self) -> tuple[int, int]:
        trainer = getattr(self, "trainer", None)
        if trainer is not None:
            return trainer.global_rank, trainer.world_size
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            return torch.distributed.get_rank(), torch.distributed.get_world_size()
        return 0, 1

    def resolved_start_step(self) -> int:
        if self.start_step is not None:
            return self.start_step
        trainer = getattr(self, "trainer", None)
        if trainer is not None:
            return trainer.global_step * trainer.accumulate_grad_batches
        return 0


class TokenDataModule(StepResumableDataModule):
    """Train stream + fixed val set over a PreparedData (the windows format).

    Resuming: see StepResumableDataModule. The stream is infinite: stop training with max_steps. Each rank
    draws its own windows.
    """

    def __init__(self, prepared: PreparedData, seq_len: int, batch_size: int, seed: int, val_tokens: int):
        super().__init__()
        if seq_len < 1 or batch_size < 1 or val_tokens < 1:
            raise ValueError(f"seq_len={seq_len}, batch_size={batch_size}, val_tokens={val_tokens} must be >= 1")
        self.prepared, self.seq_len, self.batch_size = prepared, seq_len, batch_size
        self.seed, self.val_tokens = seed, val_tokens

    def train_dataloader(self) -> DataLoader:
        rank, world = self.rank_and_world()
        trainer = getattr(self, "trainer", None)
        stream = TrainStream(
            self.prepared,
            self.seed,
            self.batch_size,
            self.seq_len,
            start_step=self.resolved_start_step(),
            rank=rank,
            world_size=world,
            grad_accum=trainer.accumulate_grad_batches if trainer is not None else 1,
        )
        return DataLoader(stream, batch_size=None, num_workers=0)

    def val_dataloader(self) -> DataLoader:
        windows = ValWindows(self.prepared.tokens("val"), self.val_tokens, self.seq_len)
        windows = Subset(windows, range(self.validation_count(len(windows))))  # the first windows, in order
        _, world = self.rank_and_world()
        trainer = getattr(self, "trainer", None)
        if world > 1 and getattr(getattr(trainer, "_accelerator_connector", None), "use_distributed_sampler", False):
            # Every rank validates the whole set, so a multi-process run's val loss is the one-process run's.
            # A split would not be: Lightning's DistributedSampler pads the shares with repeated windows, and
            # its cross-rank mean of unequal shares divides by an integer-averaged count (63 windows on 2
            # ranks: /31 instead of /31.5). The redundant work is small: validation is rare next to training.
            raise ValueError(
                "TokenDataModule gives every rank the whole val set: build the Trainer with "
                "use_distributed_sampler=False"
            )
        return DataLoader(windows, batch_size=self.batch_size, shuffle=False, num_workers=0)


def unigram_entropy_nats(prepared: TokenSource) -> float:
    """Entropy (nats) of the val split's token unigram distribution: the loss of the best model that
    ignores context, so a trained LM must get below it. Arrays given directly are used as they are."""
    tokens = prepared.tokens("val") if isinstance(prepared, PreparedData) else prepared
    counts = np.bincount(np.asarray(tokens, dtype=np.int64))
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log(p)).sum())
