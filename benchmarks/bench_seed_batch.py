"""Would training a point's seeds together buy seeds cheaper on a CPU? One training step (forward, backward, AdamW)
of the demo's models at their batch (16 x 64 tokens), against S seeds' worth in one step two ways:

  batch   the same model at S x the batch (an upper bound on what S models stacked could share: one weight set)
  vmap    S models with their own weights, stacked (torch.func.stack_module_state) and stepped as one through
          torch.func.vmap over functional_call, each on its own batch: what seeds trained together would run

If a step were bound by per-op overhead, S seeds would cost about one step and a demo could afford ~S times its seeds.
Printed per shape: ms per step and the ratio to one seed's step (S would mean no gain). One torch thread, as each
demo worker trains.

    .venv/bin/python benchmarks/bench_seed_batch.py [--seeds 5] [--steps 20]
"""

from __future__ import annotations

import argparse
import copy
import time

import torch
from torch.func import functional_call, stack_module_state, vmap

from loopscale.config.schema import with_vocab
from loopscale.launch.sweep import expand
from loopscale.model.transformer import LoopedTransformer

SHAPES = [("C2.5e11_3.54e11-d16", 1), ("C2.5e11_3.54e11-d16", 8), ("C2.5e11_3.54e11_5e11-d32", 1)]
SHAPES += [("C2.5e11_3.54e11_5e11-d32", 8), ("C2.5e11_3.54e11_5e11-d48", 1), ("C2.5e11_3.54e11_5e11-d48", 8)]


def ms_per_step(step, steps: int) -> float:
    for _ in range(3):  # warm the allocator and the autograd graph's caches
        step()
    started = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - started) / steps * 1e3


def measure(point: str, r: int, seeds: int, steps: int) -> dict[str, float]:
    cfg = expand(["experiment=isodepth_cpu_demo", f"point={point}", f"model.r={r}"])[0].cfg
    cfg = with_vocab(cfg, cfg.data.vocab_size)
    B, T, V = cfg.budget.batch_size, cfg.model.seq_len, cfg.model.vocab_size
    model = LoopedTransformer(cfg.model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def batch_step(batch: int):
        x, y = torch.randint(0, V, (batch, T)), torch.randint(0, V, (batch, T))  # [batch, T] tokens
        opt.zero_grad()
        model(x, y).backward()
        opt.step()

    models = [LoopedTransformer(cfg.model) for _ in range(seeds)]
    params, buffers = stack_module_state(models)  # each [S, ...]
    params = {k: v.detach().requires_grad_() for k, v in params.items()}
    shell = copy.deepcopy(models[0]).to("meta")
    stacked_opt = torch.optim.AdamW(list(params.values()), lr=1e-3)  # elementwise: S AdamWs in one
    losses = vmap(lambda p, b, x, y: functional_call(shell, (p, b), (x, y)), randomness="different")

    def vmap_step():
        x, y = torch.randint(0, V, (seeds, B, T)), torch.randint(0, V, (seeds, B, T))  # [S, B, T]
        stacked_opt.zero_grad()
        losses(params, buffers, x, y).sum().backward()  # each seed's loss reaches only its own weights
        stacked_opt.step()

    one = ms_per_step(lambda: batch_step(B), steps)
    batch = ms_per_step(lambda: batch_step(seeds * B), steps)
    stacked = ms_per_step(vmap_step, steps)
    return {"one_ms": one, "batch_ms": batch, "vmap_ms": stacked}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(
        f"{'shape':<30} {'one seed':>9} {'batch x S':>10} {'ratio':>6} {'vmap S':>9} {'ratio':>6}   (S = {args.seeds})"
    )
    for point, r in SHAPES:
        t = measure(point, r, args.seeds, args.steps)
        print(
            f"{point.rsplit('-', 1)[1] + f' r={r}':<30} {t['one_ms']:>7.1f}ms {t['batch_ms']:>8.1f}ms "
            f"{t['batch_ms'] / t['one_ms']:>6.2f} {t['vmap_ms']:>7.1f}ms {t['vmap_ms'] / t['one_ms']:>6.2f}"
        )


if __name__ == "__main__":
    main()
