"""loopscale.model.accounting: exact counts against the built modules, FLOPs against FlopCounterMode, the
published reference numbers, iso-depth invariants, presets and config validation."""

import math
from dataclasses import replace

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from loopscale.config.dirs import train_config
from loopscale.config.model import layer_plan
from loopscale.config.schema import with_vocab
from loopscale.injections.registry import forms as injection_forms
from loopscale.model.accounting import (
    accounting_report,
    cpu_model,
    flops_per_token,
    matmul_flops_per_token,
    paper_model,
    param_counts,
    tokens_for_budget,
)
from loopscale.model.transformer import LoopedTransformer
from support.train import tiny_model


def numel(*modules) -> int:
    return sum(p.numel() for m in modules if m is not None for p in m.parameters())


# ---------------------------------------------------------------------------------------------------- counts


def test_published_grid_reference_numbers():
    """s = 6 (d = 384) gives N = 35,405,952 at r = 1 (20 layers + 3 norms: N_once = 1,152); N_once = 7,377,024,
    N_rec = 14,161,920 at r = 2."""
    one, two = paper_model(6, 1), paper_model(6, 2)
    assert one.d_model == two.d_model == 384 and one.n_head == 3
    assert param_counts(one).N == 35_405_952 and param_counts(one).N_once == 1_152
    assert param_counts(two).N_once == 7_377_024
    assert param_counts(two).N_rec == 14_161_920
    assert param_counts(two).N == 7_377_024 + 14_161_920


# ------------------------------------------------------------------------------------------- the authors' counts

PAPER_SIZES = range(6, 41)  # every size the published grids use (6-34 baseline, up to 40 in the tbptt probe)
PAPER_RECIPES = ("baseline", "tbptt", "hyper")


def authors_counts(size: int, r: int, recipe: str) -> dict:
    """The published code's parameter groups, written out from its layout: d = 128 ceil(64 s / 128); a layer
    is q, k, v, out (4 d^2) + ReLU^2 MLP 4d (8 d^2) + two RMSNorm gains; r = 1 is 20 layers, r > 1 is 2 + 16/r
    + 2 layers; injection [d, 2d] (baseline, tbptt) or per pass alpha [2], M [2, 2], beta [2] (hyper, K = 2);
    three norms outside the layers; untied embedding and head of the padded vocabulary 32064."""
    d = 128 * math.ceil(64 * size / 128)
    layer = 12 * d * d + 2 * d
    if r == 1:
        prelude_coda, recur, inject = 0, 20 * layer, 0
    else:
        prelude_coda, recur = 4 * layer, 16 // r * layer
        inject = r * (2 * 2 + 2 * 2) if recipe == "hyper" else 2 * d * d
    return dict(
        d=d,
        layer=layer,
        prelude_coda=prelude_coda,
        recur=recur,
        inject=inject,
        norms=3 * d,
        N_once=prelude_coda + inject + 3 * d,
        N_rec=recur,
        N=prelude_coda + recur + inject + 3 * d,
        embedding=32064 * d,
        lm_head=32064 * d,
    )


