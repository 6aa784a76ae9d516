"""Reading a packed set (packed.py) for training: every row once, in a fixed order, split over ranks and
gradient-accumulation steps; resumable from the step alone.

Micro-batch k of rank r -- k counts this rank's micro-batches, k = optimizer step x grad_accum +
accumulation index -- is the rows

    [(k x world + r) x micro, (k x world + r + 1) x micro)      (micro = rows per micro-batch)

of the train split in file order. Micro-batches k = 0 .. K - 1 of all ranks tile rows [0, K x world x
micro) without gaps or overlap, so a run of S optimizer steps reads the first S x batch_size rows exactly
once. The position is a pure function of (k, rank): resuming needs only k, and PackedDataModule takes it
from the resumed trainer (trainer.global_step x accumulate_grad_batches, restored from the checkpoint
before Lightning builds the train loader), the same mechanism as the windows format (data.py). No sampler
state goes into checkpoints. A run that needs more rows than the set holds is refused before training
(`check_rows`), unless data.allow_repeat, which wraps around to row 0 (and is recorded in run.json).

Inputs/targets: x = row[:-1], y = row[1:] (int64 [micro, T]); targets past a row's `n_tokens` (padding of
sets built by `loopscale data pack`) are IGNORE_INDEX, which the loss skips. The validation rows are the
first data.val_rows rows of the val split, the same for every run; each rank evaluates a contiguous share.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Optional

import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset

from loopscale.data.corpus import DataError
from loopscale.data.packed_parquet import PackedSet, RowFiles
from loopscale.data.windows import StepResumableDataModule
from loopscale.errors import InputError

IGNORE_INDEX = -100  # torch.nn.functional.cross_entropy's default ignore_index


def micro_batch_start(k: int, rank: int, world: int, micro: int) -> int:
    """First train row of micro-batch k on rank `rank` (see module docstring)."""
    if min(k, rank) < 0 or not 0 <= rank < world or micro < 1:
        raise InputError(
            f"k={k}, rank={rank}, world={world}, micro={micro}: need k >= 0, 0 <= rank < world, micro >= 1"
        )
    return (k * world + rank) * micro


def check_rows(n_rows: int, steps: int, batch_rows: int, seq_len: int, allow_repeat: bool, where: str) -> dict:
    """What a run of `steps` optimizer steps of `batch_rows` rows reads from a split of `n_rows` rows.

    Raises DataError with the numbers when it needs more rows than there are and allow_repeat is off.
    Returns the counts recorded in run.json."""
    needed = steps * batch_rows
    epochs = needed / n_rows
    if needed > n_rows and not allow_repeat:
        raise DataError(
            f"data: the run needs D = {needed * seq_len:,} tokens = {steps:,} steps x {batch_rows} rows x "
            f"T = {seq_len} = {needed:,} rows, but {where} holds {n_rows:,} train rows "
            f"({n_rows * seq_len:,} tokens, {epochs:.3g} passes needed); lower the budget, use a larger set, "
            f"or set data.allow_repeat=true"
        )
    return {
        "format": "packed",
        "train_rows": n_rows,
        "rows_needed": needed,
        "epochs": epochs,
        "allow_repeat": allow_repeat,
        "set": where,
    }


def read_wrapped(split: RowFiles, start: int, n: int) -> tuple[np.ndarray, Optional[np.ndarray]]:
    """Rows start .. start + n - 1 modulo the split's size (a second pass starts again at row 0)."""
    start %= split.n_rows
    if start + n <= split.n_rows:
        return split.read(start, n)
    parts = []
    while n > 0:
        take = min(n, split.n_rows - start)
        parts.append(split.read(start, take))
        start, n = 0, n - take
    tokens = np.concatenate([p[0] for p in parts])
    counts = None if parts[0][1] is None else np.concatenate([p[1] for p in parts])
    return tokens, counts


