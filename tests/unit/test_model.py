"""loopscale.model.transformer: forward contract, injection inits (split linear and the published concat), the published
init and soft-cap, truncated backprop (gradients and memory), hyper-connection identities at init, AdamW
parameter groups."""

import math

import pytest
import torch
from torch.autograd.graph import saved_tensors_hooks

from loopscale.config.model import ModelConfig
from loopscale.injections.concat import ConcatInjection
from loopscale.injections.passthrough import Passthrough
from loopscale.model.accounting import paper_model
from loopscale.model.transformer import LoopedTransformer
from loopscale.train.compiling import compile_model
from loopscale.train.optim.groups import adamw_param_groups
from support.train import tiny_model

B = 2
_TINY = tiny_model(1)
T, V = _TINY.seq_len, _TINY.vocab_size  # batch() feeds tiny_model's shapes


def build(cfg: ModelConfig, seed: int = 0) -> LoopedTransformer:
    torch.manual_seed(seed)
    return LoopedTransformer(cfg)


def batch(seed: int = 1) -> torch.Tensor:
    return torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(seed))


def run_layers(model: LoopedTransformer, blocks, x: torch.Tensor) -> torch.Tensor:
    cos, sin = model.rope_cos[: x.shape[1]], model.rope_sin[: x.shape[1]]
    for block in blocks:
        x = block(x, cos, sin)
    return x


def prelude_out(model: LoopedTransformer, idx: torch.Tensor) -> torch.Tensor:
    return run_layers(model, model.prelude, model.embed_norm(model.embed(idx)))


def head(model: LoopedTransformer, x: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """coda -> final norm -> untied head -> cross-entropy (the tail of the model, written out)."""
    logits = model.lm_head(model.final_norm(run_layers(model, model.coda, x)))[..., : model.cfg.vocab_size]
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())


def recurrent_inputs(model: LoopedTransformer, idx: torch.Tensor) -> list[torch.Tensor]:
    """The input u of every pass, captured at the first recurrent layer."""
    seen = []
    handle = model.recurrent[0].register_forward_pre_hook(lambda mod, args: seen.append(args[0].detach()))
    with torch.no_grad():
        model(idx)
    handle.remove()
    return seen


# ---------------------------------------------------------------------------------------------------- contract


@pytest.mark.parametrize("recipe", ["baseline", "tbptt", "hyper"])
def test_forward_contract(recipe):
    cfg = tiny_model(4, recipe, vocab_size=130)  # padded to 192
    model = build(cfg)
    idx = torch.randint(0, 130, (B, T))
    logits = model(idx)
    assert logits.shape == (B, T, 130) and logits.dtype == torch.float32  # the true vocabulary, not the padded
    assert model.lm_head.weight.shape[0] == 192
    loss = model(idx, idx)
    assert loss.dim() == 0
    # small init: near-uniform predictions over the true vocabulary (log 130, not log 192)
    assert abs(loss.item() - math.log(130)) < 0.05
    loss.backward()
    assert all(p.grad is not None for p in model.parameters())
    assert not any(name.startswith("rope") for name in model.state_dict())  # RoPE tables are not parameters


def test_padded_vocabulary_rows_never_enter_the_softmax():
    """The head's padded rows (130 -> 192) are cut before the loss: pushing them to huge logits changes
    neither the logits nor the loss, and they get no gradient (as the published model)."""
    model = build(tiny_model(2, vocab_size=130))
    idx = torch.randint(0, 130, (B, T))
    before = model(idx, idx)
    with torch.no_grad():
        model.lm_head.weight[130:] = 1e3
    after = model(idx, idx)
    assert torch.equal(before, after)
    after.backward()
    assert model.lm_head.weight.grad[130:].abs().max() == 0
    assert model.lm_head.weight.grad[:130].abs().max() > 0


def test_causal():
    """Changing token t leaves every logit before t unchanged (looped and hyper paths alike)."""
    for cfg in (tiny_model(2), tiny_model(4, injection="hyper", options={"hyper_dynamic": True})):
        model = build(cfg).eval()
        idx = batch()
        other = idx.clone()
        other[:, 20] = (other[:, 20] + 1) % V
        with torch.no_grad():
            a, b = model(idx), model(other)
        assert torch.equal(a[:, :20], b[:, :20])
        assert not torch.allclose(a[:, 20:], b[:, 20:])


def test_tied_head_and_softcap():
    cfg = tiny_model(2, tie_embeddings=True, logit_softcap=2.0)
    model = build(cfg)
    assert model.lm_head is None
    with torch.no_grad():
        model.embed.weight.mul_(500)  # push raw logits far past the cap
    logits = model(batch())
    assert logits.abs().max() <= 2.0
    assert logits.abs().max() > 1.9
    model(batch(), batch(2)).backward()
    assert model.embed.weight.grad.abs().sum() > 0


