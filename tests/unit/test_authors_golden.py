"""The published recipe, number for number against the authors' released code (fixtures in tests/fixtures/authors/,
made by make_authors_fixtures.py from their commit; provenance in each file and in its README).

Golden models: the authors' initial weights load into loopscale's LoopedTransformer through an explicit name map;
loopscale must reproduce their logits over the true vocabulary, their loss, and every parameter after 3 steps of
MuonH + AdamW built by loopscale's own optimizer path (LoopedLM.configure_optimizers, one MuonH sphere per
q, k, v matrix). Published grids: every point's step count, F and peak lrs equal the authors'.
"""

from __future__ import annotations

import importlib.util
import json
import math
import re

import pytest
import torch

from loopscale.config.model import ModelConfig
from loopscale.config.schema import BudgetConfig, OptimConfig, TrainConfig, with_vocab
from loopscale.data.document_packing import PackStats, pack_rows_cropped
from loopscale.launch.sweep import expand
from loopscale.train.compiling import compile_model
from loopscale.train.lightning_module import LoopedLM
from loopscale.train.optim.groups import MATRIX
from loopscale.train.optim.muonh import MuonH
from loopscale.train.plan import plan_run, plan_training
from support.paths import FIXTURES

AUTHORS = FIXTURES / "authors"
CASES = ["plain_r1", "concat_r2", "tbptt_r4", "hyper_r2", "additive_r3", "hyper_r3"]
INJECTIONS = {
    "passthrough": "passthrough",
    "inject_init_prelude": "concat",
    "hyperconnect": "hyper",
    "additive": "additive",
}

# the authors' parameter names -> loopscale's, applied in order
NAME_MAP = [
    (r"^transformer\.wte\.", "embed."),
    (r"^transformer\.recur\.", "recurrent."),
    (r"^transformer\.(prelude|coda)\.", r"\1."),
    (r"\.n1\.", ".attn_norm."),
    (r"\.n3\.", ".mlp_norm."),
    (r"\.attn\.c_(q|k|v)\.", r".attn.\1."),
    (r"\.attn\.c_proj\.", ".attn.proj."),
    (r"\.mlp\.c_fc\.", ".mlp.fc."),
    (r"\.mlp\.c_proj\.", ".mlp.proj."),
    (r"^inject\.weight$", "injection.weight"),
    (r"^lane_alpha$", "injection.alpha"),
    (r"^lane_mixing$", "injection.M"),
    (r"^lane_beta$", "injection.beta"),
    (r"^norm_emb\.", "embed_norm."),
    (r"^norm_recur\.", "pass_norm."),
    (r"^norm_final\.", "final_norm."),
]


def loopscale_name(authors_name: str) -> str:
    name = authors_name
    for pattern, replacement in NAME_MAP:
        name = re.sub(pattern, replacement, name)
    return name


def load_case(name: str) -> dict:
    return torch.load(AUTHORS / f"golden_{name}.pt", weights_only=True)


def model_config(case: dict) -> ModelConfig:
    c = case["config"]
    return ModelConfig(
        vocab_size=c["vocab"],
        d_model=c["width"],
        head_dim=c["width"] // c["heads"],
        n_prelude=c["p"],
        n_rec=c["k"],
        n_coda=c["c"],
        r=c["r"],
        injection=INJECTIONS[c["injection"]],
        bptt_k=None if c["bptt_k"] == c["r"] else c["bptt_k"],
        seq_len=c["T"],
        logit_softcap=15.0,
        init="paper",
        precision="published",  # their RoPE tables are bf16 values even in fp32
    )


def loopscale_module(case: dict, ortho_dtype: str = "fp32") -> LoopedLM:
    """loopscale's LightningModule with the authors' initial weights, and its optimizer at the fixture's lrs."""
    lrs = case["lrs"]
    optim = OptimConfig(
        optimizer="muonh",
        lr=lrs["matrix"],
        lr_head=lrs["head"],
        lr_embedding=lrs["embedding"],
        lr_norm=lrs["norm"],
        lr_hyper=lrs["hyper"],
        transfer="none",
        weight_decay=0.0,
        beta1=0.8,
        beta2=0.95,
        eps=1e-10,
        warmup_frac=0.0,
        grad_clip=0.0,
        ortho_dtype=ortho_dtype,
    )
    # a 10-step plan of one sequence per step: the lr schedule's length; the lrs are the fixture's (transfer=none)
    model = model_config(case)
    budget = BudgetConfig(mode="tokens", tokens=10 * model.seq_len, batch_size=1)
    cfg = TrainConfig(model=model, optim=optim, budget=budget)
    plan = plan_training(cfg)
    assert plan.run.steps == 10
    module = LoopedLM(cfg.model, cfg.optim, cfg.trainer, plan)
    weights = {loopscale_name(k): v for k, v in case["initial"].items()}
    assert weights.keys() == module.model.state_dict().keys()
    module.model.load_state_dict(weights, strict=True)
    return module


