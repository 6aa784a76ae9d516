"""optim.lr_loop (loopscale/train/optim/groups.py, lr_transfer.py, lightning_module.py): the matrices applied at every
pass get a MuonH group of their own at the other matrices' lr times lr_loop, only when lr_loop != 1; the names,
the identity and the refusals that come with it. Expected groups and lrs written out by hand."""

from __future__ import annotations

import math

import pytest

from loopscale.config.naming import lr_tag
from loopscale.errors import ConfigError
from loopscale.model import accounting
from loopscale.model.accounting import d_ref_tokens
from loopscale.model.transformer import LoopedTransformer
from loopscale.train.identity import identity_of
from loopscale.train.lightning_module import LoopedLM
from loopscale.train.optim.groups import recipe_param_groups
from loopscale.train.optim.lr_transfer import lrs_for
from loopscale.train.plan import plan_training
from support.train import TINY, small_loop_model, train_config

MUONH = dict(optimizer="muonh", lr=0.014, weight_decay=0.0, beta1=0.8, eps=1e-10, warmup_frac=0.0, grad_clip=0.0)


def test_the_loop_group_is_the_matrix_lr_times_lr_loop_under_the_published_transfer():
    from loopscale.config.schema import OptimConfig

    cfg = accounting.paper_model(12, 4)  # d = 768
    B, D = 524_288, 3_000 * 524_288
    d_ref = d_ref_tokens(cfg)
    plain = lrs_for(cfg, B, D, OptimConfig(**MUONH), d_ref)
    assert "loop" not in plain  # at 1 the per-pass matrices stay in `matrix`
    split = lrs_for(cfg, B, D, OptimConfig(**MUONH, lr_loop=0.3), d_ref)
    matrix = 0.014 * (B / 2**18) ** 0.558 * (D / d_ref) ** -0.32
    assert math.isclose(split["matrix"], matrix, rel_tol=1e-12)
    assert math.isclose(split["loop"], 0.3 * matrix, rel_tol=1e-12)
    assert {k: v for k, v in split.items() if k != "loop"} == plain
    base = lrs_for(cfg, B, D, OptimConfig(**{**MUONH, "transfer": "none"}, lr_loop=2.5), d_ref)
    assert base["loop"] == pytest.approx(0.035, rel=1e-12) and base["matrix"] == 0.014


def _names_by_group(model, loop_group: bool = False) -> dict[str, set[str]]:
    names = {id(p): n for n, p in model.named_parameters()}
    return {g: {names[id(p)] for p in ps} for g, ps in recipe_param_groups(model, loop_group=loop_group).items()}


@pytest.mark.parametrize("injection", ["concat", "linear"])
def test_the_loop_group_holds_exactly_the_recurrent_blocks_and_the_injections_matrices(injection):
    model = LoopedTransformer(small_loop_model(3, injection=injection))
    split, whole = _names_by_group(model, loop_group=True), _names_by_group(model)
    want_loop = {n for n, p in model.named_parameters() if p.dim() == 2 and n.startswith(("recurrent.", "injection."))}
    assert len(want_loop) == 2 * 6 + (1 if injection == "concat" else 2)  # q, k, v, out, MLP in and out a layer
    assert split["loop"] == want_loop
    assert split["matrix"] == whole["matrix"] - want_loop
    assert all(n.startswith(("prelude.", "coda.")) for n in split["matrix"])
    assert "loop" not in whole
    for group in ("head", "embedding", "norm"):  # the AdamW groups do not move
        assert split[group] == whole[group]


def test_hyper_connections_scalars_stay_adamws_when_the_loop_is_split():
    model = LoopedTransformer(small_loop_model(2, recipe="hyper"))
    split = _names_by_group(model, loop_group=True)
    assert split["hyper"] == {"injection.alpha", "injection.M", "injection.beta"}
    assert all(n.startswith("recurrent.") for n in split["loop"]) and len(split["loop"]) == 12


