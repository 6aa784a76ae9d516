"""The planning numbers written out by hand (issue 58): variable-depth draws (loopscale/model/r_sampling.py: the
distribution against a quadrature of its own, the keyed seeding, the budget's closest step count, the ledger's
fields), the memory model's terms off their defaults (loopscale/model/memory.py: cards, margin, world > 1,
published precision, plain AdamW, the head chunk's cap, each compile mode's layer, RoPE and weight-copy terms) and
the plain AdamW recipe (loopscale/train/optim/groups.py, loopscale/train/optim/lr_transfer.py: which parameter
decays, each group's lr, lr_rule x lr_scale). Expected values never come from the helper under test."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from scipy import integrate, stats

from loopscale.config.schema import OptimConfig
from loopscale.errors import ConfigError
from loopscale.model import memory, r_sampling
from loopscale.model.accounting import flops_per_token
from loopscale.model.transformer import LoopedTransformer
from loopscale.train.optim import groups, lr_transfer
from support.train import tiny_model

# --- r_sampling ---------------------------------------------------------------------------------------------


def test_the_default_cap_is_four_r_and_an_explicit_r_max_wins():
    cfg = tiny_model(4, "baseline", r_sampling="poisson-lognormal")
    assert r_sampling.r_cap(cfg) == 16 and r_sampling.pmf(cfg)[0].tolist() == list(range(1, 17))
    capped = tiny_model(4, "baseline", r_sampling="poisson-lognormal", r_max=5)
    assert r_sampling.r_cap(capped) == 5
    fixed = tiny_model(4, "baseline")
    assert [a.tolist() for a in r_sampling.pmf(fixed)] == [[4], [1.0]]
    assert r_sampling.expected_flops(fixed) == flops_per_token(fixed)


def test_the_poisson_lognormal_pmf_equals_an_independent_quadrature_and_its_variance():
    """P(n = k + 1) = integral of Poisson(k; lambda) over lambda ~ LogNormal(ln r - sigma^2 / 2, sigma), written with
    scipy's lognormal and quad; Var(n) = E[lambda] + Var(lambda) = r + r^2 (e^{sigma^2} - 1)."""
    r, sigma = 4, 0.7
    cfg = tiny_model(r, "baseline", r_sampling="poisson-lognormal", r_sigma=sigma, r_max=400)
    values, probs = r_sampling.pmf(cfg)
    lognormal = stats.lognorm(s=sigma, scale=math.exp(math.log(r) - sigma**2 / 2))
    for k in range(8):
        want = integrate.quad(lambda lam, k=k: stats.poisson.pmf(k, lam) * lognormal.pdf(lam), 0, np.inf, limit=200)[0]
        assert probs[k] == pytest.approx(want, rel=1e-6, abs=1e-12), k
    mean = values @ probs
    assert mean == pytest.approx(r + 1, abs=1e-8)
    assert ((values - mean) ** 2) @ probs == pytest.approx(r + r**2 * (math.exp(sigma**2) - 1), rel=1e-6)


def test_the_draws_are_keyed_as_documented():
    """Step s's draw from numpy's generator seeded [0x7E57, seed, s] (a sequence's [0x7E57, seed, s, 1]):
    lambda ~ LogNormal(ln r - sigma^2 / 2, sigma), n = min(Poisson(lambda) + 1, r_max); uniform: a choice over
    r_set. Written out here, so a resumed run and a run of another version draw the same passes."""
    cfg = tiny_model(4, "baseline", r_sampling="poisson-lognormal", r_sigma=0.9, r_max=9)
    for seed, step in ((0, 0), (3, 17), (11, 2)):
        rng = np.random.default_rng([0x7E57, seed, step])
        lam = rng.lognormal(math.log(4) - 0.81 / 2, 0.9, 1)
        assert r_sampling.draw_step(cfg, seed, step) == min(int(rng.poisson(lam)[0]) + 1, 9)
        rng = np.random.default_rng([0x7E57, seed, step, 1])
        lam = rng.lognormal(math.log(4) - 0.81 / 2, 0.9, 64)
        want = np.minimum(rng.poisson(lam) + 1, 9)
        got = r_sampling.draw_sequences(cfg, seed, step, 64)
        assert got.tolist() == want.tolist() and len(set(got.tolist())) > 3  # each sequence its own draw
    uniform = tiny_model(4, "baseline", r_sampling="uniform", r_set=[5, 2, 3], r_sampling_per="sequence")
    rng = np.random.default_rng([0x7E57, 7, 4, 1])
    assert r_sampling.step_draws(uniform, 7, 4, 32).tolist() == rng.choice(np.array([2, 3, 5]), 32).tolist()
    per_step = tiny_model(4, "baseline", r_sampling="uniform", r_set=[5, 2, 3])
    rng = np.random.default_rng([0x7E57, 7, 4])
    assert r_sampling.step_draws(per_step, 7, 4, 6).tolist() == [int(rng.choice(np.array([2, 3, 5]), 1)[0])] * 6


