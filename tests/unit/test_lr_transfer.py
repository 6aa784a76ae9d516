"""The published recipe's parameter groups and learning rates (loopscale/train/optim/lr_transfer.py), and optim=muonh's
configuration: lrs equal the published formulas worked out by hand, every parameter lands in one group by its
module's role (for both injection forms), and bad combinations fail with the field named."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from loopscale.config.schema import OptimConfig, TrainerConfig
from loopscale.model import accounting
from loopscale.model.accounting import d_ref_tokens
from loopscale.model.transformer import LoopedTransformer
from loopscale.train.lightning_module import optimizer_record
from loopscale.train.optim.groups import recipe_param_groups
from loopscale.train.optim.lr_transfer import lrs_for
from support.train import small_loop_model, train_config

MUONH = OptimConfig(optimizer="muonh", lr=0.014, weight_decay=0.0, beta1=0.8, eps=1e-10, warmup_frac=0.0, grad_clip=0.0)

# Reference model, size 10: d = 640, one layer 12 d^2 + 2 d = 4,915,200 + 1,280 = 4,916,480 parameters.
# r = 1, 0-20-0: 20 layers + 3 norm gains (3 x 640)                       = 98,331,520   -> D_ref x 10
# r = 4, 2-4-2: 4 layers + 3 x 640 + 4 x (4 layers + injection 2 x 640^2) = 19,667,840 + 4 x 20,485,120
#                                                                          = 101,608,320  -> D_ref x 10
D_REF = {1: 983_315_200, 4: 1_016_083_200}

# (size s, d_model, global batch B in tokens, training tokens D)
GRID_POINTS = [
    (6, 384, 262_144, 2_000 * 262_144),
    (12, 768, 524_288, 3_000 * 524_288),
    (24, 1536, 131_072, 40_000 * 131_072),
]


@pytest.mark.parametrize("r", [1, 4])
@pytest.mark.parametrize("size,d,B,D", GRID_POINTS)
def test_lrs_equal_the_published_formulas(size, d, B, D, r):
    cfg = accounting.paper_model(size, r)
    assert cfg.d_model == d
    assert d_ref_tokens(cfg) == D_REF[r]
    batch = (B / 2**18) ** 0.558
    width = (d / 640) ** -0.5
    expected = {
        "matrix": 0.014 * batch * (D / D_REF[r]) ** -0.32,
        "head": 0.004 * width * batch,
        "embedding": 0.3 * width * batch,
        "norm": 0.005 * width,  # published: no batch factor on the norm (and hyper) lrs
    }
    got = lrs_for(cfg, B, D, MUONH, d_ref_tokens(cfg))
    assert got.keys() == expected.keys()
    for group, lr in expected.items():
        assert math.isclose(got[group], lr, rel_tol=1e-12), (group, got[group], lr)


def test_hyper_scalars_get_their_own_lr_and_transfer_none_keeps_the_base_lrs():
    cfg = accounting.paper_model(10, 4, "hyper")
    # the reference is the published one for every looped recipe: 2-4-2 with the concat matrix, not hyper lanes
    d_ref = D_REF[4]
    assert d_ref_tokens(cfg) == d_ref == d_ref_tokens(accounting.paper_model(10, 4))
    got = lrs_for(cfg, 2**18, 10 * d_ref, MUONH, d_ref)
    assert math.isclose(got["hyper"], 0.01, rel_tol=1e-12)  # d = 640 and B = 2^18: no factor
    assert math.isclose(got["matrix"], 0.014 * 10**-0.32, rel_tol=1e-12)
    plain = OptimConfig(optimizer="muonh", lr=0.02, weight_decay=0.0, transfer="none")
    assert lrs_for(cfg, 512, 10_000, plain, d_ref) == {
        "matrix": 0.02,
        "head": 0.004,
        "embedding": 0.3,
        "norm": 0.005,
        "hyper": 0.01,
    }
    with pytest.raises(ValueError, match="D_tokens"):
        lrs_for(cfg, 512, 0, MUONH, d_ref)


@pytest.mark.parametrize(
    "r,kw",
    [
        (1, {}),
        (2, {}),
        (2, {"recipe": "hyper"}),
        (2, {"tie_embeddings": True}),
        (2, {"injection": "linear"}),
    ],
)
def test_every_parameter_lands_in_one_group_by_its_role(r, kw):
    model = LoopedTransformer(small_loop_model(r, **kw))
    groups = recipe_param_groups(model)
    ids = [id(p) for params in groups.values() for p in params]
    assert sorted(ids) == sorted(id(p) for p in model.parameters()) and len(set(ids)) == len(ids)
    names = {id(p): n for n, p in model.named_parameters()}
    by_group = {g: {names[id(p)] for p in params} for g, params in groups.items()}
    assert all(p.dim() == 2 for p in groups["matrix"])
    assert all(n.startswith(("prelude.", "recurrent.", "coda.", "injection.")) for n in by_group["matrix"])
    assert all(p.dim() == 1 for p in groups["norm"])
    assert by_group["embedding"] == {"embed.weight"}
    assert by_group.get("head", set()) == (set() if kw.get("tie_embeddings") else {"lm_head.weight"})
    if kw.get("recipe") == "hyper":  # alpha [r, K] and M [r, K, K]: scalars of the mixing, not matrices
        assert by_group["hyper"] == {"injection.alpha", "injection.M", "injection.beta"}
    elif kw.get("injection") == "linear":  # two d x d matrices
        assert {"injection.from_e.weight", "injection.from_s.weight"} <= by_group["matrix"]
    elif r > 1:  # the presets' concat: one Linear(2d -> d) on [e; s]
        assert "injection.weight" in by_group["matrix"]
    # the matrices are exactly the 2-D weights that accounting counts in N (minus norm gains)
    n_matrix = sum(p.numel() for p in groups["matrix"])
    cfg = model.cfg
    expected = (cfg.n_prelude + cfg.n_rec + cfg.n_coda) * accounting.block_matrix_params(cfg)
    if cfg.injection in ("linear", "concat"):
        expected += accounting.injection_params(cfg)
    assert n_matrix == expected


class _FusedInjectionModel(nn.Module):
    """A stand-in with the injection as ONE bias-free Linear(2d -> d) on concat(e, s), the published form."""

    def __init__(self, d: int = 8, vocab: int = 16):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.recurrent = nn.ModuleList([nn.Linear(d, d, bias=False)])
        self.injection = nn.Linear(2 * d, d, bias=False)
        self.final_norm = nn.LayerNorm(d, bias=False)
        self.lm_head = nn.Linear(d, vocab, bias=False)


def test_the_fused_injection_is_one_muonh_matrix():
    model = _FusedInjectionModel()
    groups = recipe_param_groups(model)
    assert any(p is model.injection.weight for p in groups["matrix"])
    assert [p.shape for p in groups["matrix"]] == [torch.Size([8, 8]), torch.Size([8, 16])]
    assert groups["norm"] == [model.final_norm.weight]


def test_a_parameter_with_no_role_fails_with_its_name():
    model = _FusedInjectionModel()
    model.extra = nn.Parameter(torch.ones(2, 2))
    with pytest.raises(ValueError, match="'extra'"):
        recipe_param_groups(model)


def test_optim_muonh_composes_to_the_published_recipe():
    opt = train_config(["optim=muonh"]).optim
    assert (opt.optimizer, opt.lr, opt.lr_head, opt.lr_embedding, opt.lr_norm, opt.lr_hyper) == (
        "muonh",
        0.014,
        0.004,
        0.3,
        0.005,
        0.01,
    )
    assert (opt.beta1, opt.beta2, opt.eps, opt.weight_decay, opt.grad_clip) == (0.8, 0.95, 1e-10, 0.0, 0.0)
    assert (opt.schedule, opt.warmup_frac, opt.final_lr_frac, opt.momentum) == ("linear", 0.0, 0.1, 0.95)
    assert (opt.transfer, opt.ortho_dtype) == ("published", "auto")


@pytest.mark.parametrize(
    "override,field",
    [
        ("optim.weight_decay=0.1", "weight_decay"),
        ("optim.transfer=mup", "transfer"),
        ("optim.ortho_dtype=fp16", "ortho_dtype"),
        ("optim.optimizer=sgd", "optimizer"),
        ("optim.width_scaling=true", "width_scaling"),
    ],
)
def test_bad_muonh_settings_fail_with_the_field_named(override, field):
    with pytest.raises(ValueError, match=field):
        train_config(["optim=muonh", override])


def test_fsdp_and_forks_with_published_transfer_are_clear_errors():
    lrs = lrs_for(small_loop_model(2), 1024, 10 * 1024, MUONH, d_ref_tokens(small_loop_model(2)))
    with pytest.raises(ValueError, match="fsdp"):
        optimizer_record(MUONH, TrainerConfig(strategy="fsdp"), lrs)
    rec = optimizer_record(MUONH, TrainerConfig(), lrs)
    assert rec["optimizer"] == "muonh" and rec["ortho_dtype"] == "fp32" and rec["lrs"] == lrs
    from loopscale.train.plan import plan_forks

    cfg = train_config(["optim=muonh", "optim.schedule=wsd", "budget=forks", "run_name=forks"])
    with pytest.raises(ValueError, match="transfer"):
        plan_forks(cfg)
