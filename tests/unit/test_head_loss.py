"""The chunked head + cross-entropy (loopscale/model/head_loss.py): the published loss and gradients, with no
[B, T, V] logits kept for backward."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from loopscale.model.head_loss import chunked_head_loss, head_logits

pytestmark = pytest.mark.torch_floor  # the head's numerics on the lowest supported torch too


def _inputs(seed=0, B=3, T=10, d=16, V_pad=64):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, T, d, generator=g, requires_grad=True)
    w = (0.3 * torch.randn(V_pad, d, generator=g)).requires_grad_()
    targets = torch.randint(0, 50, (B, T), generator=g)
    targets[0, :3] = -100  # packed padding: ignored, as F.cross_entropy's ignore_index
    return x, w, targets


def _reference(x, w, targets, vocab, softcap):
    return F.cross_entropy(head_logits(x, w, vocab, softcap).flatten(0, 1), targets.flatten())


@pytest.mark.parametrize("chunk", [1, 7, 30, 1000])  # one token, a ragged last chunk, exact, one chunk
@pytest.mark.parametrize("autocast", [False, True])
def test_value_and_gradients_equal_the_unchunked_loss(chunk, autocast):
    x, w, targets = _inputs()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        expected = _reference(x, w, targets, 50, 15.0)
    gx, gw = torch.autograd.grad(expected, (x, w))
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        loss = chunked_head_loss(x, w, targets, 50, 15.0, chunk=chunk)
    cx, cw = torch.autograd.grad(2.0 * loss, (x, w))  # the upstream gradient scales both
    tol = {"rtol": 2e-2, "atol": 2e-3} if autocast else {"rtol": 1e-5, "atol": 1e-6}
    torch.testing.assert_close(loss, expected, rtol=1e-5 if not autocast else 1e-3, atol=1e-6)
    torch.testing.assert_close(cx, 2 * gx, **tol)
    torch.testing.assert_close(cw, 2 * gw, **tol)
    assert cw.dtype == w.dtype and cx.dtype == x.dtype


def test_padded_rows_never_take_probability_mass():
    x, w, targets = _inputs()
    loss = chunked_head_loss(x, w, targets, 50, None, chunk=8)
    with torch.no_grad():
        w[50:] += 100.0  # rows past the true vocabulary: cut before the softmax
    assert chunked_head_loss(x, w, targets, 50, None, chunk=8).item() == pytest.approx(loss.item(), rel=1e-6)


def test_only_one_gradient_per_token_is_kept_for_backward():
    """Saved for backward: x's gradient [N, d], the weight's [V_pad, d] and a count; nothing of size V per
    token, however many tokens."""
    x, w, targets = _inputs(B=4, T=64, d=8, V_pad=512)
    loss = chunked_head_loss(x, w, targets, 500, 15.0, chunk=32)
    kept = loss.grad_fn.saved_tensors  # the chunks' own graphs were freed inside the forward
    assert sum(t.numel() * t.element_size() for t in kept) <= (x.numel() + w.numel()) * 4 + 8


def test_no_grad_gives_the_loss_only():
    x, w, targets = _inputs()
    with torch.no_grad():
        loss = chunked_head_loss(x, w, targets, 50, 15.0, chunk=4)
    assert loss.grad_fn is None
    assert loss.item() == pytest.approx(_reference(x, w, targets, 50, 15.0).item(), rel=1e-5)


def test_inference_mode_gives_the_loss_only():
    """Lightning validates under torch.inference_mode: the loss without any graph."""
    x, w, targets = _inputs()
    with torch.inference_mode():
        loss = chunked_head_loss(x, w, targets, 50, 15.0, chunk=4)
    assert loss.item() == pytest.approx(_reference(x, w, targets, 50, 15.0).item(), rel=1e-5)


@pytest.mark.parametrize("softcap", [15.0, None])
def test_the_compiled_chunk_math_equals_the_unchunked_loss(softcap):
    """A model trained compiled runs the head's chunk math through Inductor (compile_backend): the same loss and
    gradients as autograd's unchunked loss, and a ragged last chunk compiles a graph of its own."""
    x, w, targets = _inputs()
    expected = _reference(x, w, targets, 50, softcap)
    gx, gw = torch.autograd.grad(expected, (x, w))
    loss = chunked_head_loss(x, w, targets, 50, softcap, chunk=20, compile_backend="inductor")  # 20 + 10 tokens
    cx, cw = torch.autograd.grad(loss, (x, w))
    torch.testing.assert_close(loss, expected, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(cx, gx, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(cw, gw, rtol=1e-5, atol=1e-6)
    assert cw[50:].abs().max() == 0  # the padded rows get no gradient