def rows_to_batch(tokens: np.ndarray, n_tokens: Optional[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    """(x, y), each int64 [rows, T], from rows of T + 1 ids; targets in the padding are IGNORE_INDEX."""
    rows = tokens.astype(np.int64)  # [rows, T + 1], one copy; x and y are views of it
    x, y = rows[:, :-1], rows[:, 1:]
    if n_tokens is not None and (n_tokens < tokens.shape[1]).any():
        y = y.copy()  # x keeps the padding ids as inputs (harmless: nothing predicts from them)
        # target j is token j + 1: real while j + 1 < n_tokens
        y[np.arange(y.shape[1])[None, :] >= n_tokens[:, None] - 1] = IGNORE_INDEX
    return torch.from_numpy(x), torch.from_numpy(y)


class PackedTrainStream(IterableDataset):
    """This rank's micro-batches k = start, start + 1, ... (whole batches: DataLoader(batch_size=None)).

    Without allow_repeat the stream ends at the last whole micro-batch (Lightning fetches one batch ahead,
    so a run that uses the set to its end does reach it) and a later iteration continues from there, so an
    epoch loop can never replay the pass: it gets a DataError instead. check_rows refuses such runs first."""

    def __init__(
        self, split: RowFiles, micro: int, rank: int = 0, world: int = 1, start: int = 0, allow_repeat: bool = False
    ):
        super().__init__()
        self.split, self.micro, self.rank, self.world = split, micro, rank, world
        self.start, self.allow_repeat = start, allow_repeat

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        k = self.start
        while True:
            lo = micro_batch_start(k, self.rank, self.world, self.micro)
            if lo + self.micro > self.split.n_rows and not self.allow_repeat:
                if k == self.start:
                    raise DataError(
                        f"data: micro-batch {k} of rank {self.rank} needs rows [{lo}, {lo + self.micro}) "
                        f"but the set holds {self.split.n_rows} train rows (data.allow_repeat=false)"
                    )
                self.start = k  # iterating again continues here (and fails) instead of replaying the pass
                return
            yield rows_to_batch(*read_wrapped(self.split, lo, self.micro))
            k += 1


class PackedValRows(IterableDataset):
    """The fixed validation rows [0, n_rows) of the val split: this rank's contiguous share, in batches."""

    def __init__(self, split: RowFiles, n_rows: int, batch_rows: int, rank: int = 0, world: int = 1):
        super().__init__()
        self.split, self.batch_rows = split, batch_rows
        self.lo, self.hi = rank * n_rows // world, (rank + 1) * n_rows // world

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        for lo in range(self.lo, self.hi, self.batch_rows):
            yield rows_to_batch(*self.split.read(lo, min(self.batch_rows, self.hi - lo)))


def val_row_count(packed: PackedSet, val_rows: Optional[int]) -> int:
    """data.val_rows, checked against the val split (None: all of it)."""
    available = packed.val.n_rows
    if val_rows is None:
        return available
    if val_rows > available:
        raise DataError(f"data.val_rows={val_rows:,} but the val split of {packed.root} holds {available:,} rows")
    return val_rows


class PackedDataModule(StepResumableDataModule):
    """Train stream + fixed val rows over a PackedSet; `micro` rows per micro-batch on each rank.

    Resuming: see StepResumableDataModule (the start micro-batch comes from the resumed global step)."""

    def __init__(self, packed: PackedSet, micro: int, val_rows: Optional[int] = None, allow_repeat: bool = False):
        super().__init__()
        if micro < 1:
            raise InputError(f"micro={micro} must be >= 1")
        self.packed, self.micro, self.allow_repeat = packed, micro, allow_repeat
        self.val_rows = val_row_count(packed, val_rows)

    def train_dataloader(self) -> DataLoader:
        rank, world = self.rank_and_world()
        stream = PackedTrainStream(
            self.packed.train, self.micro, rank, world, self.resolved_start_step(), self.allow_repeat
        )
        return DataLoader(stream, batch_size=None, num_workers=0)

    def val_dataloader(self) -> DataLoader:
        rank, world = self.rank_and_world()
        return DataLoader(
            PackedValRows(self.packed.val, self.validation_count(self.val_rows), self.micro, rank, world),
            batch_size=None,
            num_workers=0,
        )
