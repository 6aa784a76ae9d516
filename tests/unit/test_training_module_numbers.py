"""What the LightningModule (loopscale/train/lightning_module.py) builds from its plan, written out by hand: a
sampled-r micro-batch's slice of the step's draws and its loss (the mean over every target token of the rows run at
each drawn pass count), the tally the record reads; the optimizers' groups (AdamW's decays, betas, eps; MuonH's
AdamW flags, momentum, arithmetic) and the schedule's multiplier at the warmup's and the decay's steps."""

from __future__ import annotations

import pytest
import torch

from loopscale.model import r_sampling
from loopscale.train.lightning_module import LoopedLM
from loopscale.train.optim.muonh import MuonH
from loopscale.train.plan import plan_training
from support.train import TINY, train_config

SAMPLED = [
    *TINY,
    "model.r=4",
    "model.depth=null",
    "model.r_sampling=uniform",
    "model.r_set=[1,2,3,5]",
    "model.r_sampling_per=sequence",
    "model.r_grad=half",
    "budget.batch_size=8",
    "budget.device_batch=4",  # 2 micro-batches of 4 sequences a step
]


def _module(overrides, seed=0):
    cfg = train_config(overrides)
    return cfg, LoopedLM(cfg.model, cfg.optim, cfg.trainer, plan_training(cfg), seed=seed)


def test_a_sampled_micro_batch_runs_its_own_sequences_draws_and_weighs_every_target_token_alike():
    cfg, module = _module(SAMPLED, seed=3)
    assert (module.plan.batching.grad_accum, module.plan.batching.device_batch) == (2, 4)
    module.model.eval()  # no dropout anyway; the forms here draw nothing
    draws = r_sampling.draw_sequences(cfg.model, 3, 0, 8)  # step 0's eight sequences, keyed (seed, step, 1)
    torch.manual_seed(0)
    tally = {}
    # a micro-batch with two sequences at one pass count: they run together and both count in the tally
    assert len(set(draws[:4].tolist())) < 4 or len(set(draws[4:].tolist())) < 4
    for batch_idx in (0, 1, 3):  # micro-batch 3 is the second of the next accumulation: sequences 4-7 again
        first = 4 * (batch_idx % 2)
        x = torch.randint(0, cfg.model.vocab_size, (4, cfg.model.seq_len))
        y = torch.randint(0, cfg.model.vocab_size, (4, cfg.model.seq_len))
        y[0, :20] = -100  # rows with different numbers of targets: the mean is per token, not per row
        with torch.no_grad():
            got = module._sampled_loss(x, y, batch_idx)
            rows = [
                (module.model(x[i : i + 1], y[i : i + 1], r=int(draws[first + i])), (y[i] != -100).sum())
                for i in range(4)
            ]
        want = sum(loss * n for loss, n in rows) / sum(n for _, n in rows)
        assert got.item() == pytest.approx(want.item(), rel=1e-6), batch_idx
        for n in draws[first : first + 4].tolist():
            tally[n] = tally.get(n, 0) + 1
    assert module.r_tally == tally  # what the record's histogram reads (r_tally_record, under a Trainer)


def test_adamw_is_built_with_the_configs_betas_eps_and_each_groups_decay_and_the_plans_lr():
    cfg, module = _module(
        [*TINY, "model.r=2", "optim.beta1=0.85", "optim.beta2=0.97", "optim.eps=1e-7", "optim.weight_decay=0.03"]
    )
    built = module.configure_optimizers()
    optimizer = built["optimizer"]
    assert isinstance(optimizer, torch.optim.AdamW)
    groups = {g["name"]: g for g in optimizer.param_groups}
    assert {k: g["weight_decay"] for k, g in groups.items()} == {"decay": 0.03, "no_decay": 0.0}
    assert all(g["betas"] == (0.85, 0.97) and g["eps"] == 1e-7 for g in groups.values())
    assert module.plan.lrs == {"decay": 3e-3, "no_decay": 3e-3, "hyper": 3e-3}
    assert {k: g["initial_lr"] for k, g in groups.items()} == {"decay": 3e-3, "no_decay": 3e-3}
    # the linear schedule: 30 steps, warmup round(0.05 x 30) = 2 steps ((s + 1) / 2), then 1 - 0.9 (s - 2) / 28
    multiplier = built["lr_scheduler"]["scheduler"].lr_lambdas[0]
    assert module.plan.run.steps == 30 and built["lr_scheduler"]["interval"] == "step"
    for step, want in ((0, 0.5), (1, 1.0), (2, 1.0), (9, 1 - 0.9 * 7 / 28), (29, 1 - 0.9 * 27 / 28)):
        assert multiplier(step) == pytest.approx(want, rel=1e-12), step


def test_muonh_steps_only_the_matrix_group_by_muon_and_takes_the_configs_momentum_and_betas():
    cfg, module = _module(
        [*TINY, "model.r=2", "optim=muonh", "optim.transfer=none", "optim.momentum=0.9", "optim.beta1=0.7"]
    )
    optimizer = module.configure_optimizers()["optimizer"]
    assert isinstance(optimizer, MuonH)
    groups = {g["name"]: g for g in optimizer.param_groups}
    assert {k: g["adamw"] for k, g in groups.items()} == {
        "matrix": False,
        "head": True,
        "embedding": True,
        "norm": True,
    }
    assert {k: g["initial_lr"] for k, g in groups.items()} == {
        "matrix": cfg.optim.lr,
        "head": 0.004,
        "embedding": 0.3,
        "norm": 0.005,
    }
    assert all(
        g["momentum"] == 0.9 and g["betas"] == (0.7, cfg.optim.beta2) and g["weight_decay"] == 0.0
        for g in groups.values()
    )
    assert all(g["ortho_dtype"] == "fp32" for g in groups.values())  # auto on CPU