def test_linear_injection_starts_as_identity_on_e():
    """W = [I | 0] at init, so every pass of the linear model sees u = e, the prelude output."""
    model = build(tiny_model(4))
    idx = batch()
    with torch.no_grad():
        e = prelude_out(model, idx)
    for u in recurrent_inputs(model, idx):
        torch.testing.assert_close(u, e)


def test_concat_injection_is_one_matrix_initialised_I_0():
    """The published injection: one bias-free [d, 2d] matrix on [e; s], exactly [I | 0] at init, so every
    pass sees u = e (s_0 = e)."""
    model = build(tiny_model(4, injection="concat"))
    d = model.cfg.d_model
    assert isinstance(model.injection, ConcatInjection) and model.injection.bias is None
    assert [(n, tuple(p.shape)) for n, p in model.injection.named_parameters()] == [("weight", (d, 2 * d))]
    assert torch.equal(model.injection.weight, torch.cat((torch.eye(d), torch.zeros(d, d)), dim=1))
    idx = batch()
    with torch.no_grad():
        e = prelude_out(model, idx)
    inputs = recurrent_inputs(model, idx)
    assert len(inputs) == 4
    for u in inputs:
        torch.testing.assert_close(u, e)


def test_concat_equals_split_linear():
    """concat u = W [e; s] and the split linear u = W_e e + W_s s are the same map: with W = [W_e | W_s] the
    two models give the same logits and the same gradients (at init, and here off it: W perturbed)."""
    concat = build(tiny_model(4, injection="concat"))
    perturb(concat)
    linear = LoopedTransformer(tiny_model(4, injection="linear"))
    state = {k: v for k, v in concat.state_dict().items() if not k.startswith("injection.")}
    W_e, W_s = concat.injection.weight.detach().chunk(2, dim=1)
    state.update({"injection.from_e.weight": W_e, "injection.from_s.weight": W_s})
    linear.load_state_dict(state)
    idx = batch()
    torch.testing.assert_close(linear(idx), concat(idx))
    concat(idx, idx).backward()
    linear(idx, idx).backward()
    grad_W = concat.injection.weight.grad
    torch.testing.assert_close(linear.injection.from_e.weight.grad, grad_W[:, : W_e.shape[1]], rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(linear.injection.from_s.weight.grad, grad_W[:, W_e.shape[1] :], rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(
        linear.recurrent[0].mlp.fc.weight.grad, concat.recurrent[0].mlp.fc.weight.grad, rtol=1e-4, atol=1e-6
    )


def test_paper_init_statistics():
    """The published init on the s = 6 model (d = 384, r = 4): embedding N(0, 1), head N(0, 1e-3), q, k, v,
    attention-out and MLP-in uniform with std 1/sqrt(d), MLP-out uniform with std 1/sqrt(4d) (bounded by
    sqrt(3) std: uniform, not normal), norm gains 1, injection [I | 0]."""
    cfg = paper_model(6, 4)
    assert (cfg.init, cfg.injection, cfg.logit_softcap, cfg.d_model) == ("paper", "concat", 15.0, 384)
    model = build(cfg)
    d = cfg.d_model

    def check(w: torch.Tensor, std: float, uniform: bool, name: str) -> None:
        assert abs(w.mean().item()) < 0.01 * std + 3 * std / math.sqrt(w.numel()), name
        assert w.std().item() == pytest.approx(std, rel=0.01), name
        if uniform:  # U(-a, a) with a = sqrt(3) std: the bound is reached but never passed
            assert w.abs().max().item() <= math.sqrt(3) * std * (1 + 1e-6), name
            assert w.abs().max().item() > 0.99 * math.sqrt(3) * std, name

    check(model.embed.weight, 1.0, False, "embed")
    assert model.embed.weight.abs().max() > 4  # normal tails, not a uniform law
    check(model.lm_head.weight, 1e-3, False, "lm_head")
    for block in (*model.prelude, *model.recurrent, *model.coda):
        q, k, v = block.attn.q.weight, block.attn.k.weight, block.attn.v.weight  # three matrices, as published
        for name, w in (
            ("q", q),
            ("k", k),
            ("v", v),
            ("attn-out", block.attn.proj.weight),
            ("mlp-in", block.mlp.fc.weight),
        ):
            check(w, 1 / math.sqrt(d), True, name)
        check(block.mlp.proj.weight, 1 / math.sqrt(4 * d), True, "mlp-out")
        assert block.mlp.fc.weight.shape == (4 * d, d)
    for name, p in model.named_parameters():
        if p.dim() == 1:
            assert torch.equal(p, torch.ones_like(p)), name
    assert torch.equal(model.injection.weight, torch.cat((torch.eye(d), torch.zeros(d, d)), dim=1))


def test_gpt2_init_is_still_available():
    """init=gpt2 (the default of the CPU grid): N(0, 0.02), residual writes scaled by 1/sqrt(2 L_eff)."""
    model = build(tiny_model(2, init_std=0.02))
    assert model.cfg.init == "gpt2"
    assert model.embed.weight.std().item() == pytest.approx(0.02, rel=0.02)
    assert model.prelude[0].mlp.proj.weight.std().item() == pytest.approx(0.02 / math.sqrt(24), rel=0.02)


def test_paper_softcap_is_15_tanh():
    """Logits of the published model are 15 tanh(z / 15) of the raw head output z: bounded by 15."""
    cfg = paper_model(6, 2)
    model = build(ModelConfig(**{**cfg.__dict__, "vocab_size": V, "seq_len": T, "d_model": 128}))
    with torch.no_grad():
        model.lm_head.weight.normal_(0, 5.0)  # raw logits far past the cap
        idx = batch()
        logits = model(idx)
        x = model._layers(model.coda, model._loop(prelude_out(model, idx), T), T)
        z = model.lm_head(model.final_norm(x))
    assert z.abs().max() > 60
    torch.testing.assert_close(logits, 15 * torch.tanh(z[..., :V] / 15))
    assert logits.abs().max() <= 15


def test_paper_r1_is_a_plain_stack():
    """model=paper at r = 1: 0 prelude, 20 layers, 0 coda, no injection; r > 1: 2 + 16/r x r + 2."""
    dense = build(ModelConfig(**{**paper_model(6, 1).__dict__, "vocab_size": V, "seq_len": T}))
    assert (len(dense.prelude), len(dense.recurrent), len(dense.coda)) == (0, 20, 0)
    assert isinstance(dense.injection, Passthrough) and not list(dense.injection.parameters())
    for r in (2, 4, 8):
        cfg = paper_model(6, r)
        assert (cfg.n_prelude, cfg.n_rec, cfg.n_coda, cfg.l_eff, cfg.injection) == (2, 16 // r, 2, 20, "concat")


# --------------------------------------------------------------------------------------------- truncated backprop


def reference_loss(model: LoopedTransformer, idx: torch.Tensor, k: int) -> torch.Tensor:
    """Hand-unrolled forward of the linear / additive model with full autograd, detaching the state s
    before the last k passes (the textbook truncated BPTT)."""
    cfg = model.cfg
    e = prelude_out(model, idx)
    s = torch.zeros_like(e) if cfg.injection == "additive" else e
    for i in range(cfg.r):
        if i == cfg.r - k:
            s = s.detach()
        if cfg.injection == "concat":
            u = torch.cat((e, s), dim=-1) @ model.injection.weight.T
        elif cfg.injection == "linear":
            u = model.injection.from_e(e) + model.injection.from_s(s)
        else:
            u = s + e
        s = model.pass_norm(run_layers(model, model.recurrent, u))
    return head(model, s, idx)


def perturb(model: LoopedTransformer, seed: int = 3) -> None:
    """Move off the identity init so every injection / lane coefficient matters."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.startswith("injection."):
                p.add_(0.3 * torch.randn(p.shape, generator=g))


@pytest.mark.parametrize("injection,r,k", [("linear", 4, 2), ("linear", 4, 1), ("concat", 4, 1), ("additive", 3, 1)])
def test_truncated_backprop_matches_hand_unrolled(injection, r, k):
    cfg = tiny_model(r, n_prelude=1, n_rec=2, n_coda=1, depth=None, injection=injection, bptt_k=k)
    model = build(cfg)
    perturb(model)
    idx = batch()
    reference = reference_loss

    model(idx, idx).backward()
    got = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    reference(model, idx, k).backward()
    for name, p in model.named_parameters():
        torch.testing.assert_close(got[name], p.grad, rtol=1e-4, atol=1e-6, msg=name)
    # and the truncation is real: full backprop gives different recurrent and prelude gradients
    model.zero_grad()
    reference(model, idx, r).backward()
    assert not torch.allclose(got["recurrent.0.mlp.fc.weight"], model.recurrent[0].mlp.fc.weight.grad)
    assert not torch.allclose(got["prelude.0.mlp.fc.weight"], model.prelude[0].mlp.fc.weight.grad)
    assert got["prelude.0.mlp.fc.weight"].abs().sum() > 0  # the prelude still learns through the injection


def saved_bytes(model: LoopedTransformer, idx: torch.Tensor) -> int:
    """Bytes autograd saves for the backward during one forward (the activation memory of training)."""
    total = 0

    def pack(t: torch.Tensor):
        nonlocal total
        total += t.numel() * t.element_size()
        return t

    with saved_tensors_hooks(pack, lambda t: t):
        model(idx, idx)
    return total


def test_truncated_backprop_saves_less_activation_memory():
    idx = batch()
    sizes = [saved_bytes(build(tiny_model(4, bptt_k=k)), idx) for k in (4, 3, 2, 1)]
    assert sizes == sorted(sizes, reverse=True) and len(set(sizes)) == 4
    # 3 of the 4 passes (6 of 12 layer passes, the half in the loop) no longer store activations
    assert sizes[-1] < 0.7 * sizes[0]


# ---------------------------------------------------------------------------------------------------- hyper


def test_hyper_static_at_init_closed_form():
    """Identity at init (alpha_i = one-hot(i mod K), M_i = I, beta_i = 1): all K lanes stay equal to the
    running sum, so pass i gets u_i = e + s_1 + ... + s_{i-1} with s_j = pass_norm(block(u_j)), and the coda
    gets K * (e + s_1 + ... + s_r). Checked for K = 2 and 3 against that computation with the model's
    own blocks."""
    for K in (2, 3):
        model = build(tiny_model(4, injection="hyper", options={"hyper_lanes": K}))
        idx = batch()
        with torch.no_grad():
            running = prelude_out(model, idx)
            for _ in range(4):
                running = running + model.pass_norm(run_layers(model, model.recurrent, running))
            expected = head(model, K * running, idx)
            torch.testing.assert_close(model(idx, idx), expected)


def test_hyper_r2_block_inputs_equal_additive_at_init():
    """At r = 2 the closed form above gives block inputs e and e + s_1, exactly the additive model's
    (u = s + e with s_0 = 0). Same weights, same inputs to the recurrent block in both passes."""
    hyper = build(tiny_model(2, injection="hyper"))
    additive = LoopedTransformer(tiny_model(2, injection="additive"))
    additive.load_state_dict(hyper.state_dict(), strict=False)  # everything but the lane scalars
    idx = batch()
    got, want = recurrent_inputs(hyper, idx), recurrent_inputs(additive, idx)
    assert len(got) == len(want) == 2
    for u_hyper, u_add in zip(got, want):
        torch.testing.assert_close(u_hyper, u_add)


def test_hyper_dynamic_equals_static_at_init():
    """The dynamic corrections are tanh(norm(lanes) @ W_dyn) with W_dyn = 0 at init: output unchanged.
    Once W_dyn moves, the outputs differ."""
    static = build(tiny_model(4, "hyper"))
    dynamic = LoopedTransformer(tiny_model(4, injection="hyper", options={"hyper_dynamic": True}))
    missing = dynamic.load_state_dict(static.state_dict(), strict=False).missing_keys
    assert sorted(missing) == ["injection.W_dyn", "injection.dyn_scale"]
    idx = batch()
    with torch.no_grad():
        torch.testing.assert_close(dynamic(idx), static(idx))
        dynamic.injection.W_dyn.normal_()
        assert not torch.allclose(dynamic(idx), static(idx))


# ---------------------------------------------------------------------------------------------------- optimizer groups


@pytest.mark.parametrize("kw", [dict(injection="hyper", options={"hyper_dynamic": True}), dict(tie_embeddings=True)])
def test_param_groups(kw):
    model = build(tiny_model(4, **kw))
    groups = adamw_param_groups(model, weight_decay=0.1)
    by_name = {g["name"]: g for g in groups}
    listed = [id(p) for g in groups for p in g["params"]]
    assert sorted(listed) == sorted(id(p) for p in model.parameters())  # each parameter exactly once
    decayed = {id(p) for g in groups if g["weight_decay"] > 0 for p in g["params"]}
    assert by_name["decay"]["weight_decay"] == 0.1
    hyper = model.cfg.injection == "hyper"
    for name, p in model.named_parameters():  # matrices decay (the linear injection's W too), nothing else
        no_decay = p.dim() < 2 or name.startswith("embed.") or (hyper and name.startswith("injection."))
        assert (id(p) not in decayed) == no_decay, name
    if model.cfg.injection == "hyper":
        hyper = {id(p) for p in model.injection.parameters()}
        assert hyper == {id(p) for p in by_name["hyper"]["params"]} and by_name["hyper"]["weight_decay"] == 0.0
    torch.optim.AdamW(groups, lr=1e-3)  # the groups are valid AdamW input


@pytest.mark.slow
def test_compile_blocks_same_output():
    """torch.compile per layer (trainer.compile=blocks, 30-60 s on CPU): same loss as eager, and the state_dict
    keys are unchanged."""
    model = build(tiny_model(2))
    idx = batch()
    eager = model(idx, idx).item()
    keys = list(model.state_dict())
    compile_model(model, "blocks")
    assert model(idx, idx).item() == pytest.approx(eager, rel=1e-4)
    assert list(model.state_dict()) == keys
