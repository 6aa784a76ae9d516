"""The torch side of the throughput probe (launch/throughput.py): a job's model and optimizer stepped on random
tokens and timed, and the stand-in for one of the pool's other workers that keeps a core as busy as that worker will.

Imported only when a probe runs or a stand-in starts (throughput.py stays torch-free for cached measurements,
`plan` and `sweep`). Importing this module is what a pool worker imports at its start (torch, Lightning, Hydra
and the runner through loopscale.train.entry), so a stand-in process spawned on `stand_in_worker` starts as a
worker does: its start is timed as one (throughput.worker_start_s).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import time

import torch

import loopscale.train.entry  # noqa: F401  (Lightning, Hydra, the runner: a worker's start)
from loopscale.config.schema import TrainConfig
from loopscale.model.accounting import cpu_model
from loopscale.model.transformer import LoopedTransformer
from loopscale.signals import die_with_parent
from loopscale.train.job_plan import plan_job
from loopscale.train.lightning_module import LoopedLM
from loopscale.train.plan import plan_training

PROBE_STEPS = 3  # timed optimizer steps after one warm-up: ~0.1-2 s for the CPU grids' shapes


def _job_optimizer(cfg: TrainConfig, model_cfg, device_batch: int):
    """The run's own model and optimizer (LoopedLM's configure_optimizers: MuonH or AdamW groups and lrs)."""
    cfg = dataclasses.replace(cfg, model=model_cfg)  # a forked job's probe: its stable parent's plan
    module = LoopedLM(model_cfg, cfg.optim, cfg.trainer, plan_training(cfg, plan_job(cfg).run))
    return module.model, module.configure_optimizers()["optimizer"]


def measure(cfg: TrainConfig, device_batch: int, threads: int, steps: int = PROBE_STEPS) -> tuple[float, float]:
    """(tokens per second, core share: CPU seconds per wall second per thread) of `steps` training steps."""
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    quiet = logging.getLogger("loopscale.train.lightning_module")
    level = quiet.level
    quiet.setLevel(logging.WARNING)  # its "optimizer ...: peak lrs" line is the run's, not the probe's
    try:
        torch.manual_seed(0)
        model, optimizer = _job_optimizer(cfg, cfg.model, device_batch)
        shape = (device_batch, cfg.model.seq_len)
        idx = torch.randint(0, cfg.model.vocab_size, shape)
        targets = torch.randint(0, cfg.model.vocab_size, shape)

        def step() -> None:
            model(idx, targets).backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        step()  # warm-up: allocations and first-call dispatch
        started, cpu_started = time.perf_counter(), time.process_time()
        for _ in range(steps):
            step()
        wall_s, cpu_s = time.perf_counter() - started, time.process_time() - cpu_started
        return steps * device_batch * cfg.model.seq_len / wall_s, min(1.0, cpu_s / wall_s / threads)
    finally:
        torch.set_num_threads(previous)
        quiet.setLevel(level)


def stand_in_worker(ready, stop, threads: int, parent_pid: int) -> None:
    """A stand-in for one of the pool's other workers: what a worker imports, then training steps of a small
    model until `stop` is set (or its parent is gone)."""
    die_with_parent(signal.SIGTERM, parent_pid)
    os.environ["OMP_NUM_THREADS"] = str(threads)
    torch.set_num_threads(threads)
    model_cfg = cpu_model(32, 2, "baseline", vocab_size=512, seq_len=64)
    model = LoopedTransformer(model_cfg)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    idx = torch.randint(0, 512, (16, 64))
    first = True
    while first or not stop.is_set():
        model(idx, idx).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if first:
            ready.send(True)
            ready.close()
            first = False
