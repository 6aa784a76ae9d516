"""loopscale.accounting: exact counts against the built modules, FLOPs against FlopCounterMode, the
published reference numbers, iso-depth invariants, presets and config validation."""

import math

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from loopscale.accounting import (
    accounting_report,
    cpu_model,
    flops_per_token,
    layer_plan,
    paper_model,
    param_counts,
    tokens_for_budget,
)
from loopscale.config import ModelConfig
from loopscale.model import LoopedTransformer


def numel(*modules) -> int:
    return sum(p.numel() for m in modules if m is not None for p in m.parameters())


def tiny(r: int, **overrides) -> ModelConfig:
    """The CPU grid (L_eff = 12) shrunk to d = 64 with a small vocabulary, for building models fast."""
    return cpu_model(64, r, **{"vocab_size": 200, "seq_len": 32, **overrides})


# ---------------------------------------------------------------------------------------------------- counts


def test_published_grid_reference_numbers():
    """DESIGN.md: s = 6 (d = 384) gives N = 35,405,952 at r = 1; N_once = 7,377,024, N_rec = 14,161,920 at r = 2."""
    one, two = paper_model(6, 1), paper_model(6, 2)
    assert one.d_model == two.d_model == 384 and one.n_head == 3
    assert param_counts(one).N == 35_405_952
    assert param_counts(two).N_once == 7_377_024
    assert param_counts(two).N_rec == 14_161_920
    assert param_counts(two).N == 7_377_024 + 14_161_920


def count_grid():
    """Every r in {1,2,4,8} x injection (hyper static and dynamic for r > 1) x tied/untied x relu2/swiglu."""
    for r in (1, 2, 4, 8):
        modes = [("passthrough", False), ("linear", False), ("additive", False)]
        if r > 1:
            modes += [("hyper", False), ("hyper", True)]
        for injection, dynamic in modes:
            for tie in (False, True):
                for mlp in ("relu2", "swiglu"):
                    yield dict(r=r, injection=injection, hyper_dynamic=dynamic, tie_embeddings=tie, mlp=mlp)


@pytest.mark.parametrize("kw", list(count_grid()), ids=lambda kw: "-".join(str(v) for v in kw.values()))
def test_param_counts_equal_module_numel(kw):
    r = kw.pop("r")
    cfg = tiny(r, hyper_lanes=3 if kw["hyper_dynamic"] else 2, **kw)
    model = LoopedTransformer(cfg)
    counts = param_counts(cfg)
    assert counts.N_rec == numel(model.recurrent)
    assert counts.N_once == numel(model.prelude, model.coda, model.injection, model.embed_norm, model.pass_norm,
                                  model.final_norm)
    assert counts.embedding == numel(model.embed)
    assert counts.lm_head == (0 if cfg.tie_embeddings else numel(model.lm_head))
    # nothing is left out: every stored parameter (a tied head once) is in one of the counts
    assert counts.total == sum(p.numel() for p in model.parameters())


# ---------------------------------------------------------------------------------------------------- FLOPs


FLOP_CASES = [
    dict(r=1),
    dict(r=2),
    dict(r=2, d_model=128, seq_len=64),
    dict(r=4, variant="tbptt"),  # bptt_k = 2
    dict(r=8, bptt_k=1, injection="additive"),
    dict(r=4, variant="hyper"),
    dict(r=4, variant="hyper", hyper_dynamic=True, bptt_k=1),
    dict(r=8, mlp="swiglu", tie_embeddings=True, logit_softcap=30.0),
]


@pytest.mark.parametrize("kw", FLOP_CASES, ids=lambda kw: "-".join(f"{k}={v}" for k, v in kw.items()))
def test_flops_per_token_matches_flop_counter(kw):
    """Accounting vs FlopCounterMode on a real forward + backward under SDPA's math backend (the CPU flash
    kernel is invisible to FlopCounterMode; math counts full T x T attention, 12 d T per layer pass with
    gradient). The issue asks for 3%; the accounting is exact, so the check is exact."""
    kw = dict(kw)
    d, r, variant = kw.pop("d_model", 64), kw.pop("r"), kw.pop("variant", "baseline")
    cfg = cpu_model(d, r, variant, **{"vocab_size": 200, "seq_len": 32, **kw})
    model = LoopedTransformer(cfg)
    B = 2
    idx = torch.randint(0, cfg.vocab_size, (B, cfg.seq_len))
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(idx, idx).backward()
    measured = counter.get_total_flops() / (B * cfg.seq_len)
    assert abs(flops_per_token(cfg) / measured - 1) < 0.03
    assert flops_per_token(cfg) == pytest.approx(measured, rel=1e-9)


def test_truncated_backprop_costs_two_x_per_nograd_pass():
    """Each pass moved out of the gradient saves 4x its forward multiply-adds (6x -> 2x)."""
    full, trunc = cpu_model(128, 4), cpu_model(128, 4, bptt_k=1)
    assert flops_per_token(trunc) < flops_per_token(full)
    ratio = (flops_per_token(full) - flops_per_token(trunc)) / flops_per_token(full)
    assert 0.3 < ratio < 0.5  # 3 of 4 passes (two thirds of the 12 layer passes) lose two thirds of their cost


# ---------------------------------------------------------------------------------------------------- iso-depth