def _uniform_cfg():
    return tiny_model(4, "baseline", r_sampling="uniform", r_set=[2, 3, 5], r_sampling_per="sequence")


def test_a_compute_budget_takes_the_step_count_closest_to_it():
    """C between the realised FLOPs of k and k + 1 steps: k when nearer k's, k + 1 when nearer k + 1's; a budget
    below half a step still trains one step."""
    cfg, batch, batch_tokens = _uniform_cfg(), 3, 96
    F = {n: flops_per_token(tiny_model(n, "baseline", depth=None, n_rec=2)) for n in (2, 3, 5)}
    spent = [0.0]
    for s in range(12):
        draws = r_sampling.draw_sequences(cfg, 1, s, batch)
        spent.append(spent[-1] + batch_tokens * sum(F[int(n)] for n in draws) / batch)
    for k, share, want in ((5, 0.3, 5), (5, 0.7, 6), (8, 0.45, 8), (8, 0.55, 9)):
        C = spent[k] + share * (spent[k + 1] - spent[k])
        sched = r_sampling.schedule(cfg, 1, batch, compute_flops=C, batch_tokens=batch_tokens)
        assert sched.steps == want, (k, share)
        assert sched.step_flops.sum() * batch_tokens == pytest.approx(spent[want], rel=1e-12)
    tiny = r_sampling.schedule(cfg, 1, batch, compute_flops=0.2 * spent[1], batch_tokens=batch_tokens)
    assert tiny.steps == 1
    with pytest.raises(ConfigError, match="give steps or a compute budget"):
        r_sampling.schedule(cfg, 1, batch, steps=3, compute_flops=C, batch_tokens=batch_tokens)


def test_the_ledger_states_each_field():
    cfg, batch, batch_tokens = _uniform_cfg(), 4, 128
    F = {n: flops_per_token(tiny_model(n, "baseline", depth=None, n_rec=2)) for n in (2, 3, 5)}
    sched = r_sampling.schedule(cfg, 2, batch, steps=5)
    draws = [r_sampling.draw_sequences(cfg, 2, s, batch).tolist() for s in range(5)]
    assert sched.draws.tolist() == draws
    flat = [n for d in draws for n in d]
    per_step = [sum(F[n] for n in d) / batch for d in draws]
    ledger = r_sampling.ledger(cfg, sched, batch_tokens)
    words = ("r_sampling", "per", "r_grad", "histogram")
    assert [ledger[k] for k in words[:3]] == ["uniform", "sequence", "bptt"]
    assert {k: v for k, v in ledger.items() if k not in words} == pytest.approx(
        {
            "r_max": 5,
            "passes_expected": 10 / 3,
            "passes_realised": sum(flat) / len(flat),
            "F_expected": (F[2] + F[3] + F[5]) / 3,
            "F_realised": sum(per_step) / 5,
            "C_realised": sum(per_step) * batch_tokens,
        },
        rel=1e-12,
    )
    assert ledger["histogram"] == dict(Counter(flat))


# --- memory ---------------------------------------------------------------------------------------------------


def test_a_cards_memory_ignores_case_and_spacing_and_keeps_a_tenth_free():
    assert memory.card_memory("  nvidia   H100 80gb hbm3 ") == 81559 * 2**20
    assert memory.usable_memory("NVIDIA H200") == int(143771 * 2**20 * 0.9)
    assert memory.usable_memory("NVIDIA A10") == int(23028 * 2**20 * 0.9)
    with pytest.raises(ConfigError, match="no memory size known for card 'NVIDIA H100'"):
        memory.card_memory("NVIDIA H100")


