"""Data pipeline speed: is the loader ever the bottleneck of a CPU training step?

Measures, in one run on this machine:
  1. `prepare` of the default corpus (Shakespeare, BPE 2048) into a cold cache: tokens/s, and the warm
     (cached) second call;
  2. the training loader (TokenDataModule.train_dataloader) at the CPU preset: batches/s and tokens/s;
  3. the reference: one optimizer step (forward + backward + AdamW) of a small model at the same batch:
     loopscale.model.transformer.LoopedTransformer with d_model=128 and 4 layers, the cheapest model the CPU grid
     would train.
  4. `loopscale data pack` of the same corpus at T = seq_len (prepare cached): packing tokens/s, padding;
  5. the packed-rows reader (PackedDataModule.train_dataloader): rows/s and its share of the step above;
  6. the reader on rows of the published shape (T + 1 = 2049 uint16, synthetic, 32 rows per micro-batch).
The window loader passes if one batch costs under 5% of one such training step; the packed reader must
stay under 1%.

    .venv/bin/python benchmarks/bench_data.py [--batch-size 16] [--seq-len 256] [--loader-batches 300]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from itertools import islice
from pathlib import Path

import torch

from loopscale.config.model import ModelConfig
from loopscale.config.schema import DataConfig
from loopscale.data.packed_batches import PackedDataModule
from loopscale.data.packed_parquet import open_packed, pack, write_rows
from loopscale.data.shards import PreparedData, prepare
from loopscale.data.windows import TokenDataModule, batch_at
from loopscale.model.transformer import LoopedTransformer

LOADER_BUDGET = 0.05  # a batch may cost at most this fraction of a training step
READER_BUDGET = 0.01  # the packed-rows reader: at most 1% of a step


def time_prepare(data_dir: str) -> tuple[float, float, PreparedData]:
    cfg = DataConfig(data_dir=data_dir)
    start = time.perf_counter()
    prepared = prepare(cfg, progress=False)
    cold_s = time.perf_counter() - start
    start = time.perf_counter()
    prepare(cfg, progress=False)
    warm_s = time.perf_counter() - start
    return cold_s, warm_s, prepared


def time_loader(prepared, batch_size: int, seq_len: int, n_batches: int) -> float:
    """Seconds per batch drawn through the DataModule's DataLoader (what Lightning iterates)."""
    dm = TokenDataModule(prepared, seq_len=seq_len, batch_size=batch_size, seed=0, val_tokens=65536)
    loader = iter(dm.train_dataloader())
    next(loader)  # opens the memmap
    start = time.perf_counter()
    for _batch in islice(loader, n_batches):
        pass
    return (time.perf_counter() - start) / n_batches


