"""The packed-rows reader: one pass sees every row once, across ranks (real gloo DDP) and accumulation
steps; a killed run resumes on exactly the rows it had not trained on; padding targets are masked."""

from __future__ import annotations

from collections import Counter

import lightning as L
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from loopscale.data.corpus import DataError
from loopscale.data.packed_batches import (
    IGNORE_INDEX,
    PackedDataModule,
    PackedTrainStream,
    check_rows,
    micro_batch_start,
    read_wrapped,
    rows_to_batch,
)
from loopscale.data.packed_parquet import iter_rows
from loopscale.train.checkpoint import AtomicLastCheckpoint


def _row_key(x: torch.Tensor, y: torch.Tensor) -> tuple:
    """A row rebuilt from its (x, y) pair (targets masked as padding read back as -100)."""
    return tuple(x.tolist()) + (int(y[-1]),)


def _all_rows(split, n=None) -> Counter:
    keys = Counter()
    for tokens, n_tokens in iter_rows(split, 256):
        x, y = rows_to_batch(tokens, n_tokens)
        keys.update(_row_key(a, b) for a, b in zip(x, y))
    return keys


def _first_rows(split, n) -> Counter:
    x, y = rows_to_batch(*split.read(0, n))
    return Counter(_row_key(a, b) for a, b in zip(x, y))


def test_micro_batches_tile_the_rows_over_ranks_and_accumulation():
    world, accum, micro, steps = 2, 2, 3, 5
    covered = [
        r
        for k in range(steps * accum)
        for rank in range(world)
        for r in range(micro_batch_start(k, rank, world, micro), micro_batch_start(k, rank, world, micro) + micro)
    ]
    assert sorted(covered) == list(range(steps * accum * world * micro))
    with pytest.raises(ValueError, match="rank=2"):
        micro_batch_start(0, 2, 2, 3)


def test_too_few_rows_is_an_error_with_the_numbers_unless_repeats_are_allowed():
    with pytest.raises(DataError) as err:
        check_rows(n_rows=1000, steps=30, batch_rows=64, seq_len=32, allow_repeat=False, where="the set")
    msg = str(err.value)
    for number in ("30 steps", "64 rows", "1,920 rows", "61,440 tokens", "1,000 train rows", "allow_repeat"):
        assert number in msg, (number, msg)
    info = check_rows(n_rows=1000, steps=30, batch_rows=64, seq_len=32, allow_repeat=True, where="the set")
    assert info["epochs"] == pytest.approx(1.92) and info["allow_repeat"] is True
    assert check_rows(1920, 30, 64, 32, False, "s")["epochs"] == 1.0


def test_padding_targets_are_masked_and_inputs_are_shifted():
    tokens = np.array([[5, 6, 7, 0, 0], [1, 2, 3, 4, 9]], dtype=np.uint16)
    x, y = rows_to_batch(tokens, np.array([3, 5]))
    assert x.tolist() == [[5, 6, 7, 0], [1, 2, 3, 4]]
    assert y.tolist() == [[6, 7, IGNORE_INDEX, IGNORE_INDEX], [2, 3, 4, 9]]
    assert x.dtype == y.dtype == torch.int64
    x2, y2 = rows_to_batch(tokens, None)  # the published set: every row full
    assert y2.tolist()[0] == [6, 7, 0, 0]
    # the loss skips exactly the masked targets
    logits = torch.randn(2, 4, 10)
    full = F.cross_entropy(logits.flatten(0, 1), y.flatten())
    keep = y.flatten() != IGNORE_INDEX
    assert torch.allclose(full, F.cross_entropy(logits.flatten(0, 1)[keep], y.flatten()[keep]))


def test_stream_reads_rows_in_order_and_refuses_to_run_past_the_end(small_packed):
    split = small_packed.train
    stream = iter(PackedTrainStream(split, micro=5, rank=1, world=2, start=3))
    x, _ = next(stream)
    expected, _ = rows_to_batch(*split.read((3 * 2 + 1) * 5, 5))
    assert torch.equal(x, expected)
    last_k = split.n_rows // 5 - 1
    tail = PackedTrainStream(split, micro=5, start=last_k)
    assert len(list(tail)) == 1  # the stream ends after the last whole micro-batch
    with pytest.raises(DataError, match="allow_repeat=false"):
        next(iter(tail))  # and a second epoch over it fails instead of replaying the rows
    wrapped = iter(PackedTrainStream(split, micro=5, start=last_k + 1, allow_repeat=True))
    assert torch.equal(next(wrapped)[0], rows_to_batch(*read_wrapped(split, (last_k + 1) * 5, 5))[0])
    assert np.array_equal(
        read_wrapped(split, split.n_rows - 2, 4)[0],
        np.concatenate([split.read(split.n_rows - 2, 2)[0], split.read(0, 2)[0]]),
    )


