"""Causal attention's core, y = softmax(q k^T / sqrt(hd) + M) v with M = -inf above the diagonal, computed by
the kernel that is faster for the shape.

PyTorch's SDPA (`F.scaled_dot_product_attention`, is_causal) everywhere but one case: short fp32 sequences with
head dim 8 or less on CPU (`uses_matmul`: T <= MATMUL_MAX_T, hd <= MATMUL_MAX_HEAD_DIM, no autocast). There the CPU
flash-attention kernel does little arithmetic per call and much bookkeeping (it tiles the queries in blocks of
rows and runs small GEMMs and an online softmax per block and head), and three batched matmuls over all heads at
once are faster. Forward + backward of one attention, one thread, batch 16, 4 heads, matmul / SDPA time
(`benchmarks/bench_attention.py`): hd = 8: 0.73 (T = 32), 0.76 (T = 64), 1.35 (T = 128); hd = 16-64 at T <= 64
0.88-1.12, within the two runs' noise of each other, so SDPA stays there. In the compiled demo models (T = 64, hd =
8; Inductor fuses the mask, the scale and the softmax around the two matmuls) a training step took 66 instead of 72
ms at d = 48, r = 4 and 21.1-21.6 instead of 21.7-22.4 ms at d = 16, r = 1; the whole demo grid trained from the
graph cache in 5-6% less time (docs/results.md, issue 37).

The two compute the same function; in fp32 they differ by rounding (~1e-6 of the output here). The matmul form
keeps the probabilities [B H, T, T] for backward where flash attention keeps one log-sum-exp per row: at T <= 64
that is at most 4 T = 256 bytes a token and head, and it is never taken under autocast (the memory model,
loopscale/model/memory.py, counts bf16-autocast training). Its FLOPs are flash attention's (two matmuls forward,
four backward, over the full T x T square), so the FLOP accounting holds for both.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

MATMUL_MAX_T = 64  # longest sequence for which the matmul form is taken
MATMUL_MAX_HEAD_DIM = 8  # largest head dimension for which it is taken


def uses_matmul(T: int, head_dim: int, device_type: str, dtype: torch.dtype, autocast: bool = False) -> bool:
    """Whether `causal_attention` takes the batched-matmul form (module docstring) for this shape."""
    return (
        device_type == "cpu"
        and dtype == torch.float32
        and not autocast
        and T <= MATMUL_MAX_T
        and head_dim <= MATMUL_MAX_HEAD_DIM
    )


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """q, k, v [B, H, T, hd] -> [B, H, T, hd]: causal softmax attention with the scale 1 / sqrt(hd)."""
    B, H, T, hd = q.shape
    autocast = torch.is_autocast_enabled(q.device.type)
    if not uses_matmul(T, hd, q.device.type, q.dtype, autocast):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    mask = torch.full((T, T), float("-inf"), dtype=q.dtype, device=q.device).triu(1)  # [T, T], -inf above diagonal
    scores = torch.baddbmm(  # M + (q k^T) / sqrt(hd), all heads in one batch: [B H, T, T]
        mask.expand(B * H, T, T), q.reshape(B * H, T, hd), k.reshape(B * H, T, hd).transpose(1, 2), alpha=hd**-0.5
    )
    return torch.bmm(scores.softmax(dim=-1), v.reshape(B * H, T, hd)).view(B, H, T, hd)
