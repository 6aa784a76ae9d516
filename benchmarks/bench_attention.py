"""Causal attention on CPU: PyTorch's SDPA (flash attention) against the batched-matmul form of
loopscale/model/attention.py, forward + backward, one thread, over a grid of sequence lengths and head dims;
the shapes `uses_matmul` sends to the matmul form are marked.

    .venv/bin/python benchmarks/bench_attention.py [--batch 16] [--heads 4] [--T 32 64 128 256] \
        [--head-dims 8 16 32 64] [--calls 200]

Both kernels run in the same process on the same inputs, their calls alternated in rounds (a shared machine's
load hits both); printed: the median microseconds of one forward + backward each, matmul / SDPA time, and the
largest difference of the outputs. The whole-model effect (compiled training steps) is measured by
`benchmarks/bench_compile.py --interleaved`.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from loopscale.model import attention


def sdpa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def fwd_bwd_s(fn, q, k, v, grad) -> float:
    started = time.perf_counter()
    fn(q, k, v).backward(grad)
    return time.perf_counter() - started


def measure(batch: int, heads: int, T: int, hd: int, calls: int) -> dict:
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(batch, heads, T, hd, generator=g, requires_grad=True) for _ in range(3))
    grad = torch.randn(batch, heads, T, hd, generator=g)
    kernels = {"sdpa": sdpa, "matmul": attention.causal_attention}
    times = {name: [] for name in kernels}
    for round_ in range(calls + 10):
        for name in kernels if round_ % 2 == 0 else reversed(list(kernels)):
            spent = fwd_bwd_s(kernels[name], q, k, v, grad)
            if round_ >= 10:  # warm-up left out
                times[name].append(spent)
    with torch.no_grad():
        diff = (attention.causal_attention(q, k, v) - sdpa(q, k, v)).abs().max().item()
    return {name: 1e6 * statistics.median(t) for name, t in times.items()} | {"diff": diff}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--T", type=int, nargs="+", default=[32, 64, 128, 256])
    parser.add_argument("--head-dims", type=int, nargs="+", default=[8, 16, 32, 64])
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"1 thread, batch {args.batch}, {args.heads} heads, fp32, forward + backward, median of {args.calls} calls")
    print(f"{'T':>5} {'hd':>4} {'SDPA us':>9} {'matmul us':>10} {'matmul/SDPA':>12} {'max |diff|':>11}  form taken")
    for T in args.T:
        for hd in args.head_dims:
            taken = attention.uses_matmul(T, hd, "cpu", torch.float32)
            # outside its shapes causal_attention takes SDPA: its limits are widened to time the matmul form there
            limits = (attention.MATMUL_MAX_T, attention.MATMUL_MAX_HEAD_DIM)
            attention.MATMUL_MAX_T, attention.MATMUL_MAX_HEAD_DIM = max(T, limits[0]), max(hd, limits[1])
            try:
                got = measure(args.batch, args.heads, T, hd, args.calls)
            finally:
                attention.MATMUL_MAX_T, attention.MATMUL_MAX_HEAD_DIM = limits
            print(
                f"{T:>5} {hd:>4} {got['sdpa']:>9.0f} {got['matmul']:>10.0f} {got['matmul'] / got['sdpa']:>12.2f} "
                f"{got['diff']:>11.1e}  {'matmul' if taken else 'SDPA'}",
                flush=True,
            )


if __name__ == "__main__":
    main()