def test_a_run_with_lr_loop_steps_the_loop_by_muon_at_its_own_lr():
    cfg = train_config([*TINY, "model.r=2", "optim=muonh", "optim.transfer=none", "optim.lr_loop=0.25"])
    module = LoopedLM(cfg.model, cfg.optim, cfg.trainer, plan_training(cfg))
    optimizer = module.configure_optimizers()["optimizer"]
    groups = {g["name"]: g for g in optimizer.param_groups}
    assert groups["loop"]["lr"] == pytest.approx(0.25 * groups["matrix"]["lr"], rel=1e-12)
    assert groups["matrix"]["lr"] == pytest.approx(cfg.optim.lr, rel=1e-12)
    assert (groups["loop"]["adamw"], groups["matrix"]["adamw"], groups["norm"]["adamw"]) == (False, False, True)
    loop_ids = {id(p) for p in groups["loop"]["params"]}
    assert loop_ids == {
        id(p) for n, p in module.model.named_parameters() if p.dim() == 2 and n.startswith(("recurrent.", "injection."))
    }
    assert module.plan.lrs["loop"] == pytest.approx(0.25 * module.plan.lrs["matrix"], rel=1e-12)


def test_lr_loop_at_one_keeps_the_optimizer_and_the_identity_of_earlier_runs():
    cfg = train_config([*TINY, "model.r=2", "optim=muonh", "optim.transfer=none"])
    module = LoopedLM(cfg.model, cfg.optim, cfg.trainer, plan_training(cfg))
    names = [g["name"] for g in module.configure_optimizers()["optimizer"].param_groups]
    assert names == ["matrix", "head", "embedding", "norm"]
    assert "optim.lr_loop" not in identity_of(cfg)
    moved = train_config([*TINY, "model.r=2", "optim=muonh", "optim.transfer=none", "optim.lr_loop=0.5"])
    assert identity_of(moved)["optim.lr_loop"] == 0.5


def test_run_names_carry_the_loop_lr():
    assert lr_tag(1.0) == lr_tag(1.0, 1.0) == ""
    assert lr_tag(1.0, 0.5) == "-lrloop0.5"
    assert lr_tag(0.7071, 2.0) == "-lrx0.707-lrloop2"
    cfg = train_config([*TINY, "model.r=2", "optim=muonh", "optim.lr_loop=0.5"])
    assert cfg.run_name.endswith("-lrloop0.5")


@pytest.mark.parametrize(
    "overrides,message",
    [
        (["optim.lr_loop=0.5"], "lr_loop=0.5 needs optimizer=muonh"),  # TINY trains AdamW
        (["optim=muonh", "optim.lr_loop=0"], "lr_loop"),
        (["optim=muonh", "optim.lr_loop=-1"], "lr_loop"),
    ],
)
def test_bad_lr_loop_is_refused_with_the_field_named(overrides, message):
    with pytest.raises(ConfigError, match=message):
        train_config([*TINY, "model.r=2", *overrides])


def test_the_runs_table_and_the_sweeps_rows_carry_the_loop_lr(tmp_path):
    """A run with its loop at its own lr says so where lr_scale and lr_rule are said: its runs-table row (`loopscale
    collect`; rows differing only in optim.lr_loop are otherwise one point and seed) and `loopscale sweep --json`'s
    job row; empty (None) and 1 at the default."""
    from loopscale.launch.sweep import Job, describe
    from loopscale.train.plan import plan_run
    from loopscale.train.recording import first_record, record_plan

    rows = {}
    for loop in (1.0, 0.5):
        cfg = train_config([*TINY, "model.r=2", "optim=muonh", "optim.transfer=none", f"optim.lr_loop={loop}"])
        record = first_record(cfg, tmp_path / cfg.run_name)
        record_plan(record, cfg, plan_run(cfg))
        rows[loop] = (record.table_row(), describe(Job([], cfg)))
    assert rows[0.5][0]["lr_loop"] == 0.5 and rows[1.0][0]["lr_loop"] is None
    assert rows[0.5][1]["lr_loop"] == 0.5 and rows[1.0][1]["lr_loop"] == 1.0
    assert rows[0.5][0]["lr_rule"] is None and rows[0.5][1]["lr_rule"] == 1.0


@pytest.mark.parametrize("experiment", ["testtime_cpu", "isodepth_cpu_demo"])
def test_every_cpu_experiments_run_name_carries_the_lrs_it_can_move(experiment):
    """A run dir is named by its config: two runs that differ only in an lr must not share one (the second would be
    refused as another config's dir, or skipped as done). testtime_cpu's name had no lr tag. Under MuonH (lr_loop
    needs it; the demo trains AdamW, so it is asked for)."""
    muonh = [f"experiment={experiment}", "optim=muonh"]
    base = train_config([*muonh, "optim.lr_rule=1"]).run_name
    moved = train_config([*muonh, "optim.lr_rule=1.5", "optim.lr_scale=0.5", "optim.lr_loop=0.25"])
    assert moved.run_name == f"{base}-lrx0.5-lrloop0.25-lrt1.5"
