"""The LM head and its cross-entropy in chunks of tokens, so the logits of a whole batch never exist at once.

Done in one piece, the head keeps per token: the bf16 logits over the padded vocabulary, their fp32 copy
cut to the true vocabulary, the soft-capped tanh and the log-softmax for backward (~14 V bytes; 27 GiB at
a device batch of 32 x 2048 tokens and V = 32,001), and as much again in transients during backward.
Here each chunk of HEAD_CHUNK_TOKENS tokens runs the same ops (bf16 matmul under autocast, the cut to
the true vocabulary, fp32, c tanh(z / c), mean cross-entropy with ignore_index -100), and its gradients
with respect to x and the head weight are taken right away, inside the forward: the loss is the end of
the graph, so they are the whole backward up to a factor, d loss. What is kept for backward is one
gradient per token (x's dtype) and one fp32 gradient of the weight (V_pad x d), whatever the batch.

The FLOPs are those of the unchunked head (the backward matmuls run in the forward, not twice). Under
torch.compile the function runs eagerly (torch.compiler.disable): a compiled whole model breaks its
graph once, before the head. Numerics are the published ones; only the order of the fp32 sums differs.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from loopscale.model.memory import HEAD_CHUNK_TOKENS  # sized there: the chunk's transient is part of the peak

IGNORE_INDEX = -100  # packed rows mark their padding with it (loopscale/data/packed_batches.py)


def head_logits(x: torch.Tensor, weight: torch.Tensor, vocab_size: int, softcap: float | None) -> torch.Tensor:
    """x [..., d] -> fp32 logits over the true vocabulary [..., V]: the head matmul over the padded rows (bf16
    under autocast), the cut to the first vocab_size rows, fp32, then c tanh(z / c) when softcap = c."""
    logits = F.linear(x, weight)[..., :vocab_size].float()  # [..., V_pad] -> [..., V] fp32
    if softcap is not None:
        logits = softcap * torch.tanh(logits / softcap)
    return logits


def _chunk_sum_and_grads(xc, weight, tc, vocab_size, softcap, want_x, want_w):
    """Summed loss of one chunk (xc [n, d], tc [n]) and its gradients wrt xc and the weight (None when not
    wanted): a small graph built and differentiated here, under the caller's autocast."""
    with torch.set_grad_enabled(want_x or want_w):
        x_leaf = xc.detach().requires_grad_(want_x)
        w_leaf = weight.detach().requires_grad_(want_w)
        loss = F.cross_entropy(
            head_logits(x_leaf, w_leaf, vocab_size, softcap), tc, reduction="sum", ignore_index=IGNORE_INDEX
        )
        wanted = [t for t, want in ((x_leaf, want_x), (w_leaf, want_w)) if want]
        grads = iter(torch.autograd.grad(loss, wanted)) if wanted else iter(())
    return loss.detach(), next(grads) if want_x else None, next(grads) if want_w else None


class _ChunkedHeadLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, targets, vocab_size, softcap, chunk):  # x [N, d], weight [V_pad, d], targets [N]
        want_x, want_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        ctx.weight_dtype = weight.dtype  # its gradient goes back in its own dtype (bf16 for a bf16 embedding)
        total = torch.zeros((), dtype=torch.float32, device=x.device)
        grad_x = torch.empty_like(x) if want_x else None  # [N, d]
        grad_w = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device) if want_w else None
        for start in range(0, x.shape[0], chunk):
            part = slice(start, start + chunk)
            loss, gx, gw = _chunk_sum_and_grads(x[part], weight, targets[part], vocab_size, softcap, want_x, want_w)
            total += loss
            if want_x:
                grad_x[part] = gx
            if want_w:
                grad_w += gw
        n_valid = (targets != IGNORE_INDEX).sum()  # the mean is over real targets, as F.cross_entropy's
        ctx.save_for_backward(grad_x, grad_w, n_valid)
        return total / n_valid

    @staticmethod
    def backward(ctx, grad_out):
        grad_x, grad_w, n_valid = ctx.saved_tensors
        scale = grad_out / n_valid
        gx = None if grad_x is None else grad_x * scale.to(grad_x.dtype)
        gw = None if grad_w is None else (grad_w * scale).to(ctx.weight_dtype)
        return gx, gw, None, None, None, None


@torch.compiler.disable
def chunked_head_loss(
    x: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    vocab_size: int,
    softcap: float | None,
    chunk: int = HEAD_CHUNK_TOKENS,
) -> torch.Tensor:
    """Mean cross-entropy (nats) of the head on x [B, T, d] against targets [B, T] (ignore_index -100), the
    same value as F.cross_entropy(head_logits(x, ...)), with at most `chunk` tokens' logits alive at once."""
    x, targets = x.flatten(0, 1), targets.flatten()  # [N, d], [N]
    if torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad):
        return _ChunkedHeadLoss.apply(x, weight, targets, vocab_size, softcap, chunk)
    # no_grad / inference_mode (validation): the chunks' losses only
    total = sum(
        _chunk_sum_and_grads(x[i : i + chunk], weight, targets[i : i + chunk], vocab_size, softcap, False, False)[0]
        for i in range(0, x.shape[0], chunk)
    )
    return total / (targets != IGNORE_INDEX).sum()