@pytest.mark.parametrize("name", CASES)
def test_logits_loss_and_three_steps_equal_the_authors(name):
    check_against_the_authors(name, compiled=False)


@pytest.mark.slow
def test_the_compiled_model_equals_the_authors_too():
    """The same checks with the whole model compiled by Inductor (trainer.compile=model, what compile=auto
    picks on CPU): equal within the same fp32 tolerances. Minutes: a cold compile of three graphs."""
    check_against_the_authors("concat_r2", compiled=True)


def check_against_the_authors(name: str, compiled: bool) -> None:
    case = load_case(name)
    module = loopscale_module(case)
    model = module.model
    if compiled:
        compile_model(model, "model")
    with torch.no_grad():
        logits = model(case["idx"])
        loss = model(case["idx"], case["targets"])
    assert logits.shape == case["logits"].shape  # the true vocabulary (250), not the padded 256
    assert (logits - case["logits"]).abs().max() <= 1e-4
    assert abs(loss.item() - case["loss"].item()) <= 1e-5
    optimizer = module.configure_optimizers()["optimizer"]
    for x, y in case["batches"]:
        model(x, y).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    after = model.state_dict()
    for authors_name, want in case["after"].items():
        got, start = after[loopscale_name(authors_name)], case["initial"][authors_name]
        update = (want - start).norm()
        assert update > 0, authors_name
        assert (got - want).norm() <= 1e-3 * update, (authors_name, ((got - want).norm() / update).item())


def test_q_k_v_are_held_on_their_own_spheres():
    """MuonH keeps each of q, k and v at its own initial Frobenius norm (one fused matrix would hold only the
    sum of their squares)."""
    module = loopscale_module(load_case("concat_r2"))
    model = module.model
    attn = model.recurrent[0].attn
    norms = [w.norm().item() for w in (attn.q.weight, attn.k.weight, attn.v.weight)]
    optimizer = module.configure_optimizers()["optimizer"]
    for x, y in load_case("concat_r2")["batches"]:
        model(x, y).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    for w, norm in zip((attn.q.weight, attn.k.weight, attn.v.weight), norms):
        assert w.norm().item() == pytest.approx(norm, rel=1e-5)


