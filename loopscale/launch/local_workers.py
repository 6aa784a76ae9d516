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
- Ctrl-C: workers ignore SIGINT (a terminal sends it to the whole process group); the parent raises
  KeyboardInterrupt, sets the pool's "interrupted" flag and sends each worker SIGTERM, which the worker then
  raises as an interrupt: its run is recorded "interrupted", as in a single process. SIGTERM to the parent
  raises Terminated there (signals.py) and its workers record "terminated". Each worker exits within a
  moment (SIGKILL after STOP_GRACE_S). A worker whose parent dies without that (SIGKILL) gets SIGTERM from
  the kernel (PR_SET_PDEATHSIG). A stopped run resumes from its checkpoint on the next call.

`run_in_workers` is the pool for any picklable job function (the Hydra launcher hydra/launcher=local_pool
runs Hydra jobs on it: loopscale/launch/pool_launcher.py); `train_in_workers` trains TrainConfigs on it.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any, TypeVar

from loopscale.config.schema import TrainConfig

STOP_GRACE_S = 10.0  # a worker told to stop writes its record and exits well within this, even under load
EXIT_INTERRUPTED = 130  # 128 + SIGINT (loopscale/signals.py)
Item = TypeVar("Item")

# In a worker process: the pool's "interrupted" flag (set by the parent on Ctrl-C before it sends SIGTERM)
# and whether a job is running (a stop between jobs just ends the worker).
_INTERRUPT = None
_IN_JOB = False


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


def _init_worker(threads: int, parent_pid: int, interrupt=None) -> None:
    global _INTERRUPT
    from loopscale.signals import die_with_parent

    _INTERRUPT = interrupt
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent owns Ctrl-C (module docstring)
    signal.signal(signal.SIGTERM, _stop_worker)  # left in place by signals.training_signals (not the default)
    die_with_parent(signal.SIGTERM, parent_pid)
    os.environ["OMP_NUM_THREADS"] = str(threads)
    import torch

    torch.set_num_threads(threads)
    quiet_lightning()


def _stop_worker(signum, frame) -> None:
    """SIGTERM in a worker: the parent's Ctrl-C (the pool's interrupt flag set) raises signals.Interrupted,
    which a run records as "interrupted" (a KeyboardInterrupt would be turned into sys.exit(1) by Lightning);
    otherwise Terminated, recorded as "terminated". Between jobs the worker just exits."""
    from loopscale.signals import Interrupted, Terminated

    interrupted = _INTERRUPT is not None and _INTERRUPT.is_set()
    if not _IN_JOB:  # nothing to record: end now (an exception here could land in some object's __del__)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(EXIT_INTERRUPTED if interrupted else 143)
    raise Interrupted() if interrupted else Terminated()


def _job_in_worker(fn: Callable[[Any], Any], item: Any) -> Any:
    """`fn(item)` in a worker; a stop signal (or SystemExit) ends the worker process once the job's record is
    written, instead of handing it the next job (the pool would catch the exit and go on)."""
    global _IN_JOB
    from loopscale.signals import Interrupted

    _IN_JOB = True
    try:
        return fn(item)
    except (SystemExit, KeyboardInterrupt, Interrupted) as stop:
        code = stop.code if isinstance(stop, SystemExit) and isinstance(stop.code, int) else EXIT_INTERRUPTED
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    finally:
        _IN_JOB = False


def train_one(cfg: TrainConfig) -> JobOutcome:
    """`run_training(cfg)` as a JobOutcome: a finished run is skipped, not retrained; an error becomes the
    outcome's status and reason (a stop signal is not an error: it propagates)."""
    from loopscale.train.entry import run_training
    from loopscale.train.identity import IdentityMismatch
    from loopscale.train.lightning_module import Diverged

    started = time.perf_counter()
    try:
        record = run_training(cfg)
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
    cfgs = list(cfgs)
    if workers <= 1 or len(cfgs) <= 1:
        quiet_lightning()
    results = run_in_workers(train_one, cfgs, workers, threads_per_worker, label=lambda c: c.run_name)
    with contextlib.closing(results):  # a failed job or an early stop ends the pool's workers at once
        for _, outcome in results:
            yield _checked(outcome)


def run_in_workers(
    fn: Callable[[Item], Any],
    items: Iterable[Item],
    workers: int,
    threads_per_worker: int = 1,
    label: Callable[[Item], str] = str,
) -> Iterator[tuple[Item, Any]]:
    """Yield (item, fn(item)) per item as each finishes, in completion order, `fn` (a module-level function
    returning plain data) running in `workers` spawned processes of `threads_per_worker` torch threads each.

    workers <= 1 (or one item) runs in this process, in the given order. Items are handed out in the given
    order. A worker that dies raises JobFailed (named by `label(item)`); Ctrl-C, SIGTERM, an exception of
    the consumer or a consumer that stops early end every worker (module docstring) and go on."""
    from loopscale.signals import raise_on_sigterm

    items = list(items)
    raise_on_sigterm()  # SIGTERM to this process unwinds through the clean-up below
    if workers <= 1 or len(items) <= 1:
        for item in items:
            yield item, fn(item)
        return
    context = multiprocessing.get_context("spawn")
    interrupt = context.Event()
    pool = ProcessPoolExecutor(
        min(workers, len(items)),
        mp_context=context,
        initializer=_init_worker,
        initargs=(threads_per_worker, os.getpid(), interrupt),
    )
    try:
        futures = {pool.submit(_job_in_worker, fn, item): item for item in items}
        for future in as_completed(futures):
            try:
                result = future.result()
            except BrokenProcessPool:  # its worker died without a word (killed, or out of memory?)
                raise JobFailed(label(futures[future]), "failed", "its worker process died") from None
            yield futures[future], result
    except KeyboardInterrupt:  # Ctrl-C: the workers record their runs as interrupted (module docstring)
        interrupt.set()
        stop_workers(list((pool._processes or {}).values()))
        raise
    except BaseException:  # a failed job, SIGTERM, or the consumer stopped early: end every worker now
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
