"""Each loop design against its published equations (issue 58, item 1): the whole model at r = 3 with random,
non-trivial weights (not the init values), computed here in plain float64 torch from the equations of
docs/design.md and the designs' papers, against the model's logits and every parameter's gradient; then the
documented values at init and what each pass uses.

The equations are written out below, one function per form, from the sources, not from loopscale's code:
    model        embed -> RMSNorm -> prelude = e -> r passes s = RMSNorm_pass(block(u_i)) -> coda -> RMSNorm -> head
                 (docs/design.md, "The looped model"); attention with RoPE (rotation by minus the position angle,
                 the published sign) and a parameter-free QK-norm after it, causal softmax(q k^T / sqrt(hd)) v
    passthrough  u = s, s_0 = e
    additive     u = s + e, s_0 = 0                               (the authors' "additive")
    concat       u = W [e; s], s_0 = e                            (the looped-scaling paper)
    linear       u = W_e e + W_s s, s_0 = e                       (the same map, split)
    huginn       u = W [s; e], s_0 like-init                      (Geiping et al. 2025: torch.cat([x, input_embeds]))
    parcae       u = a (.) s + softplus(dt) (.) (B RMSNorm_g(e)), a = exp(-softplus(dt) exp(A_log)), s_0 like-init
                                                                  (Prairie et al. 2026, DiagonalInjection)
    hyper        u = sum_n alpha_i[n] lane_n; lane_n <- sum_m M_i[n, m] lane_m + beta_i[n] s; coda reads sum_n lane_n
                 (Zhu et al. 2024; the dynamic variant adds s_a tanh(norm(lane_n) w_alpha) etc.)
    loop_index   u_i = inject(e, s_i) + p_i                       (Bae et al. 2024, a loop-index embedding)
    prenorm      x = x + attn(norm(x)); x = x + mlp(norm(x))
    sandwich     x = norm_2(attn(norm_1(x)) + x); x = norm_4(mlp(norm_3(x)) + x)   (Huginn's SandwichBlock)
    lora         pass i: W + B_i A_i on q, k, v, attention-out, MLP-in, MLP-out of the recurrent layers (Bae et al.)
    scaled_residual  the recurrent layers' writes times lambda / (r sqrt(k))   (arXiv 2606.18524)
The random initial states (huginn, parcae) are read back from the first pass's input through the equation's
inverse and checked to be the like-init draw (truncated normal, std sqrt(2/5), cut at 3 std).
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from loopscale.blocks import registry as blocks
from loopscale.injections import registry as injections
from loopscale.model.transformer import LoopedTransformer
from loopscale.recipes import registry as recipes
from support.paths import FIXTURES
from support.train import tiny_model

R = 3  # passes: r > 1, odd (so truncation keeps ceil(3/2) = 2 of 3 and hyper's K = 2 lanes wrap once)
B, T = 2, 8
LIKE_INIT_STD = math.sqrt(2 / 5)  # sqrt(2 / (5 d)) x sqrt(d): Huginn's like-init state; Parcae's default here
TRUNC_STD = math.sqrt(1 - 6 * math.exp(-4.5) / math.sqrt(2 * math.pi) / math.erf(3 / math.sqrt(2)))  # N(0,1) cut at 3


def small(r: int = R, recipe: str = "auto", **fields):
    """A small looped model: d = 16, two heads, p = c = 1 and k = 2 recurrent layers (depth 2 + 2 r)."""
    base = dict(d_model=16, head_dim=8, vocab_size=50, seq_len=T, n_prelude=1, n_coda=1, depth=2 + 2 * r)
    return tiny_model(r, recipe, **{**base, **fields})


# ------------------------------------------------------------------------------------------------ the equations


def rms(x, gain=None, eps=1e-6):
    """x / sqrt(mean(x^2) + eps) (.) gain."""
    y = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return y if gain is None else y * gain


def rotary(x, base: float):
    """x [B, T, H, hd]: the pair (x_j, x_{j + hd/2}) as x_j + i x_{j + hd/2}, times exp(-i t base^(-2j/hd)); the
    cosines and sines in fp32, as the model's tables are made."""
    hd = x.shape[-1]
    t = torch.arange(x.shape[1], dtype=torch.float32)
    angle = t[:, None] * base ** (-torch.arange(0, hd, 2, dtype=torch.float32) / hd)  # [T, hd/2]
    turn = torch.complex(angle.cos().double(), -angle.sin().double())  # exp(-i angle), in fp32 as the tables
    z = torch.complex(x[..., : hd // 2], x[..., hd // 2 :]) * turn[:, None]
    return torch.cat((z.real, z.imag), dim=-1)


class Equations:
    """The model of a config computed from its weights `w` (name -> float64 tensor) by the published equations."""

    def __init__(self, cfg, w: dict, injection: str, block: str, truncated_to: int | None = None):
        self.cfg, self.w, self.injection, self.block = cfg, w, injection, block
        self.first_grad_pass = 0 if truncated_to is None else cfg.r - truncated_to

    def W(self, name: str, i: int | None = None):
        """A layer matrix; in pass i of a lora layer W + B_i A_i (Bae et al.)."""
        weight = self.w[name + ".weight"]
        if i is not None and self.block == "lora":
            where, layer, branch, matrix = name.split(".")  # recurrent.0.attn.q -> recurrent.0.adapters.attn_q
            pair = f"{where}.{layer}.adapters.{branch}_{matrix}"
            weight = weight + self.w[pair + ".B"][i] @ self.w[pair + ".A"][i]
        return weight

    def attention(self, x, layer: str, i):
        cfg = self.cfg
        Bx, Tx, d = x.shape
        q, k, v = (x @ self.W(f"{layer}.attn.{m}", i).T for m in "qkv")
        q, k, v = (t.view(Bx, Tx, cfg.n_head, cfg.head_dim) for t in (q, k, v))
        q, k = (rms(rotary(t, cfg.rope_base), eps=cfg.norm_eps) for t in (q, k))  # QK-norm after RoPE
        scores = torch.einsum("bthd,bshd->bhts", q, k) / math.sqrt(cfg.head_dim)
        causal = torch.ones(Tx, Tx, dtype=torch.bool).tril()
        y = torch.einsum("bhts,bshd->bthd", scores.masked_fill(~causal, -math.inf).softmax(-1), v)
        return y.reshape(Bx, Tx, d) @ self.W(f"{layer}.attn.proj", i).T

    def mlp(self, x, layer: str, i):
        h = x @ self.W(f"{layer}.mlp.fc", i).T
        if self.cfg.mlp == "swiglu":
            gate, up = h.chunk(2, dim=-1)
            return (F.silu(gate) * up) @ self.W(f"{layer}.mlp.proj", i).T
        return F.relu(h).square() @ self.W(f"{layer}.mlp.proj", i).T

    def layer(self, x, layer: str, i=None):
        """One layer of the block form; i is the pass (recurrent layers) or None (prelude, coda)."""
        w, eps = self.w, self.cfg.norm_eps
        if self.block == "sandwich":
            x = rms(
                self.attention(rms(x, w[f"{layer}.norm_1.weight"], eps), layer, i) + x, w[f"{layer}.norm_2.weight"], eps
            )
            return rms(
                self.mlp(rms(x, w[f"{layer}.norm_3.weight"], eps), layer, i) + x, w[f"{layer}.norm_4.weight"], eps
            )
        c = 1.0
        if self.block == "scaled_residual" and i is not None:
            c = self.cfg.options.get("residual_lambda", 1.0) / (self.cfg.r * math.sqrt(self.cfg.n_rec))
        x = x + c * self.attention(rms(x, w[f"{layer}.attn_norm.weight"], eps), layer, i)
        return x + c * self.mlp(rms(x, w[f"{layer}.mlp_norm.weight"], eps), layer, i)

    def run_pass(self, u, i: int):
        """s = RMSNorm_pass(block(u)) for pass i, under no_grad before the first pass with gradient."""
        with torch.set_grad_enabled(torch.is_grad_enabled() and i >= self.first_grad_pass):
            for j in range(self.cfg.n_rec):
                u = self.layer(u, f"recurrent.{j}", i)
            return rms(u, self.w["pass_norm.weight"], self.cfg.norm_eps)

    def prelude(self, idx):
        x = rms(self.w["embed.weight"][idx], self.w["embed_norm.weight"], self.cfg.norm_eps)
        for j in range(self.cfg.n_prelude):
            x = self.layer(x, f"prelude.{j}")
        return x

    def head(self, x):
        for j in range(self.cfg.n_coda):
            x = self.layer(x, f"coda.{j}")
        x = rms(x, self.w["final_norm.weight"], self.cfg.norm_eps)
        head = self.w["embed.weight"] if self.cfg.tie_embeddings else self.w["lm_head.weight"]
        return (x @ head.T)[..., : self.cfg.vocab_size]

    def logits(self, idx, s0=None):
        e = self.prelude(idx)
        return self.head(self.loop(e, s0))

    # ------------------------------------------------------------------------------------- the injections
    def loop(self, e, s0=None):
        name = self.injection
        index = None
        if name == "loop_index":  # u_i = inject(e, s_i) + p_i over the model's looped injection
            name, index = self.cfg.looped_injection, self.w["injection.index"]
        if name == "hyper":
            return self.hyper(e)
        prefix = "injection.inner." if index is not None else "injection."
        w = {k[len(prefix) :]: v for k, v in self.w.items() if k.startswith(prefix)}
        s = {"passthrough": e, "additive": torch.zeros_like(e), "concat": e, "linear": e}.get(name, s0)
        for i in range(self.cfg.r):
            with torch.set_grad_enabled(torch.is_grad_enabled() and i >= self.first_grad_pass):
                u = self.inject(name, w, e, s)
                if index is not None:
                    u = u + index[i]
            s = self.run_pass(u, i)
        return s

    def inject(self, name: str, w: dict, e, s):
        """The block input u from e and the state s (w: the form's weights by their names in the form)."""
        if name == "passthrough":
            return s
        if name == "additive":
            return s + e
        if name == "concat":
            return torch.cat((e, s), -1) @ w["weight"].T
        if name == "linear":
            return e @ w["from_e.weight"].T + s @ w["from_s.weight"].T
        if name == "huginn":
            return torch.cat((s, e), -1) @ w["weight"].T
        assert name == "parcae", f"no equation for injection {name!r}"
        a = torch.exp(-F.softplus(w["dt"]) * torch.exp(w["A_log"]))
        return a * s + F.softplus(w["dt"]) * (rms(e, w["prelude_norm.weight"], self.cfg.norm_eps) @ w["B"].T)

    def hyper(self, e):
        """Zhu et al.'s lanes, per pass i: u = sum_n alpha[n] lane_n; lane_n <- sum_m M[n, m] lane_m + beta[n] s;
        dynamic: alpha[n] += s_a tanh(rms(lane_n) w_alpha), beta[n] += s_b tanh(rms(lane_n) w_beta),
        M[n, :] += s_m tanh(rms(lane_n) W_M), W_dyn = [w_alpha | w_beta | W_M]."""
        cfg, w = self.cfg, self.w
        K = cfg.options.get("hyper_lanes", 2)
        lanes = [e] * K
        for i in range(cfg.r):
            alpha = [w["injection.alpha"][i, n] for n in range(K)]
            beta = [w["injection.beta"][i, n] for n in range(K)]
            M = [[w["injection.M"][i, n, m] for m in range(K)] for n in range(K)]
            if cfg.options.get("hyper_dynamic", False):
                s_a, s_b, s_m = w["injection.dyn_scale"][i]
                for n in range(K):
                    z = torch.tanh(rms(lanes[n], eps=cfg.norm_eps) @ w["injection.W_dyn"][i])  # [B, T, K + 2]
                    alpha[n] = alpha[n] + s_a * z[..., 0:1]
                    beta[n] = beta[n] + s_b * z[..., 1:2]
                    M[n] = [M[n][m] + s_m * z[..., 2 + m : 3 + m] for m in range(K)]
            s = self.run_pass(sum(alpha[n] * lanes[n] for n in range(K)), i)
            lanes = [sum(M[n][m] * lanes[m] for m in range(K)) + beta[n] * s for n in range(K)]
        return sum(lanes)


# --------------------------------------------------------------------------------------------- the model's side


def randomized(cfg, seed: int = 0) -> LoopedTransformer:
    """The model in float64 with every parameter away from its init: matrices N(0, 1/fan_in), other parameters
    their init plus N(0, 0.3^2) (gains near 1, lane coefficients, decays, embeddings: none at its init value)."""
    torch.manual_seed(seed)
    model = LoopedTransformer(cfg).double()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g, dtype=p.dtype)
            if name in ("embed.weight", "lm_head.weight"):
                p.copy_(noise)
            elif p.dim() >= 2 and not name.startswith("injection."):
                p.copy_(noise / math.sqrt(p.shape[-1]))
            elif p.dim() >= 2 and name.endswith(("weight", ".B")):  # injection matrices (parcae's B)
                p.copy_(noise / math.sqrt(p.shape[-1]))
            else:
                p.add_(0.3 * noise)
    return model


def pass_inputs(model) -> list:
    """Records the input u of every pass of the recurrent block (a pre-hook on its first layer)."""
    seen = []
    model.recurrent[0].register_forward_pre_hook(lambda module, args: seen.append(args[0].detach().clone()))
    return seen


def weights(model) -> dict:
    return {n: p.detach().clone().requires_grad_() for n, p in model.named_parameters()}


def like_init_from_first_pass(eq: Equations, idx, u0):
    """The initial state s_0 read back from the first pass's input through the equation's inverse."""
    e = eq.prelude(idx).detach()
    w = {k: v.detach() for k, v in eq.w.items()}
    if eq.injection == "huginn":  # u_0 = W_s s_0 + W_e e with W = [W_s | W_e]
        d = e.shape[-1]
        W_s, W_e = w["injection.weight"][:, :d], w["injection.weight"][:, d:]
        return torch.linalg.solve(W_s.T, u0 - e @ W_e.T, left=False)
    if eq.injection == "parcae":  # u_0 = a s_0 + softplus(dt) B e_n
        a = torch.exp(-F.softplus(w["injection.dt"]) * torch.exp(w["injection.A_log"]))
        e_n = rms(e, w["injection.prelude_norm.weight"], eq.cfg.norm_eps)
        return (u0 - F.softplus(w["injection.dt"]) * (e_n @ w["injection.B"].T)) / a
    return None


def assert_model_is_its_equations(cfg, injection: str, block: str, truncated_to=None, state_std=LIKE_INIT_STD):
    """The model's logits and every parameter's gradient equal the equations' (float64; the logits are fp32)."""
    model = randomized(cfg)
    seen = pass_inputs(model)
    idx = torch.randint(0, cfg.vocab_size, (B, T), generator=torch.Generator().manual_seed(7))
    probe = torch.randn(B, T, cfg.vocab_size, generator=torch.Generator().manual_seed(8)).double()  # fp32 values
    logits = model(idx)
    (logits.double() * probe).sum().backward()
    assert len(seen) == cfg.r, "one pass input per pass"
    eq = Equations(cfg, weights(model), injection, block, truncated_to)
    s0 = like_init_from_first_pass(eq, idx, seen[0])
    if s0 is not None:  # the like-init draw: a truncated normal cut at 3 std
        assert s0.abs().max() <= 3 * state_std + 1e-9
        assert 0.8 < s0.std().item() / (state_std * TRUNC_STD) < 1.2
    want = eq.logits(idx, s0)
    torch.testing.assert_close(logits, want.float(), rtol=1e-6, atol=1e-6)
    (want * probe).sum().backward()
    for name, p in model.named_parameters():
        got, ref = p.grad, eq.w[name].grad
        if ref is None:  # used only in passes without gradient
            assert got is None or not got.any(), name
        else:
            assert got is not None, name
            torch.testing.assert_close(got, ref, rtol=1e-7, atol=1e-10, msg=lambda m, n=name: f"{n}: {m}")
    return model, seen


# ---------------------------------------------------------------------------------- every form, every recipe

INJECTION_CASES = {  # every registered injection form at r = 3 (hyper also dynamic with 3 lanes)
    "passthrough": {},
    "additive": {},
    "concat": {},
    "linear": {},
    "huginn": {},
    "parcae": {},
    "hyper": {},
    "loop_index": {},
}


def test_every_injection_form_has_its_equation_here():
    """A form added to loopscale/injections/ needs its published equation in Equations.loop and a case above."""
    missing = set(injections.names()) ^ set(INJECTION_CASES)
    assert not missing, f"write the published equation of {sorted(missing)} in Equations and INJECTION_CASES here"


@pytest.mark.parametrize(
    "name,fields",
    [
        *((n, f) for n, f in INJECTION_CASES.items()),
        ("hyper", {"options": {"hyper_lanes": 3, "hyper_dynamic": True}}),
        ("loop_index", {"looped_injection": "concat"}),
        ("loop_index", {"looped_injection": "additive"}),
    ],
    ids=lambda v: v if isinstance(v, str) else "-".join(f"{k}={x}" for k, x in v.items()) or "default",
)
def test_each_injection_computes_its_published_equation_at_r3(name, fields):
    cfg = small(injection=name, **fields)
    assert_model_is_its_equations(cfg, name, "prenorm")


BLOCK_CASES = {"prenorm": {}, "sandwich": {}, "lora": {"lora_rank": 3}, "scaled_residual": {"residual_lambda": 1.7}}


def test_every_block_form_has_its_equation_here():
    missing = set(blocks.names()) ^ set(BLOCK_CASES)
    assert not missing, f"write the published equation of block {sorted(missing)} in Equations.layer and BLOCK_CASES"


@pytest.mark.parametrize("name", sorted(BLOCK_CASES))
def test_each_block_form_computes_its_published_equation_at_r3(name):
    cfg = small(injection="concat", block=name, options=BLOCK_CASES[name])
    assert_model_is_its_equations(cfg, "concat", name)


def test_blocks_with_the_other_layout_options():
    """SwiGLU MLP (fc = [gate; up]), a tied head and a soft-cap-free head, with lora's per-pass pairs."""
    cfg = small(injection="linear", block="lora", mlp="swiglu", tie_embeddings=True)
    assert_model_is_its_equations(cfg, "linear", "lora")


# recipe -> (injection, block, passes with gradient): the designs of docs/design.md, "Loop designs"
RECIPE_DESIGNS = {
    "baseline": ("concat", "prenorm", None),  # the published injection (every preset's looped_injection)
    "tbptt": ("concat", "prenorm", 2),  # gradient through the last ceil(r / 2) passes
    "hyper": ("hyper", "prenorm", None),
    "parcae": ("parcae", "prenorm", None),
    "huginn": ("huginn", "sandwich", None),
    "whole_stack": ("concat", "prenorm", None),  # and no prelude or coda
    "loop_index": ("loop_index", "prenorm", None),
    "lora": ("concat", "lora", None),
    "stable_residual": ("concat", "scaled_residual", None),
}


def test_every_recipe_has_its_design_here():
    missing = set(recipes.names()) ^ set(RECIPE_DESIGNS)
    assert not missing, f"state the design of recipe {sorted(missing)} (its forms, truncation) in RECIPE_DESIGNS"


@pytest.mark.parametrize("name", sorted(RECIPE_DESIGNS))
def test_each_recipe_computes_its_design_at_r3(name):
    injection, block, grad_passes = RECIPE_DESIGNS[name]
    cfg = small(recipe=name)
    assert cfg.recipe == name
    if name == "whole_stack":  # Ouro: the whole stack looped, no unshared layers around it
        assert (cfg.n_prelude, cfg.n_coda, cfg.n_rec) == (0, 0, 2)
    else:
        assert (cfg.n_prelude, cfg.n_coda, cfg.n_rec) == (1, 1, 2)
    assert cfg.bptt_k == grad_passes  # tbptt: ceil(3 / 2) = 2 passes with gradient; the others all r
    assert_model_is_its_equations(cfg, injection, block, grad_passes)  # the gradients see the truncation


# ------------------------------------------------------------------------------------------- values at init


def at_init(cfg, seed: int = 0) -> LoopedTransformer:
    torch.manual_seed(seed)
    return LoopedTransformer(cfg).double()


def run_recording(model, cfg):
    """(e, the pass inputs u_i, the pass outputs s_i, the coda's input) of one forward."""
    seen, outs, coda = pass_inputs(model), [], []
    model.pass_norm.register_forward_hook(lambda m, a, out: outs.append(out.detach().clone()))
    if cfg.n_coda:
        model.coda[0].register_forward_pre_hook(lambda m, args: coda.append(args[0].detach().clone()))
    idx = torch.randint(0, cfg.vocab_size, (B, T), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        model(idx)
        e = Equations(cfg, dict(model.named_parameters()), cfg.injection, cfg.block).prelude(idx)
    return e, seen, outs, coda[0] if coda else None


@pytest.mark.parametrize("injection", ["concat", "linear"])
def test_the_published_injection_starts_as_the_identity(injection):
    """W = [I | 0] (concat) and W_e = I, W_s = 0 (linear): u = e on every pass, s_0 = e."""
    cfg = small(injection=injection)
    model = at_init(cfg)
    d = cfg.d_model
    eye = torch.eye(d, dtype=torch.float64)
    if injection == "concat":
        assert torch.equal(model.injection.weight, torch.cat((eye, torch.zeros(d, d, dtype=torch.float64)), 1))
    else:
        assert torch.equal(model.injection.from_e.weight, eye) and not model.injection.from_s.weight.any()
    e, seen, _, _ = run_recording(model, cfg)
    for u in seen:
        torch.testing.assert_close(u, e, rtol=0, atol=1e-12)


def test_additive_starts_from_zero_and_passthrough_from_e():
    cfg = small(injection="additive")
    e, seen, outs, _ = run_recording(at_init(cfg), cfg)
    torch.testing.assert_close(seen[0], e, rtol=0, atol=1e-12)  # s_0 = 0
    for i in (1, 2):
        torch.testing.assert_close(seen[i], outs[i - 1] + e, rtol=0, atol=1e-12)
    cfg = small(injection="passthrough")
    e, seen, outs, coda = run_recording(at_init(cfg), cfg)
    torch.testing.assert_close(seen[0], e, rtol=0, atol=1e-12)
    torch.testing.assert_close(seen[2], outs[1], rtol=0, atol=0)
    torch.testing.assert_close(coda, outs[2], rtol=0, atol=0)


def test_huginns_adapter_and_initial_state_at_init():
    """W ~ truncated normal std sqrt(2 / (5 d)) cut at 3 std; s_0 a fresh like-init draw (std sqrt(2/5)) in
    every forward, whatever e is; u = W [s; e] from the first pass."""
    d = 128
    form = injections.form("huginn")
    torch.manual_seed(0)
    module = form.build(small(injection="huginn", d_model=d, head_dim=32)).double()
    std = math.sqrt(2 / (5 * d))
    W = module.weight.detach()
    assert W.shape == (d, 2 * d) and W.abs().max() <= 3 * std
    assert abs(W.std().item() / (std * TRUNC_STD) - 1) < 0.02 and abs(W.mean().item()) < 0.02 * std
    e = torch.full((4, 64, d), 5.0, dtype=torch.float64)
    W_s, W_e = W[:, :d], W[:, d:]
    draws = []
    for _ in range(2):
        u0, _ = module.read(module.start(e), e, 0)
        draws.append(torch.linalg.solve(W_s.T, u0 - e @ W_e.T, left=False))
    for s0 in draws:
        assert s0.abs().max() <= 3 * LIKE_INIT_STD + 1e-9
        assert abs(s0.std().item() / (LIKE_INIT_STD * TRUNC_STD) - 1) < 0.02 and abs(s0.mean().item()) < 0.01
    assert (draws[0] - draws[1]).abs().mean() > 0.3  # a fresh draw each forward
    # inside the model the adapter keeps its own init (the model's init leaves injection.* alone)
    cfg = small(recipe="huginn")
    model = at_init(cfg)
    W = model.injection.weight.detach()
    std = math.sqrt(2 / (5 * cfg.d_model))
    assert W.abs().max() <= 3 * std and abs(W.std().item() / (std * TRUNC_STD) - 1) < 0.1


def test_huginns_sandwich_gains_start_at_one():
    model = at_init(small(recipe="huginn"))
    for layer in (*model.prelude, *model.recurrent, *model.coda):
        gains = [getattr(layer, f"norm_{j}").weight for j in (1, 2, 3, 4)]
        assert all(torch.equal(g, torch.ones_like(g)) for g in gains)


def test_parcaes_decay_drive_and_state_at_init():
    """A_log = 0, a = sqrt(1/5) in every component (softplus(dt) = ln sqrt(5)), B = I, the prelude norm's gain 1;
    the largest decay logged; s_0 like-init with std parcae_state_std."""
    cfg = small(recipe="parcae")
    model = at_init(cfg)
    inj = model.injection
    d = cfg.d_model
    a = torch.exp(-F.softplus(inj.dt) * torch.exp(inj.A_log)).detach()
    # stored in fp32: exact to fp32's rounding
    torch.testing.assert_close(a, torch.full((d,), math.sqrt(1 / 5), dtype=torch.float64), rtol=1e-6, atol=0)
    torch.testing.assert_close(F.softplus(inj.dt).detach(), torch.full((d,), math.log(5) / 2, dtype=torch.float64))
    assert not inj.A_log.any() and torch.equal(inj.B, torch.eye(d, dtype=torch.float64))
    assert torch.equal(inj.prelude_norm.weight, torch.ones(d, dtype=torch.float64))
    assert model.evaluation_metrics() == pytest.approx({"max_decay": math.sqrt(1 / 5)}, rel=1e-6)
    # with random A_log, dt every component stays in (0, 1) and the metric is the largest
    with torch.no_grad():
        inj.A_log.normal_(0.0, 1.0)
        inj.dt.normal_(0.0, 2.0)
    a = torch.exp(-F.softplus(inj.dt) * torch.exp(inj.A_log)).detach()
    assert ((a > 0) & (a < 1)).all()
    assert model.evaluation_metrics()["max_decay"] == pytest.approx(a.max().item(), rel=1e-12)
    # the initial state: like-init at the option's std, a fresh draw each forward
    for std in (LIKE_INIT_STD, 0.25):
        cfg = small(recipe="parcae", d_model=64, head_dim=32, options={"parcae_state_std": std})
        model = at_init(cfg)
        e = torch.randn(4, 64, 64, dtype=torch.float64)
        draws = []
        for _ in range(2):
            u0, _ = model.injection.read(model.injection.start(e), e, 0)
            e_n = rms(e, None, cfg.norm_eps)
            step = F.softplus(model.injection.dt).detach()  # ln sqrt(5), as stored
            a = torch.exp(-step)  # A_log = 0
            draws.append((u0 - step * e_n) / a)  # B = I, gain 1 at init
        for s0 in draws:
            assert s0.abs().max() <= 3 * std + 1e-9
            assert abs(s0.std().item() / (std * TRUNC_STD) - 1) < 0.02
        assert (draws[0] - draws[1]).abs().mean() > 0.5 * std


@pytest.mark.parametrize("K", [2, 3])
def test_hyper_lanes_at_init(K):
    """alpha_i = one-hot(i mod K), M_i = I, beta_i = 1 (dynamic: W_dyn = 0, scales 0.01); every lane is then
    e + s_1 + ... + s_i, so pass i + 1 reads that sum and the coda K times it; the dynamic module starts equal."""
    r = 5
    cfg = small(r=r, injection="hyper", options={"hyper_lanes": K})
    model = at_init(cfg)
    inj = model.injection
    one_hot = torch.zeros(r, K, dtype=torch.float64)
    one_hot[torch.arange(r), torch.arange(r) % K] = 1.0
    assert torch.equal(inj.alpha, one_hot)
    assert torch.equal(inj.M, torch.eye(K, dtype=torch.float64).expand(r, K, K))
    assert torch.equal(inj.beta, torch.ones(r, K, dtype=torch.float64))
    e, seen, outs, coda = run_recording(model, cfg)
    total = e
    for i in range(r):
        torch.testing.assert_close(seen[i], total, rtol=1e-12, atol=1e-12)
        total = total + outs[i]
    torch.testing.assert_close(coda, K * total, rtol=1e-12, atol=1e-12)
    dynamic = at_init(small(r=r, injection="hyper", options={"hyper_lanes": K, "hyper_dynamic": True}))
    assert not dynamic.injection.W_dyn.any()
    assert torch.equal(dynamic.injection.dyn_scale, torch.full((r, 3), 0.01).double())
    dynamic.load_state_dict(model.state_dict(), strict=False)
    idx = torch.randint(0, cfg.vocab_size, (B, T), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        torch.testing.assert_close(dynamic(idx), model(idx), rtol=0, atol=1e-12)


def test_loop_index_starts_at_zero_over_the_identity_injection():
    cfg = small(recipe="loop_index")
    model = at_init(cfg)
    assert torch.equal(model.injection.index, torch.zeros(cfg.r, cfg.d_model, dtype=torch.float64))
    e, seen, _, _ = run_recording(model, cfg)
    for u in seen:  # p_i = 0 and W_e = I, W_s = 0: u = e on every pass
        torch.testing.assert_close(u, e, rtol=0, atol=1e-12)


def test_lora_pairs_at_init():
    """B_i = 0 for every pass and matrix (the shared block alone), A_i uniform with std 1/sqrt(in), a different
    draw for each pass; the prelude and coda layers have no adapters."""
    cfg = small(recipe="lora", d_model=64, head_dim=32, options={"lora_rank": 4})
    model = at_init(cfg)
    names = {"attn_q", "attn_k", "attn_v", "attn_proj", "mlp_fc", "mlp_proj"}
    for layer in model.recurrent:
        assert set(layer.adapters) == names
        for adapter in layer.adapters.values():
            A, Bm = adapter.A.detach(), adapter.B.detach()
            assert A.shape[:2] == (cfg.r, 4) and Bm.shape[0] == cfg.r and Bm.shape[-1] == 4
            assert not Bm.any()
            fan_in = A.shape[-1]
            assert A.abs().max() <= math.sqrt(3 / fan_in)
            assert abs(A.std().item() * math.sqrt(fan_in) - 1) < 0.15
            assert all(not torch.equal(A[i], A[j]) for i in range(cfg.r) for j in range(i))
    for layer in (*model.prelude, *model.coda):
        assert not any("adapters" in n for n, _ in layer.named_parameters())


@pytest.mark.parametrize("lam", [1.0, 2.5])
def test_the_scaled_residual_writes_scale_by_lambda_over_r_sqrt_k(lam):
    """The recurrent layer's two writes are c = lambda / (r sqrt(k)) times the branch; prelude and coda unscaled
    (read off one layer: x_out - x = c (attn + mlp branches))."""
    cfg = small(r=4, block="scaled_residual", options={"residual_lambda": lam})
    model = randomized(cfg)
    x = torch.randn(B, T, cfg.d_model, dtype=torch.float64)
    cos, sin = model.rope_cos[:T], model.rope_sin[:T]
    eq = Equations(cfg, dict(model.named_parameters()), cfg.injection, "prenorm")
    with torch.no_grad():
        for where, layer, c in (
            ("recurrent", model.recurrent[0], lam / (4 * math.sqrt(cfg.n_rec))),
            ("coda", model.coda[0], 1.0),
        ):
            h = x + c * eq.attention(rms(x, layer.attn_norm.weight), f"{where}.0", None)
            want = h + c * eq.mlp(rms(h, layer.mlp_norm.weight), f"{where}.0", None)
            torch.testing.assert_close(layer(x, cos, sin), want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("recipe", ["huginn", "parcae"])
def test_the_random_initial_state_is_drawn_anew_in_every_forward_in_evaluation_too(recipe):
    """Huginn's and Parcae's s_0 is a fresh like-init draw in every forward, evaluation included (the released
    code draws it in every call): two evaluation forwards of one batch differ, and each s_0 read back from the
    first pass is the truncated normal (std sqrt(2/5), cut at 3 std)."""
    cfg = small(recipe=recipe)
    model = randomized(cfg).eval()
    seen = pass_inputs(model)
    idx = torch.randint(0, cfg.vocab_size, (16, T), generator=torch.Generator().manual_seed(9))
    with torch.no_grad():
        first, second = model(idx), model(idx)
        eq = Equations(cfg, dict(model.named_parameters()), recipe, "sandwich" if recipe == "huginn" else "prenorm")
        draws = [like_init_from_first_pass(eq, idx, seen[i * cfg.r]) for i in (0, 1)]
    assert not torch.allclose(first, second)
    for s0 in draws:
        assert s0.abs().max() <= 3 * LIKE_INIT_STD + 1e-9
        assert abs(s0.std().item() / (LIKE_INIT_STD * TRUNC_STD) - 1) < 0.06 and abs(s0.mean().item()) < 0.03
    assert (draws[0] - draws[1]).abs().mean() > 0.3


def test_parcaes_injection_equals_the_released_code():
    """Numbers from Parcae's own DiagonalInjection (tests/fixtures/designs/, made by make_parcae_fixture.py from
    sandyresearch/parcae): their init (A_log, dt_bias, B) is loopscale's, and with random A_log, dt, B the block
    input from a state x and a unit-RMS prelude output e, and the largest decay, are theirs."""
    case = torch.load(FIXTURES / "designs" / "golden_parcae_injection.pt", weights_only=True)
    d = case["x"].shape[-1]
    module = injections.form("parcae").build(small(recipe="parcae", d_model=d, head_dim=8))
    init = dict(module.named_parameters())
    for ours, theirs in (("A_log", "A_log"), ("dt", "dt_bias"), ("B", "B")):
        torch.testing.assert_close(init[ours].detach(), case["initial"][theirs], rtol=1e-6, atol=1e-7)
    with torch.no_grad():
        module.A_log.copy_(case["params"]["A_log"])
        module.dt.copy_(case["params"]["dt_bias"])
        module.B.copy_(case["params"]["B"])
        state = module.update(module.start(case["e"]), case["x"], 0)  # the state after a pass is x
        u, _ = module.read(state, case["e"], 1)
    torch.testing.assert_close(u, case["out"], rtol=1e-5, atol=1e-6)
    assert module.evaluation_metrics()["max_decay"] == pytest.approx(case["max_decay"], rel=1e-6)
