"""Train many small runs on one machine at once: TrainConfigs on the worker pool (loopscale/launch/
worker_pool.py), one torch thread each. What `loopscale demo` trains with.

Why processes and not threads: a width-16-48 model on a CPU is bound by per-op overhead, not by matmul
throughput, so two torch threads on one run barely beat one (their barriers wait on each other), while two
runs side by side, one thread each, do twice the work (benchmarks/bench_demo.py prints both ways). Each
worker trains whole jobs with the same `run_training` as `loopscale-train`, so records, locks, resume and
forks behave exactly as there. A job that fails or diverges comes back as a plain outcome (strings, not its
exception, which might not unpickle in the parent); a worker that dies is that job's failure, its run's
record written here when the worker could not (record_dead_worker). `train_in_workers` stops at the first
failure (JobFailed, naming the job); the Hydra launcher (pool_launcher.py) records it and goes on.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from loopscale.atomic import write_json_atomic
from loopscale.config.schema import TrainConfig
from loopscale.launch.worker_pool import WorkerDied, quiet_lightning, run_in_workers
from loopscale.train.identity import IdentityMismatch, stored_hash
from loopscale.train.job_plan import plan_job
from loopscale.train.lock import release_dead_holder
from loopscale.train.plan import run_dir_of
from loopscale.train.run_json import PARENT_FILE, RUN_FILE, ForkedJob, RunRecord, read_record_or_none


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
    record: RunRecord | ForkedJob | None
    wall_s: float
    status: str = "done"  # done | failed | diverged | refused (another config's run dir: nothing written)
    reason: str = ""
    failure_record: str | None = None  # the record file that says why it failed, when there is one


def train_one(cfg: TrainConfig) -> JobOutcome:
    """`run_training(cfg)` as a JobOutcome: a finished run is skipped, not retrained; an error becomes the
    outcome's status and reason (a stop signal is not an error: it propagates)."""
    # in the worker process: the pool's parent (demo, the Hydra launcher) never loads torch or Lightning
    from loopscale.train.entry import run_training
    from loopscale.train.lightning_module import Diverged

    started = time.perf_counter()
    try:
        with job_log(run_dir_of(cfg)):
            record = run_training(cfg)
    except Exception as err:
        kind = {Diverged: "diverged", IdentityMismatch: "refused"}
        status = next((v for t, v in kind.items() if isinstance(err, t)), "failed")
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        record_file = None if status == "refused" else _failure_record(cfg)
        return JobOutcome(cfg, None, time.perf_counter() - started, status, reason, record_file)
    return JobOutcome(cfg, record, time.perf_counter() - started)


def _record_files(cfg: TrainConfig) -> tuple[Path, ...]:
    """The records the job writes (`JobPlan.record_files`); one that cannot be planned wrote at most its own."""
    try:
        return plan_job(cfg).record_files
    except ValueError:  # e.g. a forked job that cannot fork: refused before any branch
        return (run_dir_of(cfg) / RUN_FILE, run_dir_of(cfg) / PARENT_FILE)


JOB_LOG = "entry.log"  # the name loopscale-train's log has in a run dir (Hydra's job log)
LOG_FORMAT = "[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"  # Hydra's job log format


@contextlib.contextmanager
def job_log(run_dir: Path):
    """While a job trains outside Hydra (the demo's workers): its INFO lines (Lightning's banners and restore
    lines, the run's plan) into run_dir/entry.log, as loopscale-train keeps them, and only WARNING and above on
    the terminal. Under a logging setup of its own (Hydra's job: a file handler on the root) nothing changes."""
    root = logging.getLogger()
    if any(isinstance(h, logging.FileHandler) for h in root.handlers):
        yield
        return
    run_dir.mkdir(parents=True, exist_ok=True)
    to_file = logging.FileHandler(run_dir / JOB_LOG)
    to_file.setFormatter(logging.Formatter(LOG_FORMAT))
    to_terminal = logging.StreamHandler()
    to_terminal.setLevel(logging.WARNING)
    level = root.level
    root.addHandler(to_file)
    root.addHandler(to_terminal)
    root.setLevel(logging.INFO)
    try:
        yield
    finally:
        for handler in (to_file, to_terminal):
            root.removeHandler(handler)
        to_file.close()
        root.setLevel(level)


def _failure_record(cfg: TrainConfig) -> str | None:
    """The record that says why a job failed: its run.json, or for a forked job the parent's record or a
    branch's run.json that is not done."""
    for path in _record_files(cfg):
        record = read_record_or_none(path)
        if record is not None and record.status not in ("done", None):
            return str(path)
    return None


def record_dead_worker(cfg: TrainConfig, died: WorkerDied) -> tuple[str, str | None]:
    """(status, record path) of the run a dead worker held. A worker that could write its record on the way
    out (SIGTERM: "terminated") left it; one killed outright left its lock and no record: the lock is deleted
    (its holder is gone for certain) and the record written here says failed, and why."""
    held = [path for path in _record_files(cfg) if release_dead_holder(path.parent, died.pid)]
    for path in held:
        where = path.parent
        record = read_record_or_none(path) or RunRecord()
        record.update(status="failed", reason=died.reason, run_name=record.run_name or where.name, sweep=cfg.sweep)
        record.update(run_dir=str(where), identity=stored_hash(where) or record.identity)
        try:
            write_json_atomic(path, record.to_json_dict())
        except OSError:  # a full disk: the line still names the job; its lock is gone, so it resumes
            return "failed", None
        return "failed", str(path)
    written = _failure_record(cfg)
    status = (read_record_or_none(Path(written)) or RunRecord(status="failed")).status if written else "failed"
    return status, written


def _checked(outcome: JobOutcome | WorkerDied, cfg: TrainConfig) -> tuple[TrainConfig, RunRecord | ForkedJob, float]:
    if isinstance(outcome, WorkerDied):
        status, record = record_dead_worker(cfg, outcome)
        raise JobFailed(cfg.run_name, status, outcome.reason, record)
    if outcome.status != "done":
        raise JobFailed(outcome.cfg.run_name, outcome.status, outcome.reason, outcome.failure_record)
    return outcome.cfg, outcome.record, outcome.wall_s


def train_in_workers(
    cfgs: Iterable[TrainConfig], workers: int, threads_per_worker: int = 1
) -> Iterator[tuple[TrainConfig, RunRecord | ForkedJob, float]]:
    """Yield (cfg, record, wall_s) per job as each finishes, in completion order.

    workers <= 1 trains in this process, in the given order. Jobs are handed out in the given order, so
    put the longest first (the last job to start then ends close to the others). The first job that fails
    (or whose worker dies) stops the pool (JobFailed naming it); so do Ctrl-C, SIGTERM and a consumer that
    stops early."""
    cfgs = list(cfgs)
    if workers <= 1 or len(cfgs) <= 1:
        quiet_lightning()
    results = run_in_workers(train_one, cfgs, workers, threads_per_worker)
    with contextlib.closing(results):  # a failed job or an early stop ends the pool's workers at once
        for cfg, outcome in results:
            yield _checked(outcome, cfg)
