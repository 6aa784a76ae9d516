"""Training throughput of the looped transformer on CPU (fp32): forward + backward tokens/s.

Runs the small iso-depth CPU grid (L_eff = 12, d = 128, k = 8 / r) at r = 1, 2, 4, 8 and a plain
non-looped GPT written out below, the obvious way, with the same width, depth, attention (SDPA, RoPE,
QK-norm), ReLU^2 MLP, vocabulary and head. Models are timed round-robin (one step each per round) so
load from other processes hits all of them alike; tokens/s and the ratios use each model's fastest step
(the least disturbed one on a shared machine), and the median is shown next to it. One intra-op thread by
default: on this 2-core machine, shared with other jobs, two OpenMP threads make step times erratic
(2-3x swings), while one thread gives steps repeatable to ~2%. `--threads 2` for the other view.

Target: every looped r within 5% of r = 1 (iso-depth: same layer passes, same FLOPs up to the injection).

    .venv/bin/python benchmarks/bench_model.py            # ~1 min
    .venv/bin/python benchmarks/bench_model.py --quick    # ~20 s
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F
from torch import nn

from loopscale.model.accounting import cpu_model, flops_per_token
from loopscale.model.transformer import LoopedTransformer

# ---------------------------------------------------------------------------------------------------- reference GPT


class RefBlock(nn.Module):
    def __init__(self, d: int, n_head: int):
        super().__init__()
        self.n_head = n_head
        self.norm1, self.norm2 = nn.RMSNorm(d, eps=1e-6), nn.RMSNorm(d, eps=1e-6)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.out = nn.Linear(d, d, bias=False)
        self.fc = nn.Linear(d, 4 * d, bias=False)
        self.down = nn.Linear(4 * d, d, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        B, T, d = x.shape
        hd = d // self.n_head
        q, k, v = self.qkv(self.norm1(x)).view(B, T, 3, self.n_head, hd).permute(2, 0, 3, 1, 4)  # [B, H, T, hd]
        q, k = F.rms_norm(q, (hd,), eps=1e-6), F.rms_norm(k, (hd,), eps=1e-6)

        def rope(t):
            t1, t2 = t[..., : hd // 2], t[..., hd // 2 :]
            return torch.cat((t1 * cos - t2 * sin, t1 * sin + t2 * cos), dim=-1)

        y = F.scaled_dot_product_attention(rope(q), rope(k), v, is_causal=True)
        x = x + self.out(y.transpose(1, 2).reshape(B, T, d))
        return x + self.down(F.relu(self.fc(self.norm2(x))).square())


class RefGPT(nn.Module):
    def __init__(self, vocab: int, d: int, n_head: int, n_layer: int, seq_len: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(RefBlock(d, n_head) for _ in range(n_layer))
        self.norm = nn.RMSNorm(d, eps=1e-6)
        self.head = nn.Linear(d, vocab, bias=False)
        hd = d // n_head
        angles = torch.outer(torch.arange(seq_len).float(), 10000.0 ** (-torch.arange(0, hd, 2).float() / hd))
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x, self.cos, self.sin)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


# ---------------------------------------------------------------------------------------------------- timing


def step_s(model: nn.Module, idx: torch.Tensor) -> float:
    start = time.perf_counter()
    model(idx, idx).backward()
    for p in model.parameters():
        p.grad = None
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller batch, fewer rounds")
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--batch", type=int, default=None, help="sequences per step (default 8, quick 4)")
    parser.add_argument("--rounds", type=int, default=None, help="timed steps per model (default 10, quick 4)")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    args = parser.parse_args()
    batch = args.batch or (4 if args.quick else 8)
    rounds = args.rounds or (4 if args.quick else 10)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    configs = {f"looped r={r}": cpu_model(args.d_model, r) for r in (1, 2, 4, 8)}
    models = {name: LoopedTransformer(cfg) for name, cfg in configs.items()}
    base = configs["looped r=1"]
    models["reference GPT"] = RefGPT(base.padded_vocab_size, base.d_model, base.n_head, base.l_eff, base.seq_len)
    idx = torch.randint(0, base.vocab_size, (batch, base.seq_len))
    tokens = batch * base.seq_len

    for model in models.values():  # warm-up: allocator, kernels
        step_s(model, idx)
    times = {name: [] for name in models}
    for _ in range(rounds):
        for name, model in models.items():
            times[name].append(step_s(model, idx))

    print(
        f"CPU fp32, {torch.get_num_threads()} threads, batch {batch} x T {base.seq_len} = {tokens} tokens/step, "
        f"d={base.d_model}, L_eff={base.l_eff}, vocab {base.padded_vocab_size}, {rounds} rounds"
    )
    print(
        f"{'model':<15} {'k':>3} {'N':>10} {'MFLOP/tok':>10} {'tokens/s':>10} {'(median)':>9} {'GFLOP/s':>8} "
        f"{'vs r=1':>7} {'vs ref':>7}"
    )
    tps = {name: tokens / min(ts) for name, ts in times.items()}
    median_tps = {name: tokens / statistics.median(ts) for name, ts in times.items()}
    for name, model in models.items():
        cfg = configs.get(name, base)  # the reference has the r = 1 shapes and FLOPs
        n = sum(p.numel() for p in model.parameters()) - 2 * base.padded_vocab_size * base.d_model
        k = cfg.n_rec if name in configs else base.l_eff
        f = flops_per_token(cfg)
        print(
            f"{name:<15} {k:>3} {n:>10,} {f / 1e6:>10.2f} {tps[name]:>10,.0f} {median_tps[name]:>9,.0f} "
            f"{tps[name] * f / 1e9:>8.1f} "
            f"{tps[name] / tps['looped r=1']:>7.3f} {tps[name] / tps['reference GPT']:>7.3f}"
        )


if __name__ == "__main__":
    main()
