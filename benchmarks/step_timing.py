"""The time of one training step of a config's model, split into forward + backward and optimizer.step():
the one step timer of bench_optim.py (MuonH's share of the step) and bench_demo.py (processes vs threads).

The step is the one Lightning runs (LoopedLM's model and its configured optimizer) on the deterministic
batches of loopscale.data.windows.batch_at, driven by hand so nothing but the step is timed; the first `warmup`
steps (allocator, lazy init) are left out.
"""

from __future__ import annotations

import time

import torch

from loopscale.config.schema import with_vocab
from loopscale.data.shards import prepare
from loopscale.data.windows import batch_at
from loopscale.train.job_plan import plan_job
from loopscale.train.lightning_module import LoopedLM
from loopscale.train.plan import plan_training

WARMUP_STEPS = 3


def step_times(cfg, steps: int, warmup: int = WARMUP_STEPS) -> tuple[float, float, int]:
    """Mean seconds per step of forward + backward and of optimizer.step() over `steps` steps after
    `warmup`, and the tokens of one step (batch_size x seq_len)."""
    prepared = prepare(cfg.data, progress=False)
    cfg = with_vocab(cfg, prepared.vocab_size)
    plan = plan_training(cfg, plan_job(cfg).run)  # a forked job: its stable parent's plan
    torch.manual_seed(0)
    module = LoopedLM(cfg.model, cfg.optim, cfg.trainer, plan)
    optimizer = module.configure_optimizers()["optimizer"]
    fwd_bwd_s = opt_s = 0.0
    for step in range(warmup + steps):
        x, y = batch_at(prepared, step, 0, 0, cfg.budget.batch_size, cfg.model.seq_len)
        t0 = time.perf_counter()
        module.model(x, y).backward()
        t1 = time.perf_counter()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        t2 = time.perf_counter()
        if step >= warmup:
            fwd_bwd_s += t1 - t0
            opt_s += t2 - t1
    return fwd_bwd_s / steps, opt_s / steps, plan.run.batch_tokens
