"""The LM head and its cross-entropy in chunks of tokens, so the logits of a whole batch never exist at once.

Done in one piece, the head keeps per token: the bf16 logits over the padded vocabulary, their fp32 copy
cut to the true vocabulary, the soft-capped tanh and the log-softmax for backward (~14 V bytes; 27 GiB at
a device batch of 32 x 2048 tokens and V = 32,001), and as much again in transients during backward.
Here each chunk of HEAD_CHUNK_TOKENS tokens runs the same ops (bf16 matmul under autocast, the cut to
the true vocabulary, fp32, c tanh(z / c), mean cross-entropy with ignore_index -100), and its gradients
with respect to x and the head weight are taken right away, inside the forward: the loss is the end of
the graph, so they are the whole backward up to a factor, d loss. What is kept for backward is one
gradient per token (x's dtype) and one fp32 gradient of the weight (V_pad x d), whatever the batch.

The gradients are written out (`chunk_loss_and_grads`), not asked of autograd, so the chunk's math is one
function torch.compile can fuse. The FLOPs are those of the unchunked head (the backward matmuls run in the
forward, not twice). The chunk loop itself stays outside any graph (torch.compiler.disable: a compiled whole
model breaks its graph once, before the head); a model trained compiled runs each chunk's math compiled
(`compiled_chunk`, its own graph), which fuses the head's elementwise work. At the CPU demo's shapes (1024 tokens,
V = 512; one thread, medians of 400 interleaved calls) the head's forward + backward took 5.5 ms (d = 16) and 7.0 ms
(d = 48) through autograd, 4.2 and 5.4 ms written out, 3.1 and 4.2 ms compiled, against ~24 ms of a whole compiled
d = 16 training step. Numerics are the published ones; only the order of the fp32 sums differs.
"""

from __future__ import annotations

import functools

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


def chunk_loss_and_grads(xc, weight, tc, vocab_size: int, softcap: float | None, want_x: bool, want_w: bool):
    """Summed loss of one chunk (xc [n, d], tc [n]) and its gradients with respect to xc and the weight (None when
    not wanted), written out rather than asked of autograd, so that torch.compile can fuse it (`compiled_chunk`):

        z = x W^T cut to V, fp32;  s = c tanh(z / c);  loss = sum over valid tokens of -log softmax(s)[t]
        dL/ds = softmax(s) - onehot(t) (0 on ignored tokens);  dL/dz = dL/ds (1 - tanh^2(z / c))
        dL/dx = dL/dz W;  dL/dW = dL/dz^T x  (dL/dz is 0 on the padded rows: they get no gradient)

    The three matmuls run under the caller's autocast as autograd would run them (bf16 on a bf16 autocast, dL/dz
    cast to the logits' dtype first); the rest in fp32. Returns the gradients in the matmuls' dtype."""
    z = F.linear(xc, weight)[:, :vocab_size]  # [n, V] (bf16 under autocast)
    logits_dtype = z.dtype
    s = z.float()
    del z  # eagerly each intermediate goes as soon as it is used: the chunk's transient is the head's peak
    if softcap is not None:
        th = torch.tanh(s / softcap)
        s = th * softcap
    valid = tc != IGNORE_INDEX  # [n]
    safe = torch.where(valid, tc, 0)
    log_p = torch.log_softmax(s, dim=-1)  # [n, V] fp32
    del s
    loss = -(log_p.gather(1, safe[:, None]).squeeze(1) * valid).sum()
    if not (want_x or want_w):
        return loss, None, None
    if torch.compiler.is_compiling():  # out of place: Inductor plans the buffers, and an indexed in-place write
        # before a fused reduction is what its CPU code generator fails on (pytorch/pytorch#196570)
        target = torch.arange(vocab_size, device=log_p.device)[None, :] == safe[:, None]  # one-hot [n, V]
        g = (log_p.exp() - target.to(log_p.dtype)) * valid[:, None]
    else:  # eagerly in place: the chunk's transient stays ~12 V bytes a token (model/memory.py)
        g = log_p.exp_()  # softmax(s), in log_p's memory
        g[torch.arange(g.shape[0], device=g.device), safe] -= 1.0
        g.mul_(valid[:, None])
    if softcap is not None:
        g = torch.ops.aten.tanh_backward(g, th)  # g (1 - tanh^2), one kernel eagerly
        del th
    # [n, V_pad] in the logits' dtype, as autograd hands it to the matmul's backward: zero on the padded rows, so
    # the backward matmuls are the unchunked head's (its FLOPs, model/accounting.py)
    g = F.pad(g.to(logits_dtype), (0, weight.shape[0] - vocab_size))
    grad_x = g @ weight if want_x else None  # [n, d]
    grad_w = g.t() @ xc if want_w else None  # [V_pad, d]
    return loss, grad_x, grad_w


@functools.cache
def compiled_chunk(backend: str):
    """chunk_loss_and_grads through torch.compile with `backend` (the model's trainer.compile_backend), made once
    per backend: a model trained compiled runs its head fused too, as a graph of its own beside the model's (the
    head is where the model's graph breaks). Static shapes, as the model's."""
    return torch.compile(chunk_loss_and_grads, backend=backend, dynamic=False)


class _ChunkedHeadLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, targets, vocab_size, softcap, chunk, backend):  # x [N, d], weight [V_pad, d]
        want_x, want_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        math = compiled_chunk(backend) if backend else chunk_loss_and_grads
        ctx.weight_dtype = weight.dtype  # its gradient goes back in its own dtype (bf16 for a bf16 embedding)
        total = torch.zeros((), dtype=torch.float32, device=x.device)
        grad_x = torch.empty_like(x) if want_x else None  # [N, d]
        grad_w = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device) if want_w else None
        for start in range(0, x.shape[0], chunk):
            part = slice(start, start + chunk)
            loss, gx, gw = math(x[part], weight, targets[part], vocab_size, softcap, want_x, want_w)
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
        return gx, gw, None, None, None, None, None


@torch.compiler.disable
def chunked_head_loss(
    x: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    vocab_size: int,
    softcap: float | None,
    chunk: int = HEAD_CHUNK_TOKENS,
    compile_backend: str | None = None,
) -> torch.Tensor:
    """Mean cross-entropy (nats) of the head on x [B, T, d] against targets [B, T] (ignore_index -100), the
    same value as F.cross_entropy(head_logits(x, ...)), with at most `chunk` tokens' logits alive at once.
    compile_backend: each chunk's math through torch.compile with that backend (a model trained compiled)."""
    x, targets = x.flatten(0, 1), targets.flatten()  # [N, d], [N]
    if torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad):
        return _ChunkedHeadLoss.apply(x, weight, targets, vocab_size, softcap, chunk, compile_backend)
    # no_grad / inference_mode (validation): the chunks' losses only
    total = sum(
        chunk_loss_and_grads(x[i : i + chunk], weight, targets[i : i + chunk], vocab_size, softcap, False, False)[0]
        for i in range(0, x.shape[0], chunk)
    )
    return total / (targets != IGNORE_INDEX).sum()
