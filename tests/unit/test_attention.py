"""Causal attention (loopscale/model/attention.py): the batched-matmul form is SDPA's function, values and
gradients, and it is taken exactly where `uses_matmul` says."""

import pytest
import torch
import torch._dynamo
import torch.nn.functional as F

from loopscale.model import attention
from loopscale.model.attention import MATMUL_MAX_HEAD_DIM, MATMUL_MAX_T, causal_attention, uses_matmul
from loopscale.model.transformer import LoopedTransformer
from loopscale.train.compiling import compile_model
from support.train import tiny_model


def qkv(B=3, H=2, T=16, hd=8, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(B, H, T, hd, generator=g, dtype=dtype, requires_grad=True) for _ in range(3)]


def sdpa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def values_and_grads(fn, q, k, v):
    out = fn(q, k, v)
    grads = torch.autograd.grad(out, (q, k, v), torch.ones_like(out).mul_(torch.linspace(-1, 1, out.shape[-1])))
    return out.detach(), grads


@pytest.mark.parametrize("T, hd", [(1, 8), (16, 8), (MATMUL_MAX_T, MATMUL_MAX_HEAD_DIM), (37, 4)])
def test_the_matmul_form_equals_sdpa_values_and_gradients(T, hd):
    q, k, v = qkv(T=T, hd=hd)
    assert uses_matmul(T, hd, "cpu", torch.float32)
    got, got_grads = values_and_grads(causal_attention, q, k, v)
    want, want_grads = values_and_grads(sdpa, q, k, v)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    for a, b in zip(got_grads, want_grads):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_the_matmul_form_is_causal():
    """A change at position t moves no output before t."""
    q, k, v = qkv(T=12)
    with torch.no_grad():
        before = causal_attention(q, k, v)
        k2, v2 = k.clone(), v.clone()
        k2[:, :, 7] += 3.0
        v2[:, :, 7] -= 2.0
        after = causal_attention(q, k2, v2)
    assert torch.equal(before[:, :, :7], after[:, :, :7])
    assert not torch.allclose(before[:, :, 7:], after[:, :, 7:])


def test_the_form_taken_by_shape_device_dtype_and_autocast():
    assert uses_matmul(MATMUL_MAX_T, MATMUL_MAX_HEAD_DIM, "cpu", torch.float32)
    assert not uses_matmul(MATMUL_MAX_T + 1, 8, "cpu", torch.float32)
    assert not uses_matmul(64, MATMUL_MAX_HEAD_DIM + 1, "cpu", torch.float32)
    assert not uses_matmul(64, 8, "cuda", torch.float32)
    assert not uses_matmul(64, 8, "cpu", torch.bfloat16)
    assert not uses_matmul(64, 8, "cpu", torch.float32, autocast=True)


@pytest.mark.parametrize(
    "T, hd, dtype, autocast",
    [(MATMUL_MAX_T + 1, 8, torch.float32, False), (16, 32, torch.float32, False), (16, 8, torch.bfloat16, False)]
    + [(16, 8, torch.float32, True)],
)
def test_outside_its_shapes_causal_attention_is_sdpa_bit_for_bit(T, hd, dtype, autocast):
    q, k, v = qkv(T=T, hd=hd, dtype=dtype)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        got, got_grads = values_and_grads(causal_attention, q, k, v)
        want, want_grads = values_and_grads(sdpa, q, k, v)
    assert torch.equal(got, want)
    assert all(torch.equal(a, b) for a, b in zip(got_grads, want_grads))


def test_inside_its_shapes_it_does_not_call_sdpa(monkeypatch):
    """The matmul form is what runs for a small fp32 CPU shape (SDPA made to fail): the dispatch is real."""

    def refuse(*args, **kwargs):
        raise AssertionError("SDPA called")

    monkeypatch.setattr(attention.F, "scaled_dot_product_attention", refuse)
    q, k, v = qkv(T=16, hd=8)
    causal_attention(q, k, v).sum().backward()
    with pytest.raises(AssertionError, match="SDPA called"):
        causal_attention(*qkv(T=MATMUL_MAX_T + 1, hd=8))


def small_head_model(seed: int = 0):
    """A tiny looped model whose attention takes the matmul form (head dim 8, T 32, fp32 on CPU)."""
    torch.manual_seed(seed)
    cfg = tiny_model(2, d_model=32, head_dim=8, n_prelude=1, n_coda=1, depth=4)  # 1 + 1 x 2 + 1 layers
    assert uses_matmul(cfg.seq_len, cfg.head_dim, "cpu", torch.float32)
    return LoopedTransformer(cfg), torch.randint(0, cfg.vocab_size, (2, cfg.seq_len), generator=torch.Generator())


def loss_and_grads(model, idx):
    model.zero_grad(set_to_none=True)
    loss = model(idx, idx)
    loss.backward()
    return loss.detach(), {name: p.grad.clone() for name, p in model.named_parameters()}


@pytest.mark.torch_floor
def test_a_model_with_small_heads_trains_the_same_through_either_form(monkeypatch):
    """The whole model (r = 2) through the matmul form against the same model through SDPA: loss and every
    parameter's gradient equal to fp32 rounding."""
    model, idx = small_head_model()
    got_loss, got = loss_and_grads(model, idx)
    monkeypatch.setattr(attention, "MATMUL_MAX_T", 0)  # every shape to SDPA
    want_loss, want = loss_and_grads(model, idx)
    torch.testing.assert_close(got_loss, want_loss, rtol=1e-5, atol=1e-6)
    for name in want:
        torch.testing.assert_close(got[name], want[name], rtol=1e-4, atol=1e-6, msg=name)


@pytest.mark.torch_floor
def test_a_compiled_model_keeps_the_matmul_form_in_one_graph_and_its_numbers():
    """compile=model with Inductor (~30 s cold): the matmul form traces without a graph break (the model is one graph;
    the head's disabled chunk math aside) and the compiled loss and gradients are the eager ones."""
    model, idx = small_head_model()
    explained = torch._dynamo.explain(model)(idx, idx)
    assert explained.graph_count == 1 and explained.graph_break_count == 0, explained.break_reasons
    want_loss, want = loss_and_grads(model, idx)
    compile_model(model, "model")
    got_loss, got = loss_and_grads(model, idx)
    torch.testing.assert_close(got_loss, want_loss, rtol=1e-5, atol=1e-6)
    for name in want:
        torch.testing.assert_close(got[name], want[name], rtol=1e-4, atol=1e-5, msg=name)