def time_train_step(prepared, batch_size: int, seq_len: int, n_steps: int = 8) -> float:
    """Seconds per optimizer step of a d=128, 4-layer LoopedTransformer on real batches."""
    torch.manual_seed(0)
    cfg = ModelConfig(
        vocab_size=prepared.vocab_size,
        d_model=128,
        n_prelude=1,
        n_rec=2,
        n_coda=1,
        r=1,
        injection="passthrough",
        seq_len=seq_len,
    )
    model = LoopedTransformer(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batches = [batch_at(prepared, s, 0, 0, batch_size, seq_len) for s in range(n_steps + 2)]

    def step(x, y):
        loss = model(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for x, y in batches[:2]:  # warm-up: allocator, first-call overheads
        step(x, y)
    start = time.perf_counter()
    for x, y in batches[2:]:
        step(x, y)
    return (time.perf_counter() - start) / n_steps


def time_pack(data_dir: str, seq_len: int):
    """Seconds to pack the (already prepared) default corpus at T = seq_len, and the set."""
    cfg = DataConfig(data_dir=data_dir)
    start = time.perf_counter()
    packed = pack(cfg, seq_len, progress=False)
    return time.perf_counter() - start, packed


def time_reader(packed, micro: int, n_batches: int) -> float:
    """Seconds per micro-batch drawn through PackedDataModule's train DataLoader (one pass, in order)."""
    n_batches = min(n_batches, packed.train.n_rows // micro - 1)
    loader = iter(PackedDataModule(packed, micro).train_dataloader())
    next(loader)
    start = time.perf_counter()
    for _ in islice(loader, n_batches):
        pass
    return (time.perf_counter() - start) / n_batches


def time_reader_beside_a_step(packed, micro: int, n_batches: int, step_s: float) -> float:
    """Seconds per micro-batch the training loop waits on the reader when each micro-batch is followed by
    `step_s` of work that frees the CPU (a GPU step): the next row group decodes meanwhile."""
    loader = iter(PackedDataModule(packed, micro).train_dataloader())
    next(loader)
    waited = 0.0
    for _ in range(min(n_batches, packed.train.n_rows // micro - 1)):
        time.sleep(step_s)
        start = time.perf_counter()
        next(loader)
        waited += time.perf_counter() - start
    return waited / n_batches


def published_shape(tmp: str, n_rows: int = 8192):
    """A synthetic packed set of the published shape: rows of 2049 uint16 ids, no padding."""
    import numpy as np

    rng = np.random.default_rng(0)
    root = Path(tmp) / "published-shape"
    root.mkdir()
    rows = rng.integers(0, 32000, size=(n_rows, 2049), dtype=np.uint16)
    full = np.full(n_rows, 2049, dtype=np.int32)
    for split, n in (("train", n_rows), ("val", 64)):
        write_rows(root, split, rows[:n], full[:n], np.arange(n))
    return open_packed(root)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seq-len", type=int, default=256)
    parser.add_argument("--loader-batches", type=int, default=300)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as data_dir:
        cold_s, warm_s, prepared = time_prepare(data_dir)
        n_tokens = prepared.n_train_tokens + prepared.n_val_tokens
        print(
            f"prepare (default corpus, cold cache): {n_tokens:,} tokens in {cold_s:.2f} s "
            f"= {n_tokens / cold_s:,.0f} tokens/s   (train {prepared.n_train_tokens:,}, val "
            f"{prepared.n_val_tokens:,}, vocab {prepared.vocab_size})"
        )
        print(f"prepare (warm cache):                 {warm_s * 1e3:.1f} ms")

        batch_tokens = args.batch_size * args.seq_len
        loader_s = time_loader(prepared, args.batch_size, args.seq_len, args.loader_batches)
        print(
            f"train loader  B={args.batch_size} T={args.seq_len}: {1 / loader_s:,.0f} batches/s "
            f"= {batch_tokens / loader_s:,.0f} tokens/s ({loader_s * 1e3:.3f} ms/batch)"
        )
        step_s = time_train_step(prepared, args.batch_size, args.seq_len)
        print(
            f"train step    d=128, 4 layers, AdamW:  {1 / step_s:,.2f} steps/s "
            f"= {batch_tokens / step_s:,.0f} tokens/s ({step_s * 1e3:.1f} ms/step, {torch.get_num_threads()} threads)"
        )

        pack_s, packed = time_pack(data_dir, args.seq_len)
        n_packed = sum(packed.meta["tokens"].values())
        print(
            f"pack (T={args.seq_len}, shards cached):   {n_packed:,} tokens in {pack_s:.2f} s = "
            f"{n_packed / pack_s:,.0f} tokens/s, {packed.train.n_rows:,} train rows, padding "
            f"{packed.meta['waste_share']['train']:.3%}"
        )
        reader_s = time_reader(packed, args.batch_size, args.loader_batches)
        print(
            f"packed reader B={args.batch_size} T={args.seq_len}: {args.batch_size / reader_s:,.0f} rows/s "
            f"({reader_s * 1e3:.3f} ms/batch)"
        )
        big = published_shape(data_dir)
        big_s = time_reader(big, 32, big.train.n_rows // 32 - 1)
        print(
            f"packed reader, published shape (32 x 2049 uint16), back to back: {32 / big_s:,.0f} rows/s "
            f"({big_s * 1e3:.3f} ms/micro-batch, parquet decoding included)"
        )
        for gpu_step_s in (0.02, 0.1):
            wait_s = time_reader_beside_a_step(big, 32, 96, gpu_step_s)
            print(
                f"  beside a {gpu_step_s * 1e3:.0f} ms step: the loop waits {wait_s * 1e3:.3f} ms/micro-batch "
                f"= {wait_s / gpu_step_s:.2%} of the step (budget {READER_BUDGET:.0%})"
            )

    share = loader_s / step_s
    verdict = "OK: the loader is not the bottleneck" if share < LOADER_BUDGET else "TOO SLOW"
    print(f"loader / step = {share:.2%} (budget {LOADER_BUDGET:.0%}): {verdict}")
    share = reader_s / step_s
    verdict = "OK" if share < READER_BUDGET else "TOO SLOW"
    print(f"packed reader / step = {share:.2%} (budget {READER_BUDGET:.0%}): {verdict}")


if __name__ == "__main__":
    main()