def authors_flops_per_token(size: int, r: int, recipe: str) -> float:
    """docs/design.md, "The published recipe" (Batch): 6 x (prelude + coda + head) + 6 x r x (block + injection)
    + attention 12 x layers x d x T, where a layer's parameters include its two norm gains; a pass without
    gradient (the first r - ceil(r/2) under tbptt) counts 2x its parameters and 4 d T of attention per layer.
    Hyper-connections count (K^2 + 2K) d per pass."""
    c = authors_counts(size, r, recipe)
    d, T = c["d"], 2048
    k = math.ceil(r / 2) if recipe == "tbptt" and r > 1 else r
    per_pass = c["recur"] + ((2 * 2 + 2 * 2) * d if recipe == "hyper" and r > 1 else c["inject"])
    layers_once, layers_per_pass = (0, 20) if r == 1 else (4, 16 // r)
    weights = 6 * (c["prelude_coda"] + c["lm_head"]) + (6 * k + 2 * (r - k)) * per_pass
    attention = (12 * layers_once + (12 * k + 4 * (r - k)) * layers_per_pass) * d * T
    return weights + attention


@pytest.mark.parametrize("recipe", PAPER_RECIPES)
@pytest.mark.parametrize("r", [1, 2, 4, 8])
def test_paper_preset_equals_the_authors_counts(r, recipe):
    """`--preset paper` for every size 6-40: N_once, N_rec, N, embedding and head exactly the authors' counts,
    and F exactly their formula (so a budget gives every run their step count)."""
    for size in PAPER_SIZES:
        cfg, want = paper_model(size, r, recipe), authors_counts(size, r, recipe)
        got = param_counts(cfg)
        assert cfg.d_model == want["d"]
        assert (got.N_once, got.N_rec, got.N, got.embedding, got.lm_head) == tuple(
            want[key] for key in ("N_once", "N_rec", "N", "embedding", "lm_head")
        ), (size, r, recipe)
        assert flops_per_token(cfg) == authors_flops_per_token(size, r, recipe), (size, r, recipe)
        # what the matmuls execute is a little less: the norm gains and the hyper write-in are elementwise
        assert 0 < 1 - matmul_flops_per_token(cfg) / flops_per_token(cfg) < 1e-3


@pytest.mark.parametrize("recipe", PAPER_RECIPES)
@pytest.mark.parametrize("size,r", [(6, 1), (6, 2), (20, 4), (40, 8), (34, 1)])
def test_paper_counts_equal_the_real_modules(size, r, recipe):
    """The accounting against sum(p.numel()) of the built published model (on the meta device: shapes only)."""
    cfg = paper_model(size, r, recipe)
    with torch.device("meta"):
        model = LoopedTransformer(cfg)
    counts = param_counts(cfg)
    assert counts.N_rec == numel(model.recurrent) == authors_counts(size, r, recipe)["N_rec"]
    assert counts.N_once + counts.N_pass == numel(  # the injection's per-pass rows (loop_index) are N_pass
        model.prelude, model.coda, model.injection, model.embed_norm, model.pass_norm, model.final_norm
    )
    assert counts.embedding == numel(model.embed) and counts.lm_head == numel(model.lm_head)
    assert counts.total == sum(p.numel() for p in model.parameters())


def count_grid():
    """Every r in {1,2,4,8} x registered injection form (lanes static and dynamic where it has them, r > 1 where
    it needs a loop) x tied/untied x relu2/swiglu."""
    for r in (1, 2, 4, 8):
        modes = [
            (name, dynamic)
            for name, form in injection_forms().items()
            if r > 1 or not form.needs_loop
            for dynamic in ((False, True) if "hyper_dynamic" in form.options else (False,))
        ]
        for injection, dynamic in modes:
            for tie in (False, True):
                for mlp in ("relu2", "swiglu"):
                    yield dict(r=r, injection=injection, hyper_dynamic=dynamic, tie_embeddings=tie, mlp=mlp)


@pytest.mark.parametrize("kw", list(count_grid()), ids=lambda kw: "-".join(str(v) for v in kw.values()))
def test_param_counts_equal_module_numel(kw):
    r = kw.pop("r")
    lanes = {"hyper_lanes": 3, "hyper_dynamic": True} if kw.pop("hyper_dynamic") else {}
    cfg = tiny_model(r, options=lanes, **kw)
    model = LoopedTransformer(cfg)
    counts = param_counts(cfg)
    assert counts.N_rec == numel(model.recurrent)
    assert counts.N_once + counts.N_pass == numel(  # the injection's per-pass rows (loop_index) are N_pass
        model.prelude, model.coda, model.injection, model.embed_norm, model.pass_norm, model.final_norm
    )
    assert counts.embedding == numel(model.embed)
    assert counts.lm_head == (0 if cfg.tie_embeddings else numel(model.lm_head))
    # nothing is left out: every stored parameter (a tied head once) is in one of the counts
    assert counts.total == sum(p.numel() for p in model.parameters())


# ---------------------------------------------------------------------------------------------------- FLOPs


FLOP_CASES = [
    dict(r=1),
    dict(r=2),
    dict(r=2, d_model=128, seq_len=64),
    dict(r=4, recipe="tbptt"),  # bptt_k = 2
    dict(r=4, injection="concat"),
    dict(r=8, injection="concat", bptt_k=3),  # the first pass with gradient gets a detached s
    dict(r=8, bptt_k=1, injection="additive"),
    dict(r=4, recipe="hyper"),
    dict(r=4, injection="hyper", options={"hyper_dynamic": True}),
    dict(r=8, mlp="swiglu", tie_embeddings=True, logit_softcap=30.0),
]


@pytest.mark.parametrize("kw", FLOP_CASES, ids=lambda kw: "-".join(f"{k}={v}" for k, v in kw.items()))
def test_flops_per_token_matches_flop_counter(kw):
    """Accounting vs FlopCounterMode on a real forward + backward under SDPA's math backend (the CPU flash
    kernel is invisible to FlopCounterMode; math counts full T x T attention, 12 d T per layer pass with
    gradient). The issue asks for 3%; the accounting is exact, so the check is exact."""
    kw = dict(kw)
    cfg = tiny_model(kw.pop("r"), **kw)
    model = LoopedTransformer(cfg)
    B = 2
    idx = torch.randint(0, cfg.vocab_size, (B, cfg.seq_len))
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(idx, idx).backward()
    measured = counter.get_total_flops() / (B * cfg.seq_len)
    assert matmul_flops_per_token(cfg) == pytest.approx(measured, rel=1e-9)
    # F adds the elementwise parameter uses: two norm gains per layer pass (+ the hyper beta write-in)
    gains = 6 * 2 * cfg.d_model * (cfg.n_prelude + cfg.n_coda + cfg.n_rec * cfg.r)
    if cfg.bptt_k is not None:
        gains -= 4 * 2 * cfg.d_model * cfg.n_rec * (cfg.r - cfg.bptt_k)
    write_in = 6 * cfg.r * cfg.options.get("hyper_lanes", 2) * cfg.d_model if cfg.injection == "hyper" else 0
    assert flops_per_token(cfg) == matmul_flops_per_token(cfg) + gains + write_in


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
        concat (both presets): 12 r d^2  (W [e; s], 2 d^2 per pass, 6x);  linear (model.looped_injection=linear):
        6 (r + 1) d^2 (W_e e once, W_s s in each pass);  hyper: 6 r (K^2 + 2 K) d  (read-out, lane mix and write-in).
    That keeps F within 2% of r = 1 for hyper everywhere; the injection's excess at r = 8 is 3.0% at the
    paper's s = 6 and 8.7% on the CPU grid at d = 128 (4.9% with linear), which the exact identities above pin down."""
    make = (lambda r, v: paper_model(6, r, v)) if grid == "paper" else (lambda r, v: cpu_model(128, r, v))
    base = make(1, "baseline")
    d, K = base.d_model, 2
    previous_n = math.inf
    for r in (1, 2, 4, 8):
        looped, hyper = make(r, "baseline"), make(r, "hyper")
        for cfg in (looped, hyper):
            assert (cfg.l_eff, cfg.d_model) == (base.l_eff, base.d_model)
        n = param_counts(looped).N
        assert n < previous_n
        previous_n = n
        if r == 1:
            continue
        assert looped.injection == "concat"
        assert param_counts(hyper).N < param_counts(looped).N  # r (K^2 + 2K) scalars instead of 2 d^2
        assert flops_per_token(looped) - flops_per_token(base) == 12 * r * d * d
        linear = replace(looped, injection="linear")
        assert flops_per_token(linear) - flops_per_token(base) == 6 * (r + 1) * d * d
        assert flops_per_token(hyper) - flops_per_token(base) == 6 * r * (K * K + 2 * K) * d
        assert abs(flops_per_token(hyper) / flops_per_token(base) - 1) < 0.02


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
        assert (cfg.head_dim, cfg.l_eff, cfg.vocab_size, cfg.padded_vocab_size, cfg.seq_len) == (
            128,
            20,
            32001,
            32064,
            2048,
        )
        # r = 1: the plain 0-20-0 stack; r > 1: 2 + 16/r x r + 2 with the concat injection
        assert (cfg.n_prelude, cfg.n_rec, cfg.n_coda) == ((0, 20, 0) if r == 1 else (2, 16 // r, 2))
        assert cfg.injection == ("passthrough" if r == 1 else "concat") and cfg.bptt_k is None
        assert (cfg.init, cfg.logit_softcap, cfg.tie_embeddings, cfg.mlp) == ("paper", 15.0, False, "relu2")
    tbptt, hyper = paper_model(6, r, "tbptt"), paper_model(6, r, "hyper")
    assert tbptt.bptt_k == (None if r == 1 else math.ceil(r / 2))
    assert hyper.injection == ("passthrough" if r == 1 else "hyper") and hyper.options == {}  # K = 2, the default
    small = cpu_model(128, r, bptt_k=1)
    assert (small.l_eff, small.n_rec, small.vocab_size, small.bptt_k) == (12, 8 // r, 2048, 1)


@pytest.mark.parametrize(
    ("overrides", "preset"),
    [
        ([], lambda: cpu_model()),  # train.yaml's defaults: model=cpu, data=shakespeare
        (["model.r=4", "model.d_model=64"], lambda: cpu_model(64, 4)),
        (["experiment=isodepth", "model.r=2", "model.d_model=384"], lambda: paper_model(6, 2)),
        (["experiment=isodepth_tbptt", "model.r=8", "model.d_model=768"], lambda: paper_model(12, 8, "tbptt")),
    ],
)
def test_presets_are_the_models_training_composes(overrides, preset):
    """`loopscale params --preset ...` and the run: one model, to the last field (vocab from the data config,
    as training sets it from the tokenizer), so the reported F is the F the run is charged."""
    cfg = train_config(overrides)
    trained = with_vocab(cfg, cfg.data.vocab_size).model
    assert trained == preset()
    assert flops_per_token(trained) == flops_per_token(preset())


def test_bad_configs_name_field_and_allowed_values():
    with pytest.raises(ValueError, match=r"r=3; allowed r for this depth: 1, 2, 4, 8"):
        cpu_model(128, 3)
    with pytest.raises(ValueError, match=r"allowed r for this depth: 1, 2, 4, 8, 16"):
        paper_model(6, 3)
    with pytest.raises(ValueError, match=r"bptt_k=3 must be between 1 and r=2"):
        cpu_model(128, 2, bptt_k=3)
    with pytest.raises(
        ValueError,
        match=r"injection='sum' is not allowed; choose one of 'additive', 'concat', 'huginn', 'hyper', 'linear', "
        r"'loop_index', 'parcae', 'passthrough'",
    ):
        cpu_model(128, 2, injection="sum")
    with pytest.raises(
        ValueError,
        match=r"injection='hyper' needs r > 1; allowed for r = 1: 'additive', 'concat', 'huginn', 'linear', "
        r"'loop_index', 'parcae', 'passthrough'$",
    ):
        cpu_model(128, 1, injection="hyper")
    with pytest.raises(ValueError, match=r"recipe='a/b' is not a safe name"):
        paper_model(6, 2, "a/b")
    # a published recipe's name must describe the model; a name of one's own labels any design
    with pytest.raises(ValueError, match=r"model.recipe='baseline', but the model's fields .* describe the 'tbptt'"):
        cpu_model(128, 4, "baseline", bptt_k=2)
    with pytest.raises(ValueError, match=r"describe a design of its own: set model.recipe=<a name for your design>"):
        cpu_model(128, 4, "baseline", injection="additive")
    assert cpu_model(128, 4, "additive_s_plus_e", injection="additive").recipe == "additive_s_plus_e"
    # recipe=auto (the default) labels a model by its fields: never a published name it is not
    assert [cpu_model(128, 4, **kw).recipe for kw in ({}, {"bptt_k": 2}, {"injection": "additive"})] == [
        "baseline",
        "tbptt",
        "additive",
    ]
    assert cpu_model(128, 4, injection="hyper", options={"hyper_dynamic": True}).recipe == "hyper-dynamic"
    passthrough_truncated = cpu_model(128, 2, injection="passthrough", bptt_k=1)
    with pytest.raises(
        ValueError,
        match=r"bptt_k=1 < r=2 needs injection 'additive', 'concat', 'huginn', 'linear', 'loop_index' or 'parcae'; "
        "with 'passthrough'",
    ):
        flops_per_token(passthrough_truncated)
    with pytest.raises(ValueError, match="needs injection 'additive'"):
        LoopedTransformer(passthrough_truncated)
    # the published code's refusals: hyper-connections with truncated backprop, or with a single lane
    with pytest.raises(ValueError, match=r"injection='hyper' needs full backprop \(bptt_k=2 < r=4\)"):
        cpu_model(128, 4, "hyper", bptt_k=2)
    with pytest.raises(ValueError, match=r"hyper_lanes=1: hyper-connections need at least 2 lanes"):
        cpu_model(128, 4, "hyper", options={"hyper_lanes": 1})


def test_tokens_for_budget():
    F = flops_per_token(cpu_model(128, 2))
    D, steps = tokens_for_budget(1e15, F, 4096)
    assert D == steps * 4096
    assert abs(D * F - 1e15) <= 0.5 * 4096 * F  # nearest whole batch
    assert tokens_for_budget(1.0, F, 4096) == (4096, 1)  # at least one step
    with pytest.raises(ValueError, match="batch_tokens=0 must be > 0"):
        tokens_for_budget(1e15, F, 0)


@pytest.mark.parametrize("whole, frac", [(7, 0.3), (7, 0.7), (40, 0.51), (40, 0.49), (1, 0.6)])
def test_tokens_for_budget_takes_the_nearest_whole_step_count(whole, frac):
    """D = C / F rounded to whole batches: the step count nearest to C / (F B), rounded up from a fraction above 1/2
    (a floor would train up to a whole batch short of the budget)."""
    F, B = flops_per_token(cpu_model(128, 2)), 4096
    C = (whole + frac) * F * B
    expected = whole + 1 if frac > 0.5 else whole
    assert tokens_for_budget(C, F, B) == (expected * B, expected)


def test_accounting_report_keys():
    report = accounting_report(paper_model(6, 2, "tbptt"))
    for key in (
        "N_once",
        "N_rec",
        "N",
        "embedding",
        "lm_head",
        "flops_per_token",
        "p",
        "k",
        "c",
        "r",
        "L_eff",
        "d_model",
        "n_head",
        "vocab",
    ):
        assert key in report
    assert (report["p"], report["k"], report["c"], report["r"], report["L_eff"]) == (2, 8, 2, 2, 20)
    assert (report["bptt_k"], report["recipe"]) == (1, "tbptt")
    assert report["N"] == report["N_once"] + report["N_rec"]
