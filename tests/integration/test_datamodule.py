"""Batches: a pure function of (seed, step, rank); a step's global batch does not depend on the split over ranks and
accumulation; a resumed Lightning run sees the same batches."""

from __future__ import annotations

import math
from itertools import islice

import lightning as L
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from loopscale.data.windows import (
    TokenDataModule,
    TrainStream,
    batch_at,
    micro_batch_at,
    unigram_entropy_nats,
    window_offsets,
)

B, T = 4, 32


def test_batch_is_shifted_windows_of_the_train_shard(default_prepared):
    tokens = default_prepared.tokens("train")
    x, y = batch_at(default_prepared, step=7, rank=0, seed=3, batch_size=B, seq_len=T)
    assert x.shape == y.shape == (B, T) and x.dtype == y.dtype == torch.int64
    assert torch.equal(x[:, 1:], y[:, :-1])
    offsets = window_offsets(len(tokens), 7, 0, 3, B, T)
    for row, o in enumerate(offsets):
        assert np.array_equal(x[row].numpy(), tokens[o : o + T]) and y[row, -1] == tokens[o + T]


def test_same_seed_same_batches_and_each_input_matters(default_prepared):
    def b(step=5, rank=0, seed=0):
        return batch_at(default_prepared, step, rank, seed, B, T)[0]

    assert torch.equal(b(), b())
    assert not torch.equal(b(), b(step=6))
    assert not torch.equal(b(), b(rank=1))
    assert not torch.equal(b(), b(seed=1))
    # the array form is the same function
    assert torch.equal(b(), batch_at(np.asarray(default_prepared.tokens("train")), 5, 0, 0, B, T)[0])


def test_offsets_cover_the_shard_uniformly_including_the_last_window():
    n = T + 3  # exactly 3 possible windows: offsets 0, 1, 2
    seen = np.concatenate([window_offsets(n, s, 0, 0, 8, T) for s in range(50)])
    assert set(seen.tolist()) == {0, 1, 2}
    with pytest.raises(ValueError, match="needs at least 33 tokens"):
        window_offsets(T, 0, 0, 0, 1, T)