def test_val_rows_are_the_first_rows_split_over_ranks(small_packed):
    dm = PackedDataModule(small_packed, micro=7, val_rows=40)
    batches = list(dm.val_dataloader())
    assert [len(x) for x, _ in batches] == [7] * 5 + [5]
    assert Counter(_row_key(a, b) for x, y in batches for a, b in zip(x, y)) == _first_rows(small_packed.val, 40)
    with pytest.raises(DataError, match="val_rows=1,000,000"):
        PackedDataModule(small_packed, micro=7, val_rows=1_000_000)


class _Recorder(L.LightningModule):
    """Smallest trainable LM that remembers every row it was given (and can be told to crash)."""

    def __init__(self, vocab_size: int, out_dir: str | None = None, fail_at_step: int | None = None):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab_size, 4)
        self.head = torch.nn.Linear(4, vocab_size)
        self.out_dir, self.fail_at_step = out_dir, fail_at_step
        self.seen: list[tuple[int, tuple]] = []  # (global step, row)

    def training_step(self, batch, batch_idx):
        if self.global_step == self.fail_at_step:
            raise RuntimeError("killed")
        x, y = batch
        self.seen += [(self.global_step, _row_key(a, b)) for a, b in zip(x, y)]
        return F.cross_entropy(self.head(self.emb(x)).flatten(0, 1), y.flatten())

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def on_train_end(self):
        if self.out_dir:
            torch.save(self.seen, f"{self.out_dir}/rank{self.global_rank}.pt")


def _trainer(max_steps, **kw):
    return L.Trainer(
        accelerator="cpu",
        max_steps=max_steps,
        accumulate_grad_batches=2,
        limit_val_batches=0,
        num_sanity_val_steps=0,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        **kw,
    )


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore")
def test_one_pass_over_two_gloo_ranks_with_accumulation_sees_every_row_once(small_packed, tmp_path):
    micro, world, accum = 16, 2, 2
    steps = small_packed.train.n_rows // (micro * world * accum)  # the whole set, but for < one batch
    module = _Recorder(small_packed.vocab_size, str(tmp_path))
    trainer = _trainer(steps, devices=world, strategy="ddp_spawn")
    trainer.fit(module, datamodule=PackedDataModule(small_packed, micro=micro))
    seen = [torch.load(tmp_path / f"rank{r}.pt") for r in range(world)]
    assert all(len(s) == steps * accum * micro for s in seen)
    union = Counter(row for s in seen for _, row in s)
    used = steps * micro * world * accum
    assert small_packed.train.n_rows - used < micro * world * accum
    assert union == _first_rows(small_packed.train, used)  # each row once: no repeats, no gaps
    assert not set(r for _, r in seen[0]) & set(r for _, r in seen[1])  # ranks read disjoint rows


@pytest.mark.filterwarnings("ignore")
def test_killed_run_resumes_on_exactly_the_rows_it_had_not_trained_on(small_packed, tmp_path):
    micro, steps, ckpt = 8, 12, tmp_path / "last.ckpt"
    torch.manual_seed(0)
    first = _Recorder(small_packed.vocab_size, fail_at_step=7)
    with pytest.raises(RuntimeError, match="killed"):
        _trainer(steps, callbacks=[AtomicLastCheckpoint(ckpt, every_n_steps=3)]).fit(
            first, datamodule=PackedDataModule(small_packed, micro=micro)
        )
    second = _Recorder(small_packed.vocab_size)
    _trainer(steps).fit(second, datamodule=PackedDataModule(small_packed, micro=micro), ckpt_path=str(ckpt))
    kept = [row for step, row in first.seen if step < 6]  # trained into the step-6 checkpoint
    assert {step for step, _ in second.seen} == set(range(6, steps))
    assert Counter(kept) + Counter(row for _, row in second.seen) == _first_rows(small_packed.train, steps * 2 * micro)
    assert len(kept) + len(second.seen) == steps * 2 * micro
