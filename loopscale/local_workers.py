"""Train many small runs on one machine at once: a pool of worker processes, one torch thread each.

Why processes and not threads: a width-16-48 model on a CPU is bound by per-op overhead, not by matmul
throughput, so two torch threads on one run barely beat one (their barriers wait on each other), while two
runs side by side, one thread each, do twice the work (benchmarks/bench_demo.py prints both ways). The
workers are started once (spawn: no state inherited from the parent) and each trains whole jobs with the
same `run_training` as `loopscale-train`, so records, locks, resume and forks behave exactly as there.

Ctrl-C: workers ignore SIGINT; the parent's KeyboardInterrupt terminates them at once. A killed run
resumes from its checkpoint on the next call, like any interrupted run.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections.abc import Iterable, Iterator
from typing import Any

from loopscale.config import TrainConfig


def quiet_lightning() -> None:
    """Each run's own INFO lines (GPU available, etc.) would bury a sweep's progress. Lightning sets its
    loggers' levels when imported, so import it first."""
    import logging
    import warnings

    import lightning  # noqa: F401

    for name in ("lightning", "lightning.pytorch", "lightning.fabric", "loopscale.train", "loopscale.forks"):
        logging.getLogger(name).setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)")


def _init_worker(threads: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent owns Ctrl-C (module docstring)
    os.environ["OMP_NUM_THREADS"] = str(threads)
    import torch

    torch.set_num_threads(threads)
    quiet_lightning()


def train_one(cfg: TrainConfig) -> tuple[TrainConfig, dict[str, Any], float]:
    """(cfg, its record, wall seconds) of `run_training(cfg)`: a finished run is skipped, not retrained."""
    from loopscale.train import run_training

    started = time.perf_counter()
    record = run_training(cfg)
    return cfg, record, time.perf_counter() - started


def train_in_workers(
    cfgs: Iterable[TrainConfig], workers: int, threads_per_worker: int = 1
) -> Iterator[tuple[TrainConfig, dict[str, Any], float]]:
    """Yield (cfg, record, wall_s) per job as each finishes, in completion order.

    workers <= 1 trains in this process, in the given order. Jobs are handed out in the given order, so
    put the longest first (the last job to start then ends close to the others). The first job that
    raises stops the pool and the error propagates."""
    cfgs = list(cfgs)
    if workers <= 1 or len(cfgs) <= 1:
        quiet_lightning()
        for cfg in cfgs:
            yield train_one(cfg)
        return
    pool = multiprocessing.get_context("spawn").Pool(
        min(workers, len(cfgs)), initializer=_init_worker, initargs=(threads_per_worker,)
    )
    try:
        yield from pool.imap_unordered(train_one, cfgs, chunksize=1)
        pool.close()
    except BaseException:  # Ctrl-C, a failed run, or the consumer stopped early: end every worker now
        pool.terminate()
        raise
    finally:
        pool.join()