def test_restarted_stream_continues_exactly_and_ranks_differ(default_prepared):
    full = list(islice(TrainStream(default_prepared, seed=1, batch_size=B, seq_len=T), 6))
    resumed = list(islice(TrainStream(default_prepared, seed=1, batch_size=B, seq_len=T, start_step=4), 2))
    for (x, y), (xr, yr) in zip(full[4:], resumed):
        assert torch.equal(x, xr) and torch.equal(y, yr)
    rank0, rank1 = (
        list(islice(TrainStream(default_prepared, seed=1, batch_size=B // 2, seq_len=T, rank=r, world_size=2), 6))
        for r in (0, 1)
    )
    assert all(not torch.equal(a[0], b[0]) for a, b in zip(rank0, rank1))


def test_a_steps_global_batch_is_the_same_for_any_split_over_ranks_and_accumulation(default_prepared):
    """4 windows per optimizer step: 1 process x 4, 2 ranks x 2, 2 ranks x 1 x 2 accumulation, 4 x 1 x 1."""

    def step_windows(world: int, accum: int, step: int) -> torch.Tensor:
        micro = B // (world * accum)
        parts = [
            TrainStream(
                default_prepared,
                seed=1,
                batch_size=micro,
                seq_len=T,
                rank=r,
                world_size=world,
                grad_accum=accum,
                start_step=step * accum,
            )
            for r in range(world)
        ]
        # micro-batches of one step: accumulation index outer, rank inner
        per_rank = [list(islice(p, accum)) for p in parts]
        return torch.cat([per_rank[r][j][0] for j in range(accum) for r in range(world)])

    for step in (0, 3):
        one = step_windows(1, 1, step)
        assert torch.equal(one, batch_at(default_prepared, step, 0, 1, B, T)[0])
        for world, accum in ((2, 1), (1, 2), (2, 2), (4, 1)):
            assert torch.equal(step_windows(world, accum, step), one), (world, accum)
    with pytest.raises(ValueError, match="rank=2"):
        TrainStream(default_prepared, seed=1, batch_size=B, seq_len=T, rank=2, world_size=2)


def test_datamodule_loaders(default_prepared):
    dm = TokenDataModule(default_prepared, seq_len=T, batch_size=B, seed=2, val_tokens=10 * (T + 1) + 5)
    first = list(islice(iter(dm.train_dataloader()), 3))
    for step, (x, y) in enumerate(first):
        ex, ey = batch_at(default_prepared, step, 0, 2, B, T)
        assert torch.equal(x, ex) and torch.equal(y, ey)
    dm.set_start_step(2)
    assert torch.equal(next(iter(dm.train_dataloader()))[0], first[2][0])

    val = list(dm.val_dataloader())
    assert [len(x) for x, _ in val] == [4, 4, 2]  # 10 windows, batches of B
    windows = torch.cat([torch.cat([x, y[:, -1:]], dim=1) for x, y in val])  # [10, T + 1]
    expected = np.asarray(default_prepared.tokens("val")[: 10 * (T + 1)], dtype=np.int64).reshape(10, T + 1)
    assert np.array_equal(windows.numpy(), expected)  # the first windows of the val shard, no overlap
    other = TokenDataModule(default_prepared, seq_len=T, batch_size=B, seed=99, val_tokens=10 * (T + 1) + 5)
    assert all(torch.equal(a[0], b[0]) for a, b in zip(val, other.val_dataloader()))  # seed-independent


def test_val_set_larger_than_the_shard_is_capped_and_too_small_is_an_error(default_prepared):
    n_val = default_prepared.n_val_tokens
    dm = TokenDataModule(default_prepared, seq_len=T, batch_size=B, seed=0, val_tokens=10 * n_val)
    assert len(dm.val_dataloader().dataset) == n_val // (T + 1)
    with pytest.raises(ValueError, match="fewer than one window"):
        TokenDataModule(default_prepared, seq_len=T, batch_size=B, seed=0, val_tokens=T).val_dataloader()


def test_unigram_entropy():
    assert unigram_entropy_nats(np.array([0, 0, 1, 1], dtype=np.uint16)) == pytest.approx(math.log(2))
    assert unigram_entropy_nats(np.array([3, 1, 2, 0, 7, 7, 7, 7])) == pytest.approx(
        -(4 * (1 / 8) * math.log(1 / 8) + 0.5 * math.log(0.5))
    )


def test_unigram_entropy_of_the_default_corpus(default_prepared):
    h = unigram_entropy_nats(default_prepared)
    assert 4.0 < h < math.log(default_prepared.vocab_size)  # far from uniform, far from constant


class _Recorder(L.LightningModule):
    """Smallest trainable LM that remembers every batch it was given."""

    def __init__(self, vocab_size: int):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab_size, 8)
        self.head = torch.nn.Linear(8, vocab_size)
        self.seen: list[torch.Tensor] = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        self.seen.append(x.clone())
        return F.cross_entropy(self.head(self.emb(x)).flatten(0, 1), y.flatten())

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def _fit(prepared, max_steps, ckpt_in=None, ckpt_out=None):
    torch.manual_seed(0)
    module = _Recorder(prepared.vocab_size)
    dm = TokenDataModule(prepared, seq_len=T, batch_size=B, seed=5, val_tokens=4 * (T + 1))
    trainer = L.Trainer(
        accelerator="cpu",
        devices=1,
        max_steps=max_steps,
        accumulate_grad_batches=2,
        limit_val_batches=0,
        num_sanity_val_steps=0,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(module, datamodule=dm, ckpt_path=ckpt_in)
    if ckpt_out:
        trainer.save_checkpoint(ckpt_out)
    return module.seen


@pytest.mark.filterwarnings("ignore")
def test_lightning_resume_sees_the_batches_an_uninterrupted_run_saw(default_prepared, tmp_path):
    # start_step is left unset: the datamodule reads trainer.global_step * accumulate_grad_batches
    full = _fit(default_prepared, max_steps=4)  # 4 optimizer steps x 2 accumulated = 8 batches
    head = _fit(default_prepared, max_steps=2, ckpt_out=tmp_path / "c.ckpt")
    tail = _fit(default_prepared, max_steps=4, ckpt_in=str(tmp_path / "c.ckpt"))
    assert len(full) == 8 and len(head) == 4 and len(tail) == 4
    for i, x in enumerate(head + tail):
        assert torch.equal(x, full[i]), f"batch {i} differs after resume"
        assert torch.equal(x, micro_batch_at(default_prepared, i, 0, 5, B, T, grad_accum=2)[0])


class _RankRecorder(_Recorder):
    def __init__(self, vocab_size: int, out_dir: str):
        super().__init__(vocab_size)
        self.out_dir = out_dir

    def on_train_end(self):
        torch.save(self.seen, f"{self.out_dir}/rank{self.global_rank}.pt")


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore")
def test_ddp_ranks_draw_their_own_slices_of_the_global_batch(default_prepared, tmp_path):
    # Two real gloo processes: rank and world size come from the attached trainer.
    module = _RankRecorder(default_prepared.vocab_size, str(tmp_path))
    dm = TokenDataModule(default_prepared, seq_len=T, batch_size=B, seed=5, val_tokens=4 * (T + 1))
    trainer = L.Trainer(
        accelerator="cpu",
        devices=2,
        strategy="ddp_spawn",
        max_steps=3,
        limit_val_batches=0,
        num_sanity_val_steps=0,
        use_distributed_sampler=False,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(module, datamodule=dm)
    seen = [torch.load(tmp_path / f"rank{r}.pt") for r in (0, 1)]
    for rank, batches in enumerate(seen):
        assert len(batches) == 3
        for step, x in enumerate(batches):
            assert torch.equal(x, micro_batch_at(default_prepared, step, rank, 5, B, T, world_size=2)[0])
    assert all(not torch.equal(a, b) for a, b in zip(*seen))
    # together the two ranks train on the one-process run's batch of 2 B windows
    for step in range(3):
        assert torch.equal(
            torch.cat([seen[0][step], seen[1][step]]), batch_at(default_prepared, step, 0, 5, 2 * B, T)[0]
        )
