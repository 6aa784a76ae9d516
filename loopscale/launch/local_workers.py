"""Train many small runs on one machine at once: a pool of worker processes, one torch thread each.

Why processes and not threads: a width-16-48 model on a CPU is bound by per-op overhead, not by matmul
throughput, so two torch threads on one run barely beat one (their barriers wait on each other), while two
runs side by side, one thread each, do twice the work (benchmarks/bench_demo.py prints both ways). The
workers are started once (spawn: no state inherited from the parent) and each trains whole jobs with the
same `run_training` as `loopscale-train`, so records, locks, resume and forks behave exactly as there.

Nothing hangs and nothing is left behind:
- a job that fails or diverges comes back as a plain outcome (strings, not its exception, which might not
  unpickle in the parent); the pool then stops and JobFailed names the job, whose run.json says why;
- a worker that dies (killed, out of memory) breaks the pool at once (concurrent.futures notices), also
  JobFailed;
- Ctrl-C: workers ignore SIGINT; SIGTERM to the parent raises Terminated there (signals.py). Either way
  the parent sends its workers SIGTERM: each records its run as "terminated" and exits within a moment
  (SIGKILL after STOP_GRACE_S). A worker whose parent dies without that (SIGKILL) gets SIGTERM from the
  kernel (PR_SET_PDEATHSIG). A stopped run resumes from its checkpoint on the next call.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

from loopscale.config.schema import TrainConfig

STOP_GRACE_S = 10.0  # a worker told to stop writes its record and exits well within this, even under load


class JobFailed(RuntimeError):
    """A job of the pool failed, diverged or was refused; the pool has stopped."""

    def __init__(self, run_name: str, status: str, reason: str, record: str | None = None):
        self.run_name, self.status, self.reason, self.record = run_name, status, reason, record
        where = f"recorded in {record}" if record else "nothing recorded"
        super().__init__(f"job {run_name} {status}: {reason} ({where})")

    def __reduce__(self):
        return type(self), (self.run_name, self.status, self.reason, self.record)


@dataclass(frozen=True)
class JobOutcome:
    """What a worker sends back: plain data only, so it always unpickles in the parent."""

    cfg: TrainConfig
    record: dict[str, Any] | None
    wall_s: float
    status: str = "done"  # done | failed | diverged | refused (another config's run dir: nothing written)
    reason: str = ""
    failure_record: str | None = None  # the record file that says why it failed, when there is one


def quiet_lightning() -> None:
    """Each run's own INFO lines (GPU available, etc.) would bury a sweep's progress. Lightning sets its
    loggers' levels when imported, so import it first."""
    import logging
    import warnings

    for name in (
        "lightning",
        "lightning.pytorch",
        "lightning.fabric",
        "loopscale.train.entry",
        "loopscale.train.forks",
    ):
        logging.getLogger(name).setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)")


def _init_worker(threads: int, parent_pid: int) -> None:
    from loopscale.signals import die_with_parent

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent owns Ctrl-C (module docstring)
    die_with_parent(signal.SIGTERM, parent_pid)
    os.environ["OMP_NUM_THREADS"] = str(threads)
    import torch

    torch.set_num_threads(threads)
    quiet_lightning()


def train_one(cfg: TrainConfig) -> JobOutcome:
    """`run_training(cfg)` as a JobOutcome: a finished run is skipped, not retrained; an error becomes the
    outcome's status and reason. In a worker, SIGTERM ends the process once the run's record is written
    (the pool would otherwise catch the exit and hand the worker its next job)."""
    from loopscale.train.entry import run_training
    from loopscale.train.identity import IdentityMismatch
    from loopscale.train.lightning_module import Diverged

    started = time.perf_counter()
    try:
        record = run_training(cfg)
    except SystemExit as stop:
        if multiprocessing.parent_process() is None:
            raise
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(stop.code if isinstance(stop.code, int) else 1)
    except Exception as err:
        kind = {Diverged: "diverged", IdentityMismatch: "refused"}
        status = next((v for t, v in kind.items() if isinstance(err, t)), "failed")
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        record_file = None if status == "refused" else _failure_record(cfg)
        return JobOutcome(cfg, None, time.perf_counter() - started, status, reason, record_file)
    return JobOutcome(cfg, record, time.perf_counter() - started)


def _failure_record(cfg: TrainConfig) -> str | None:
    """The record that says why a job failed: its run.json, or for a forked job the parent's record or a
    branch's run.json that is not done."""
    from loopscale.train.plan import run_dir_of
    from loopscale.train.records import PARENT_FILE, RUN_FILE, read_record_or_none

    run_dir = run_dir_of(cfg)
    candidates = [run_dir / RUN_FILE, run_dir / PARENT_FILE]
    if cfg.budget.mode == "forks":
        candidates += sorted(run_dir.parent.glob(f"{run_dir.name}-*/{RUN_FILE}"))
    for path in candidates:
        record = read_record_or_none(path)
        if record is not None and record.get("status") not in ("done", None):
            return str(path)
    return None


def _checked(outcome: JobOutcome) -> tuple[TrainConfig, dict[str, Any], float]:
    if outcome.status != "done":
        raise JobFailed(outcome.cfg.run_name, outcome.status, outcome.reason, outcome.failure_record)
    return outcome.cfg, outcome.record, outcome.wall_s


def train_in_workers(
    cfgs: Iterable[TrainConfig], workers: int, threads_per_worker: int = 1
) -> Iterator[tuple[TrainConfig, dict[str, Any], float]]:
    """Yield (cfg, record, wall_s) per job as each finishes, in completion order.

    workers <= 1 trains in this process, in the given order. Jobs are handed out in the given order, so
    put the longest first (the last job to start then ends close to the others). The first job that fails
    stops the pool (JobFailed); so do Ctrl-C, SIGTERM and a consumer that stops early."""
    from loopscale.signals import raise_on_sigterm

    cfgs = list(cfgs)
    raise_on_sigterm()  # SIGTERM to this process unwinds through the clean-up below
    if workers <= 1 or len(cfgs) <= 1:
        quiet_lightning()
        for cfg in cfgs:
            yield _checked(train_one(cfg))
        return
    pool = ProcessPoolExecutor(
        min(workers, len(cfgs)),
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_init_worker,
        initargs=(threads_per_worker, os.getpid()),
    )
    try:
        futures = {pool.submit(train_one, cfg): cfg for cfg in cfgs}
        for future in as_completed(futures):
            try:
                outcome = future.result()
            except BrokenProcessPool:  # its worker died without a word (killed, or out of memory?)
                raise JobFailed(futures[future].run_name, "failed", "its worker process died") from None
            yield _checked(outcome)
    except BaseException:  # a failed job, Ctrl-C, SIGTERM, or the consumer stopped early: end every worker now
        stop_workers(list((pool._processes or {}).values()))
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def stop_workers(procs: list, grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM to each live worker (it records its run as terminated and exits), SIGKILL to any still
    there after `grace_s`; returns once all are gone."""
    for p in procs:
        if p.is_alive():
            p.terminate()
    deadline = time.monotonic() + grace_s
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join()
