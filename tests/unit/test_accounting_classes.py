"""Accounting by class, parameter by parameter (issue 58, item 2): every parameter of every registered recipe,
injection form and block form, built at r = 3, is declared by name with its shape and class
(accounting.declared_params), the class is the one docs/design.md ("Parameter accounting") gives it, and
N_once, N_rec, N_pass, the embedding and the head of `param_counts` are the built model's parameters added up by
those classes. Then what a class means, measured on the model: an N_pass slice j first acts in pass j, an N_rec
parameter acts from the first pass.

The classes below are written from the docs, not read from the forms, so a form that declares a parameter in the
wrong class (a loop-index embedding in N_once: the totals still agree) fails here."""

from __future__ import annotations

import re

import pytest
import torch

from loopscale.blocks import registry as blocks
from loopscale.injections import registry as injections
from loopscale.injections.form import N_ONCE, N_PASS, N_REC
from loopscale.model.accounting import EMBEDDING, LM_HEAD, declared_params, param_counts
from loopscale.model.transformer import LoopedTransformer
from loopscale.recipes import registry as recipes
from support.train import tiny_model

R = 3

# docs/design.md, "Parameter accounting": the first pattern that matches a parameter's full name gives its class
DOCUMENTED_CLASS = (
    (r"embed\.weight", EMBEDDING),  # outside N
    (r"lm_head\.weight", LM_HEAD),  # outside N (untied)
    (r"(embed|pass|final)_norm\.weight", N_ONCE),  # the three stream norms
    (r"recurrent\.\d+\.adapters\..+", N_PASS),  # per-pass low-rank pairs B_i A_i: pass i only (Bae et al.)
    (r"recurrent\.\d+\..+", N_REC),  # the recurrent block: its matrices and its layers' gains
    (r"(prelude|coda)\.\d+\..+", N_ONCE),
    (r"injection\.index", N_PASS),  # the loop-index embedding p_i: pass i only
    (r"injection\..+", N_ONCE),  # every injection parameter, though it acts in every pass (the published count)
)


def documented_class(name: str) -> str:
    found = next((cls for pattern, cls in DOCUMENTED_CLASS if re.fullmatch(pattern, name)), None)
    assert found is not None, f"{name}: docs/design.md gives no class for it; add its documented class here"
    return found


def small(r: int = R, recipe: str = "auto", **fields):
    base = dict(d_model=16, head_dim=8, vocab_size=50, seq_len=8, n_prelude=1, n_coda=1, depth=2 + 2 * r)
    return tiny_model(r, recipe, **{**base, **fields})


CASES = {
    **{f"recipe-{n}": small(recipe=n) for n in recipes.names()},
    **{f"recipe-{n}-r1": small(r=1, recipe=n) for n in recipes.names() if recipes.recipe(n).own_dense},
    **{f"injection-{n}": small(injection=n) for n in injections.names()},
    **{f"block-{n}": small(injection="concat", block=n) for n in blocks.names()},
    "hyper-dynamic-3-lanes": small(injection="hyper", options={"hyper_lanes": 3, "hyper_dynamic": True}),
    "loop_index-over-concat": small(injection="loop_index", looped_injection="concat"),
    "lora-rank-2-swiglu-tied": small(recipe="lora", options={"lora_rank": 2}, mlp="swiglu", tie_embeddings=True),
}


@pytest.mark.parametrize("cfg", CASES.values(), ids=CASES.keys())
def test_every_parameter_is_declared_in_its_documented_class_and_counted_there(cfg):
    torch.manual_seed(0)
    model = LoopedTransformer(cfg)
    built = {name: tuple(p.shape) for name, p in model.named_parameters()}
    declared = {p.name: p for p in declared_params(cfg)}
    assert len(declared) == len(declared_params(cfg)), "a name declared twice"
    assert {n: p.shape for n, p in declared.items()} == built
    for name in built:
        assert declared[name].counts_in == documented_class(name), name
    by_class = dict.fromkeys((N_ONCE, N_REC, N_PASS, EMBEDDING, LM_HEAD), 0)
    for name, p in model.named_parameters():
        by_class[documented_class(name)] += p.numel()
    counts = param_counts(cfg)
    assert (counts.N_once, counts.N_rec, counts.N_pass) == (by_class[N_ONCE], by_class[N_REC], by_class[N_PASS])
    assert (counts.embedding, counts.lm_head) == (by_class[EMBEDDING], by_class[LM_HEAD])
    assert counts.N == by_class[N_ONCE] + by_class[N_REC] + by_class[N_PASS]
    assert counts.total == sum(p.numel() for p in model.parameters())


def test_the_per_pass_designs_have_per_pass_parameters():
    """The designs the docs give N_pass: loop_index r d, lora 2 r rank (in + out) per matrix of each recurrent
    layer; every other recipe none."""
    for name in recipes.names():
        cfg = small(recipe=name)
        d, k, h = cfg.d_model, cfg.n_rec, cfg.mlp_hidden
        want = {"loop_index": R * d, "lora": k * R * 4 * (4 * 2 * d + 2 * (d + h))}.get(name, 0)
        assert param_counts(cfg).N_pass == want, name


# ------------------------------------------------------------------------------------- what the classes mean


def pass_outputs(model, idx) -> list:
    """s_i, the output of every pass (the pass norm's), of one forward."""
    outs = []
    handle = model.pass_norm.register_forward_hook(lambda m, a, out: outs.append(out.detach().clone()))
    with torch.no_grad():
        model(idx)
    handle.remove()
    return outs


USE_CASES = {n: c for n, c in CASES.items() if c.r > 1 and c.injection not in ("huginn", "parcae")}


@pytest.mark.parametrize("cfg", USE_CASES.values(), ids=USE_CASES.keys())
def test_an_n_pass_slice_acts_first_in_its_pass_and_n_rec_from_the_first(cfg):
    """Per-pass slice j of an N_pass parameter ([r, ...]): the passes before j do not see it, pass j does. An N_rec
    parameter changes the first pass already. (The designs with a random initial state draw it anew each
    forward: their pass outputs are not comparable between two forwards, and their classes are checked above.)"""
    torch.manual_seed(0)
    model = LoopedTransformer(cfg).double()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():  # away from init: lora's B_i = 0 would hide A_i
            p.add_(0.1 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    idx = torch.randint(0, cfg.vocab_size, (2, cfg.seq_len), generator=g)
    before = pass_outputs(model, idx)
    classes = {p.name: p.counts_in for p in declared_params(cfg)}
    for name, p in model.named_parameters():
        saved = p.detach().clone()
        if classes[name] == N_PASS:
            assert p.shape[0] == cfg.r, name
            for j in range(cfg.r):
                with torch.no_grad():
                    p[j] += 0.5
                after = pass_outputs(model, idx)
                with torch.no_grad():
                    p.copy_(saved)
                assert all(torch.equal(after[i], before[i]) for i in range(j)), (name, j)
                assert not torch.allclose(after[j], before[j]), (name, j)
        elif classes[name] == N_REC:
            with torch.no_grad():
                p.add_(0.3 * torch.randn(p.shape, generator=g, dtype=p.dtype))  # not a scale: QK-norm undoes one
            after = pass_outputs(model, idx)
            with torch.no_grad():
                p.copy_(saved)
            assert not torch.allclose(after[0], before[0]), name
