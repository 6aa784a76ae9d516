"""A run's derived numbers are worked out once, by its plan (loopscale/train/plan.py): the plan holds the same
numbers the accounting, batching, memory and lr-transfer rules give, and the LightningModule takes its lrs, steps
and FLOPs from the plan without entering model/accounting.py again."""

from __future__ import annotations

import dataclasses
import sys

import pytest

import loopscale.model.accounting as accounting
from loopscale.config.schema import with_vocab
from loopscale.model.memory import estimate_memory, usable_memory
from loopscale.train.batching import device_batching
from loopscale.train.lightning_module import LoopedLM
from loopscale.train.optim.lr_transfer import adamw_lrs, lrs_for
from loopscale.train.plan import plan_run, plan_training
from support.train import TINY, train_config

# a published GPU point with the published transfer (MuonH): the lrs depend on B, d and D_target; its device
# batch is the published 32 on an H100 and a halving of it on a 40 GB A100 (tests/unit/test_memory.py)
PAPER_GPU = ["experiment=isodepth_hyper", "point=C2.15e18-s16", "model.r=8"]


@pytest.mark.parametrize("card", ["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB"])
def test_a_gpu_plan_holds_the_split_the_memory_and_the_lrs_of_its_rules(card):
    cfg = with_vocab(train_config([*PAPER_GPU, f"trainer.plan_device={card}"]), 32001)
    plan = plan_training(cfg)
    assert (plan.batching.device_batch == 32) == (card == "NVIDIA H100 80GB HBM3")
    assert plan.run == plan_run(cfg)
    assert plan.run.F_causal == accounting.causal_flops_per_token(cfg.model) < plan.run.F
    assert plan.batching == device_batching(cfg.budget, cfg.model, cfg.trainer, cfg.optim.optimizer)
    b = plan.batching
    want = estimate_memory(cfg.model, b.device_batch, cfg.trainer.compile, cfg.optim.optimizer, True, b.world)
    assert plan.memory == want and plan.usable_memory == usable_memory(cfg.trainer.plan_device)
    assert plan.memory_record(cfg.trainer.plan_device) == {
        **want.as_dict(),
        "plan_device": cfg.trainer.plan_device,
        "usable": usable_memory(cfg.trainer.plan_device),
    }
    assert cfg.optim.optimizer == "muonh" and cfg.optim.transfer == "published"
    D_ref = accounting.d_ref_tokens(cfg.model, cfg.optim.transfer_ref_size)
    assert plan.lrs == lrs_for(cfg.model, plan.run.batch_tokens, plan.run.D_target, cfg.optim, D_ref)


def test_a_cpu_plan_has_no_memory_prediction_and_adamw_lrs():
    cfg = train_config(TINY)
    plan = plan_training(cfg)
    assert plan.memory is None and plan.usable_memory is None and plan.memory_record("any") is None
    assert cfg.optim.optimizer == "adamw" and plan.lrs == adamw_lrs(cfg.model, cfg.optim)


def _entries_into_accounting(work) -> list[str]:
    """The calls into model/accounting.py from code outside loopscale/model/ while `work()` runs."""
    calls = []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_filename == accounting.__file__:
            caller = frame.f_back.f_code.co_filename if frame.f_back else ""
            if caller != accounting.__file__ and "/loopscale/model/" not in caller:
                calls.append(f"{caller}: {frame.f_code.co_name}")

    sys.setprofile(profile)
    try:
        work()
    finally:
        sys.setprofile(None)
    return calls


def test_the_module_takes_lrs_steps_and_flops_from_the_plan_and_recomputes_none():
    cfg = train_config([*TINY, "optim=muonh", "optim.transfer=published", "model.r=2"])
    plan = plan_training(cfg)
    # planted numbers no rule would give: the module can only have them from the plan
    planted = {group: 1e-3 * (i + 1) for i, group in enumerate(plan.lrs)}
    run = dataclasses.replace(plan.run, steps=7, F=123.0, F_causal=45.0)
    plan = dataclasses.replace(plan, run=run, lrs=planted)
    built = {}

    def build():
        built["module"] = module = LoopedLM(cfg.model, cfg.optim, cfg.trainer, plan)
        built["optimizers"] = module.configure_optimizers()

    assert _entries_into_accounting(build) == []
    module, optimizers = built["module"], built["optimizers"]
    assert module.optimizer_record["lrs"] == planted
    assert {g["name"]: g["initial_lr"] for g in optimizers["optimizer"].param_groups} == planted
    multiplier = optimizers["lr_scheduler"]["scheduler"].lr_lambdas[0]
    # the linear schedule reaches its end at plan.run.steps (7), not at the budget's 30 steps
    assert plan_run(cfg).steps == 30 and multiplier(6) > multiplier(7) == pytest.approx(cfg.optim.final_lr_frac)