@pytest.mark.parametrize("grid", ["paper", "cpu"])
def test_iso_depth_invariants(grid):
    """Across r in {1,2,4,8} at fixed width: same L_eff and d, unique parameters N strictly fall, and the
    FLOPs/token differ from r = 1 only by the injection's own matmuls:
        linear: 6 (r + 1) d^2  (W_e e once, W_s s in each pass);  hyper: 6 r (K^2 + K) d  (read-out and lane mix).
    That keeps F within 2% of r = 1 for hyper everywhere and for linear up to r = 8 on the paper grid at
    its reference width s = 6 (1.7%); the linear r = 8 excess grows to 3.1% at s = 34 and 4.3% on the CPU
    grid at d = 128, which the exact identity above pins down instead of a tolerance."""
    make = (lambda r, v: paper_model(6, r, v)) if grid == "paper" else (lambda r, v: cpu_model(128, r, v))
    base = make(1, "baseline")
    d, K = base.d_model, 2
    previous_n = math.inf
    for r in (1, 2, 4, 8):
        linear, hyper = make(r, "baseline"), make(r, "hyper")
        for cfg in (linear, hyper):
            assert (cfg.l_eff, cfg.d_model) == (base.l_eff, base.d_model)
        n = param_counts(linear).N
        assert n < previous_n
        previous_n = n
        if r == 1:
            continue
        assert param_counts(hyper).N < param_counts(linear).N  # r (K^2 + 2K) scalars instead of 2 d^2
        assert flops_per_token(linear) - flops_per_token(base) == 6 * (r + 1) * d * d
        assert flops_per_token(hyper) - flops_per_token(base) == 6 * r * (K * K + K) * d
        assert abs(flops_per_token(hyper) / flops_per_token(base) - 1) < 0.02
        if grid == "paper":
            assert abs(flops_per_token(linear) / flops_per_token(base) - 1) < 0.02


# ---------------------------------------------------------------------------------------------------- plan, presets


def test_layer_plan():
    assert [layer_plan(20, r) for r in (1, 2, 4, 8)] == [(2, 16, 2), (2, 8, 2), (2, 4, 2), (2, 2, 2)]
    assert layer_plan(12, 4, n_prelude=1, n_coda=3) == (1, 2, 3)
    with pytest.raises(ValueError, match=r"not divisible by r=3; allowed r for this depth: 1, 2, 4, 8"):
        layer_plan(12, 3)
    with pytest.raises(ValueError, match="n_prelude=2 and n_coda=2"):
        layer_plan(4, 1)


@pytest.mark.parametrize("r", [1, 2, 4, 8])
def test_presets(r):
    for s in (6, 7, 34):
        cfg = paper_model(s, r)
        assert cfg.d_model % 128 == 0 and 64 * s <= cfg.d_model < 64 * s + 128
        assert (cfg.head_dim, cfg.l_eff, cfg.vocab_size, cfg.seq_len) == (128, 20, 32064, 2048)
        assert (cfg.n_prelude, cfg.n_coda, cfg.n_rec) == (2, 2, 16 // r)
        assert cfg.injection == ("passthrough" if r == 1 else "linear") and cfg.bptt_k is None
    tbptt, hyper = paper_model(6, r, "tbptt"), paper_model(6, r, "hyper")
    assert tbptt.bptt_k == (None if r == 1 else math.ceil(r / 2))
    assert (hyper.injection, hyper.hyper_lanes) == (("passthrough", 2) if r == 1 else ("hyper", 2))
    small = cpu_model(128, r, bptt_k=1)
    assert (small.l_eff, small.n_rec, small.vocab_size, small.bptt_k) == (12, 8 // r, 2048, 1)


def test_bad_configs_name_field_and_allowed_values():
    with pytest.raises(ValueError, match=r"r=3; allowed r for this depth: 1, 2, 4, 8"):
        cpu_model(128, 3)
    with pytest.raises(ValueError, match=r"allowed r for this depth: 1, 2, 4, 8, 16"):
        paper_model(6, 3)
    with pytest.raises(ValueError, match=r"bptt_k=3 must be between 1 and r=2"):
        cpu_model(128, 2, bptt_k=3)
    with pytest.raises(ValueError, match=r"injection='sum' is not allowed; choose one of 'linear', 'additive'"):
        cpu_model(128, 2, injection="sum")
    with pytest.raises(ValueError, match=r"injection='hyper' needs r > 1; allowed for r = 1: 'passthrough'"):
        cpu_model(128, 1, injection="hyper")
    with pytest.raises(ValueError, match=r"variant='deq' is not allowed; choose one of 'baseline', 'tbptt', 'hyper'"):
        paper_model(6, 2, "deq")
    passthrough_truncated = cpu_model(128, 2, injection="passthrough", bptt_k=1)
    with pytest.raises(ValueError, match=r"bptt_k=1 < r=2 needs injection 'linear', 'additive' or 'hyper'"):
        flops_per_token(passthrough_truncated)
    with pytest.raises(ValueError, match="needs injection 'linear'"):
        LoopedTransformer(passthrough_truncated)


def test_tokens_for_budget():
    F = flops_per_token(cpu_model(128, 2))
    D, steps = tokens_for_budget(1e15, F, 4096)
    assert D == steps * 4096
    assert abs(D * F - 1e15) <= 0.5 * 4096 * F  # nearest whole batch
    assert tokens_for_budget(1.0, F, 4096) == (4096, 1)  # at least one step
    with pytest.raises(ValueError, match="batch_tokens=0 must be > 0"):
        tokens_for_budget(1e15, F, 0)


def test_accounting_report_keys():
    report = accounting_report(paper_model(6, 2, "tbptt"))
    for key in ("N_once", "N_rec", "N", "embedding", "lm_head", "flops_per_token", "p", "k", "c", "r", "L_eff",
                "d_model", "n_head", "vocab"):
        assert key in report
    assert (report["p"], report["k"], report["c"], report["r"], report["L_eff"]) == (2, 8, 2, 2, 20)
    assert (report["bptt_k"], report["variant"]) == (1, "tbptt")
    assert report["N"] == report["N_once"] + report["N_rec"]