def _counts(model):
    total = sum(p.numel() for p in model.parameters())
    embedding = model.embed.weight.numel()
    # MuonH's matrices: every 2-D weight of the blocks and the injection (the baseline's concat matrix [d, 2d])
    blocks = ("prelude.", "recurrent.", "coda.", "injection.")
    matrices = sum(p.numel() for n, p in model.named_parameters() if p.dim() == 2 and n.startswith(blocks))
    return total, embedding, matrices


def test_state_bytes_off_their_defaults():
    """fp32 weights, bf16 embedding only under published precision on CUDA; DDP's bucket copy of the gradients at
    world > 1; plain AdamW two moments a parameter; MuonH one fp32 momentum per matrix element, two moments of the
    rest in their dtype."""
    cfg = tiny_model(4, "baseline", precision="published")
    total, embedding, matrices = _counts(LoopedTransformer(cfg))
    weights = 4 * (total - embedding) + 2 * embedding
    assert memory.state_bytes(cfg, "adamw", cuda=True) == (weights, weights, 2 * weights)
    assert memory.state_bytes(cfg, "adamw", cuda=True, world=2) == (weights, 2 * weights, 2 * weights)
    assert memory.state_bytes(cfg, "muonh", cuda=True, world=4) == (
        weights,
        2 * weights,
        4 * matrices + 2 * (weights - 4 * matrices),
    )
    assert memory.state_bytes(cfg, "adamw", cuda=False) == (4 * total, 4 * total, 8 * total)
    plain = tiny_model(4, "baseline")
    assert memory.state_bytes(plain, "adamw", cuda=True) == (4 * total, 4 * total, 8 * total)


def test_the_transient_is_the_larger_of_a_capped_head_chunk_and_a_layers_backward():
    small_v = tiny_model(4, "baseline", vocab_size=200)  # d 64, T 32, V_pad 256
    assert small_v.padded_vocab_size == 256
    for batch in (2, 200):  # 64 and 6,400 tokens: the layer's backward, 32 d bytes a token, is the larger
        assert memory.transient_bytes(small_v, batch) == max(32 * 64 * 32 * batch, min(4096, 32 * batch) * 2912)
    big_v = tiny_model(4, "baseline", vocab_size=3000)
    V_pad = big_v.padded_vocab_size
    assert memory.transient_bytes(big_v, 2) == 64 * (2 * V_pad + 12 * 3000)  # one chunk of 64 tokens
    assert memory.transient_bytes(big_v, 200) == 4096 * (2 * V_pad + 12 * 3000)  # capped at HEAD_CHUNK_TOKENS


def test_a_layer_pass_saves_22d_compiled_40d_eager_plus_the_mlp_and_row_statistics():
    cfg = tiny_model(4, "baseline", d_model=96, head_dim=16)  # 6 heads, h = 384
    row = 12 * 6 + 8
    assert memory.layer_pass_bytes(cfg, 10, compiled=True) == 10 * (22 * 96 + 4 * 384 + row)
    assert memory.layer_pass_bytes(cfg, 10, compiled=False) == 10 * (40 * 96 + 4 * 384 + row)
    swiglu = tiny_model(4, "baseline", d_model=96, head_dim=16, mlp="swiglu")
    h = swiglu.mlp_hidden
    assert h == 256  # 2/3 x 4 x 96 to the nearest multiple of 64
    assert memory.layer_pass_bytes(swiglu, 10, compiled=True) == 10 * (22 * 96 + 8 * h + row)


def test_the_compile_modes_differ_by_their_layer_rope_and_weight_copy_terms():
    """eager: 40d a layer pass, 4 bf16 RoPE copies [T, hd/2] a pass, the matrices cast once; blocks: 22d, 2 RoPE
    copies a pass, the matrices cast once per layer PASS with gradient; model: 22d, the fp32 RoPE tables once, cast
    once. Published precision: the bf16 tables once whatever the mode."""
    cfg = tiny_model(4, "tbptt", bptt_k=3)  # p = c = 2, k = 2, r = 4, 3 passes with gradient
    p, k, c, T, hd, d = 2, cfg.n_rec, 2, cfg.seq_len, cfg.head_dim, cfg.d_model
    assert (cfg.n_prelude, cfg.n_coda, k) == (2, 2, 2)
    layer_passes = p + c + k * 3
    matrix = sum(
        q.numel() for n, q in LoopedTransformer(cfg).named_parameters() if n.startswith("recurrent.0.") and q.dim() == 2
    )
    batch, tokens = 3, 3 * T
    eager = memory.activation_bytes(cfg, batch, False)
    blocks = memory.activation_bytes(cfg, batch, "blocks")
    model = memory.activation_bytes(cfg, batch, "model")
    assert eager - model == (
        layer_passes * 18 * d * tokens + 4 * T * hd * layer_passes - 4 * T * hd  # layers and RoPE; casts alike
    )
    assert blocks - model == 2 * T * hd * layer_passes - 4 * T * hd + 2 * matrix * (k * 3 - k)
    published = tiny_model(4, "tbptt", bptt_k=3, precision="published")
    for mode in (False, "blocks", "model"):
        own_rope = {False: 4 * T * hd * layer_passes, "blocks": 2 * T * hd * layer_passes, "model": 4 * T * hd}[mode]
        assert memory.activation_bytes(published, batch, mode) - memory.activation_bytes(cfg, batch, mode) == (
            2 * T * hd - own_rope
        )


