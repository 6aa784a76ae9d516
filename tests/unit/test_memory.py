"""The memory model (loopscale/model/memory.py) against what really happens on CPU: the activations autograd keeps
(saved-tensor hooks, bf16 autocast, eager and compiled) at three sizes and two recipes, to the 0.3% that
docs/operations.md promises; the head chunk's transient against the allocations the profiler records; the
optimizer state a real MuonH step allocates; and device_batch=auto on the cards of the published grid."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from loopscale.config.schema import with_vocab
from loopscale.model.accounting import paper_model
from loopscale.model.head_loss import chunked_head_loss
from loopscale.model.memory import (
    GIB,
    activation_bytes,
    estimate_memory,
    state_bytes,
    transient_bytes,
    usable_memory,
)
from loopscale.model.transformer import LoopedTransformer
from loopscale.train.batching import device_batching
from loopscale.train.compiling import compile_model
from loopscale.train.optim.groups import MATRIX, recipe_param_groups
from loopscale.train.optim.muonh import MuonH
from support.saved import kept_for_backward
from support.train import train_config


def small_paper_model(size_d: int, r: int, recipe: str):
    """The published layout (L_eff = 20, p = c = 2) at a CPU-sized width, T and vocabulary."""
    return dataclasses.replace(paper_model(6, r, recipe), d_model=size_d, head_dim=16, seq_len=32, vocab_size=300)


@pytest.mark.parametrize("compile_mode", [False, "blocks"])
@pytest.mark.parametrize("recipe", ["baseline", "hyper"])
@pytest.mark.parametrize("d", [32, 64, 96])
def test_activations_match_the_saved_tensors_within_0_3_percent(d, recipe, compile_mode):
    """Compiled with Dynamo's aot_eager backend: the same forward / backward partition as Inductor's (measured
    equal per layer here) without code generation."""
    cfg = small_paper_model(d, 4, recipe)
    model = LoopedTransformer(cfg)
    if compile_mode:
        compile_model(model, compile_mode, backend="aot_eager")
    x = torch.randint(0, cfg.vocab_size, (2, cfg.seq_len), generator=torch.Generator().manual_seed(0))
    kept_for_backward(model, x)  # the first call compiles
    measured = kept_for_backward(model, x)
    predicted = activation_bytes(cfg, 2, compile_mode)
    print(f"d={d} {recipe} compile={compile_mode}: measured {measured:,} predicted {predicted:,} bytes")
    assert predicted == pytest.approx(measured, rel=0.003)  # the tolerance docs/operations.md states


def allocated_above_the_end(fn) -> tuple[int, int]:
    """(peak, end): the most CPU bytes `fn()` had allocated at once and what it still held when it returned,
    from the allocations and frees torch's profiler records (profile_memory), replayed in time order."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = sorted(
        (e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"), key=lambda e: e.start_ns()
    )
    live = peak = 0
    for e in events:  # nbytes < 0 for a free
        live += e.nbytes()
        peak = max(peak, live)
    return peak, live


def test_the_head_transient_bounds_what_a_head_chunk_allocates():
    """The transient term is the head chunk's working set (logits, their fp32 copy, tanh, log-softmax and
    their gradients: ~2 V_pad + 12 V bytes a chunk token): an upper bound of what the chunked head loss
    allocates on top of what it keeps, and not a loose one (measured here: 12.2 V a token, the model 14.0 V)."""
    cfg = dataclasses.replace(small_paper_model(32, 1, "baseline"), vocab_size=3000, seq_len=256)
    device_batch = 4  # 1,024 tokens: one chunk, and the head's working set larger than a layer's backward
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(device_batch, cfg.seq_len, cfg.d_model, generator=generator, requires_grad=True)
    weight = torch.randn(cfg.padded_vocab_size, cfg.d_model, generator=generator, requires_grad=True)
    targets = torch.randint(0, cfg.vocab_size, (device_batch, cfg.seq_len), generator=generator)

    def head():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            chunked_head_loss(x, weight, targets, cfg.vocab_size, cfg.logit_softcap)

    peak, end = allocated_above_the_end(head)
    measured, predicted = peak - end, transient_bytes(cfg, device_batch)
    print(f"head transient: measured {measured:,} predicted {predicted:,} bytes")
    assert measured <= predicted <= 1.5 * measured


@pytest.mark.parametrize("recipe", ["baseline", "tbptt", "hyper"])
def test_weights_grads_and_optimizer_state_are_what_muonh_allocates(recipe):
    cfg = small_paper_model(32, 4, recipe)
    model = LoopedTransformer(cfg)
    groups = [
        {"name": name, "params": params, "lr": 1e-3, "adamw": name != MATRIX}
        for name, params in recipe_param_groups(model).items()
    ]
    opt = MuonH(groups, momentum=0.95, ortho_dtype="fp32", betas=(0.8, 0.95), eps=1e-10, weight_decay=0.0)
    x = torch.randint(0, cfg.vocab_size, (2, cfg.seq_len))
    model(x, x).backward()
    opt.step()
    nbytes = lambda ts: sum(t.numel() * t.element_size() for t in ts)  # noqa: E731
    state = [v for s in opt.state.values() for v in s.values() if torch.is_tensor(v) and v.dim() > 0]
    weights, grads, optimizer = state_bytes(cfg, "muonh", cuda=False)
    assert weights == nbytes(model.parameters())
    assert grads == nbytes(p.grad for p in model.parameters())
    assert optimizer == nbytes(state)


def test_auto_device_batch_fits_each_card_and_keeps_the_published_tokens_per_step():
    # the heaviest published point of the device-batch-32 class: size 16, hyper-connections, r = 8
    base = ["experiment=isodepth_hyper", "point=C2.15e18-s16", "model.r=8"]
    for card, published in (("NVIDIA H200", True), ("NVIDIA H100 80GB HBM3", True), ("NVIDIA A100-SXM4-40GB", False)):
        cfg = with_vocab(train_config([*base, f"trainer.plan_device={card}"]), 32001)
        b = device_batching(cfg.budget, cfg.model, cfg.trainer, cfg.optim.optimizer)
        peak = estimate_memory(cfg.model, b.device_batch, cfg.trainer.compile, "muonh").peak
        print(f"{card}: device batch {b.device_batch} x {b.grad_accum}, predicted {peak / GIB:.1f} GiB")
        assert (b.device_batch == 32) == published and peak <= usable_memory(card)
        assert b.world * b.device_batch * b.grad_accum * cfg.model.seq_len == 262_144
        if not published:  # the largest that fits: the next larger candidate would not have
            bigger = estimate_memory(cfg.model, 2 * b.device_batch, cfg.trainer.compile, "muonh").peak
            assert bigger > usable_memory(card)