def bf16_kernel_kind() -> str:
    """The kind of kernel this CPU's bf16 matmuls run on, by the rule the fixture was named with (one rule, in
    make_authors_fixtures.py, loaded from its file: the script is not a package)."""
    spec = importlib.util.spec_from_file_location("make_authors_fixtures", AUTHORS / "make_authors_fixtures.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script.bf16_kernel_kind()


def muonh_bf16_fixture() -> dict:
    """The authors' ten bf16 MuonH steps as made on this CPU's kind of kernel: bf16 matmuls round differently on
    AVX2, AVX-512 and AVX-512 with AMX (the matrices after ten steps differ by up to 1.6e-4), so the fixture is per
    kernel kind (make_authors_fixtures.py), golden_muonh_bf16.pt the first one (its machine's kind not recorded:
    used where no fixture of this machine's kind exists, for the tests that do not ask for bits)."""
    own = AUTHORS / f"golden_muonh_bf16.{bf16_kernel_kind()}.pt"
    return torch.load(own if own.is_file() else AUTHORS / "golden_muonh_bf16.pt", weights_only=True)


def test_published_muonh_is_bit_identical_to_the_authors_after_ten_bf16_steps():
    """model.precision=published with ortho_dtype=bf16: loopscale's MuonH (built by LoopedLM, every matrix of the
    concat_r2 model, stacked by shape) given the authors' 10 recorded gradients and lrs leaves every matrix
    bit for bit where their MuonH (its published bf16 arithmetic, run eagerly) left it, on this CPU's kernels.
    Bits can only be compared with a fixture made on this kind of kernel: on another kind the test is skipped, and
    the next one (within the kernels' rounding) still runs."""
    if not (AUTHORS / f"golden_muonh_bf16.{bf16_kernel_kind()}.pt").is_file():
        pytest.skip(f"no bf16 fixture made on a {bf16_kernel_kind()} kernel (make_authors_fixtures.py ... muonh_bf16)")
    fixture = muonh_bf16_fixture()
    after = published_muonh_after(fixture)
    for name, p in after.items():
        want = fixture["after"][name]
        assert not torch.equal(want, fixture["initial"][name])
        assert torch.equal(p, want), (name, (p - want).abs().max().item())


def published_muonh_after(fixture: dict) -> dict[str, torch.Tensor]:
    """The fixture's matrices after loopscale's MuonH (model.precision=published, ortho_dtype=bf16, built by
    LoopedLM: every matrix of the case's model, stacked by shape) took the authors' recorded gradients and lrs."""
    module = loopscale_module(load_case(fixture["case"]), ortho_dtype="bf16")
    optimizer = module.configure_optimizers()["optimizer"]
    (matrix_group,) = [g for g in optimizer.param_groups if g["name"] == MATRIX]
    assert matrix_group["arithmetic"] == "published" and matrix_group["momentum"] == fixture["momentum"]
    params = dict(module.model.named_parameters())
    matrices = {name: params[loopscale_name(name)] for name in fixture["initial"]}
    assert {id(p) for p in matrices.values()} == {id(p) for p in matrix_group["params"]}
    for name, p in matrices.items():
        assert torch.equal(p.detach(), fixture["initial"][name])
    for grads, lr in zip(fixture["grads"], fixture["lrs"]):
        for name, p in matrices.items():
            p.grad = grads[name].float()
        matrix_group["lr"] = lr
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return {name: p.detach() for name, p in matrices.items()}


@pytest.mark.parametrize("path", sorted(AUTHORS.glob("golden_muonh_bf16*.pt")), ids=lambda p: p.name)
def test_published_muonh_lands_within_the_kernels_rounding_of_every_recorded_machine(path):
    """Whatever the kernel kind: given a fixture made on any machine, the published arithmetic lands where the
    authors' did up to bf16 matmul rounding (measured between kinds: 1.6e-4 at most per element, 0.06% of the
    steps' move in norm), ten times closer than the default arithmetic lands (3.1% of the move, next test)."""
    fixture = torch.load(path, weights_only=True)
    after = published_muonh_after(fixture)
    initial = fixture["initial"]
    moved = sum((fixture["after"][n] - initial[n]).norm() ** 2 for n in initial) ** 0.5
    off = sum((after[n] - fixture["after"][n]).norm() ** 2 for n in initial) ** 0.5
    worst = max((after[n] - fixture["after"][n]).abs().max().item() for n in initial)
    assert worst < 5e-4 and off < 3e-3 * moved, (worst, (off / moved).item())


def test_default_muonh_arithmetic_differs_from_the_published_one_in_bf16():
    """The default arithmetic (fp32 normalisation, rescale and lr product) is not the published one in bf16:
    the same ten steps leave the matrices measurably elsewhere (a few % of the steps' total move)."""
    fixture = muonh_bf16_fixture()
    initial = fixture["initial"]
    mats = {name: torch.nn.Parameter(t.clone()) for name, t in initial.items()}
    optimizer = MuonH([{"params": list(mats.values()), "lr": 0.0}], ortho_dtype="bf16", arithmetic="fp32_norms")
    for grads, lr in zip(fixture["grads"], fixture["lrs"]):
        for name, p in mats.items():
            p.grad = grads[name].float()
        optimizer.param_groups[0]["lr"] = lr
        optimizer.step()
    moved = sum((fixture["after"][n] - initial[n]).norm() ** 2 for n in initial) ** 0.5
    off = sum((mats[n].detach() - fixture["after"][n]).norm() ** 2 for n in initial) ** 0.5
    assert 1e-3 * moved < off < 0.2 * moved, (off / moved).item()


def test_published_packing_equals_the_authors():
    """`--packing published`: the same full rows, in the same order, as the published packer on 400 documents."""
    case = json.loads((AUTHORS / "packing.json").read_text())
    stats = PackStats()
    docs = [d[1:] for d in case["documents"]]  # the fixture's documents start with their BOS
    rows = [row.tolist() for row in pack_rows_cropped(docs, case["row_len"], case["bos"], case["buffer_docs"], stats)]
    assert rows == case["rows"]
    assert stats.n_rows == len(rows) and stats.n_pad == 0 and stats.n_tokens == len(rows) * case["row_len"]
    assert stats.n_input == sum(len(d) for d in case["documents"]) and 0.5 < stats.kept_share < 1


# ---------------------------------------------------------------------------------------------------- the grids

EXPERIMENTS = {"baseline": "isodepth", "tbptt": "isodepth_tbptt", "hyper": "isodepth_hyper"}


def test_every_published_grid_point_equals_the_authors():
    """All 116 + 102 + 90 points: the same (recipe, r, budget, size) set, the step count equal, F within 0.1%
    (equal here), and every group's peak lr equal within 1e-6 relative."""
    want = {
        (p["recipe"], p["r"], p["C"], p["d_model"]): p
        for p in json.loads((AUTHORS / "published_grid.json").read_text())["points"]
    }
    got = {}
    for recipe, experiment in EXPERIMENTS.items():
        for job in expand([f"experiment={experiment}"]):
            cfg = with_vocab(job.cfg, job.cfg.data.vocab_size)  # what training sets once the data is open
            got[(recipe, cfg.model.r, cfg.budget.compute_flops, cfg.model.d_model)] = cfg
    assert len(want) == 308 and got.keys() == want.keys()
    for key, cfg in got.items():
        point = want[key]
        plan = plan_run(cfg)
        assert plan.steps == point["steps"], key
        assert math.isclose(plan.F, point["F"], rel_tol=1e-3) and plan.F == point["F"], key
        assert plan.D_target == point["target_tokens"], key
        lrs = plan_training(cfg, plan).lrs  # the lrs the run's plan hands to training
        assert lrs.keys() == point["lrs"].keys(), key
        for group, lr in point["lrs"].items():
            assert math.isclose(lrs[group], lr, rel_tol=1e-6), (key, group, lrs[group], lr)