# --- the plain AdamW recipe ------------------------------------------------------------------------------


def test_adamw_decays_the_block_and_head_matrices_only():
    """Parcae under optim=adamw: its B a matrix never decayed, A_log and dt scalars (the hyper group); norms and
    the embedding never decayed; every 2-D block weight and the untied head decayed."""
    model = LoopedTransformer(tiny_model(4, "parcae"))
    by_id = {id(p): n for n, p in model.named_parameters()}
    found = {
        g["name"]: (g["weight_decay"], sorted(by_id[id(p)] for p in g["params"]))
        for g in groups.adamw_param_groups(model, 0.07)
    }
    names = [n for n, _ in model.named_parameters()]
    decay = sorted(
        n for n in names if n.startswith(("prelude.", "recurrent.", "coda.")) and not n.endswith("norm.weight")
    )
    assert found["decay"] == (0.07, sorted([*decay, "lm_head.weight"]))
    assert found["hyper"] == (0.0, ["injection.A_log", "injection.dt"])
    no_decay = sorted(set(names) - set(decay) - {"lm_head.weight", "injection.A_log", "injection.dt"})
    assert "injection.B" in no_decay and "embed.weight" in no_decay and "pass_norm.weight" in no_decay
    assert found["no_decay"] == (0.0, no_decay)
    assert list(found) == ["decay", "no_decay", "hyper"]
    plain = [g["name"] for g in groups.adamw_param_groups(LoopedTransformer(tiny_model(4, "baseline")), 0.1)]
    assert plain == ["decay", "no_decay"]  # no scalars: no empty hyper group


def test_adamw_lrs_scale_the_decayed_matrices_by_base_width_over_d_and_every_group_by_rule_and_scale():
    cfg = tiny_model(4, "baseline", d_model=96, head_dim=16)
    optim = OptimConfig(lr=2e-3, weight_decay=0.1, width_scaling=True, base_width=128)
    assert lr_transfer.adamw_lrs(cfg, optim) == pytest.approx(
        {"decay": 2e-3 * 128 / 96, "no_decay": 2e-3, "hyper": 2e-3}
    )
    unscaled = OptimConfig(lr=2e-3, weight_decay=0.0, width_scaling=True, base_width=128)
    assert lr_transfer.adamw_lrs(cfg, unscaled) == {"decay": 2e-3, "no_decay": 2e-3, "hyper": 2e-3}
    off = OptimConfig(lr=2e-3, weight_decay=0.1, width_scaling=False)
    assert lr_transfer.adamw_lrs(cfg, off)["decay"] == 2e-3
    ruled = OptimConfig(lr=2e-3, weight_decay=0.1, width_scaling=True, base_width=128, lr_rule=1.5, lr_scale=0.25)
    assert lr_transfer.peak_lrs(cfg, ruled, 1024, 10**6, 1e9) == pytest.approx(
        {"decay": 2e-3 * 128 / 96 * 0.375, "no_decay": 2e-3 * 0.375, "hyper": 2e-3 * 0.375}
    )
    muonh = OptimConfig(optimizer="muonh", weight_decay=0.0, transfer="none", lr_rule=2.0, lr_scale=0.5, lr=0.02)
    assert lr_transfer.peak_lrs(cfg, muonh, 1024, 10**6, 1e9) == pytest.approx(
        {"matrix": 0.02, "head": 0.004, "embedding": 0.3, "norm": 0.005}
    )
