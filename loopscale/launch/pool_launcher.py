"""`hydra/launcher=local_pool`: the points of any multirun on this machine's worker pool
(loopscale/launch/local_workers.py, the pool `loopscale demo` trains on), `workers` processes of
`threads_per_worker` torch threads each, with one progress bar and ETA over the sweep.

    loopscale-train -m experiment=isodepth_cpu hydra/launcher=local_pool
    loopscale-train -m experiment=mine hydra/launcher=local_pool \
        hydra.launcher.workers=4 hydra.launcher.threads_per_worker=2

Why a pool of single-thread processes: small CPU models are bound by per-op overhead, so two runs side by
side do nearly twice the work of one run on two threads (benchmarks/bench_demo.py). Each job runs as Hydra
runs it (hydra.core.utils.run_job: the job's config, its log file, loopscale-train's task function), in a
spawned worker: the records, locks, resumes, forks and exit codes are loopscale-train's. A failed run is
recorded and the sweep goes on (exit 1 at the end, as with the basic launcher); Ctrl-C stops every worker
and each run records "interrupted" (exit 130); SIGTERM records "terminated" (exit 143). The launcher class
is in hydra_plugins/loopscale_launchers.py (Hydra instantiates launchers only from there).
"""

from __future__ import annotations

import contextlib
import copy
import logging
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cloudpickle
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, configure_log, run_job, setup_globals
from hydra.errors import CompactHydraException
from omegaconf import DictConfig, OmegaConf, open_dict
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from loopscale.config.schema import with_vocab
from loopscale.errors import ConfigError, LoopscaleError, UnknownName, user_error
from loopscale.launch.compile_order import schedule_hydra_jobs
from loopscale.launch.launchers import refuse_over_limits
from loopscale.launch.local_workers import record_dead_worker
from loopscale.launch.wall_time import list_schedule_s
from loopscale.launch.worker_pool import WorkerDied, run_in_workers
from loopscale.machine import usable_cores
from loopscale.signals import EXIT_INTERRUPTED, EXIT_TERMINATED, Terminated
from loopscale.train.job_plan import plan_job
from loopscale.train.plan import to_train_config

log = logging.getLogger("loopscale.launch.pool_launcher")
FAILED_PREFIX = "loopscale-train: a run of this sweep failed "  # loopscale-train's RunFailed line (train/entry.py)


def pool_size(workers: Any, threads_per_worker: Any, n_jobs: int, cores: int) -> tuple[int, int]:
    """(workers, threads per worker): unset (None) values from the core count, one torch thread per worker by
    default (module docstring), never more workers than jobs. Anything but a whole number >= 1 or None is
    refused (ConfigError), 0 included: it would otherwise read as unset."""

    def whole(value) -> bool:
        return value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 1)

    if not (whole(workers) and whole(threads_per_worker)):
        shown = 1 if threads_per_worker is None else threads_per_worker
        raise ConfigError(
            f"hydra.launcher.workers={workers} and hydra.launcher.threads_per_worker={shown} must be >= 1 "
            "(whole numbers, or null: from the core count)"
        )
    threads = threads_per_worker or 1
    workers = workers or max(1, cores // threads)
    return max(1, min(workers, n_jobs)), threads


def job_tokens(job_cfg: DictConfig) -> int | None:
    """Training tokens a job processes (its parent's and cooldowns' for a forked job): its share of the
    sweep's wall time, for the ETA and to hand out the longest jobs first; 1 for a config that is not a
    loopscale run (the test app); None for an invalid one (it still runs, to record why it is invalid, as
    the basic launcher does), but an unknown name refuses the sweep (errors.UnknownName)."""
    if "model" not in job_cfg or "budget" not in job_cfg:
        return 1

    try:
        train_cfg = _train_config(job_cfg)
    except UnknownName:  # a typo'd name (a recipe, a form): the whole sweep is refused before any job starts
        raise
    except ValueError:
        return None
    return max(1, plan_job(train_cfg).tokens)


def _train_config(job_cfg: DictConfig):
    """The job's TrainConfig (ValueError for an invalid one), with the configured vocabulary."""
    cfg = copy.deepcopy(job_cfg)
    with open_dict(cfg):
        cfg.pop("hydra", None)
    train_cfg = to_train_config(cfg)
    return with_vocab(train_cfg, train_cfg.data.vocab_size)


def run_hydra_job(payload: bytes):
    """One Hydra job in a worker, as Hydra's basic launcher runs it; `payload` is the cloudpickled
    (hydra_context, task_function, job config, Hydra's singletons), as submitit sends them."""
    hydra_context, task_function, sweep_config, singletons = cloudpickle.loads(payload)
    Singleton.set_state(singletons)
    setup_globals()
    return run_job(
        hydra_context=hydra_context,
        task_function=task_function,
        config=sweep_config,
        job_dir_key="hydra.sweep.dir",
        job_subdir_key="hydra.sweep.subdir",
    )


def _job_configs(launcher, job_overrides: Sequence[Sequence[str]], initial_job_idx: int, threads: int):
    """Every job's config as the basic launcher composes it (job id and number set), with loopscale's
    per-run progress bars off and its torch threads set (neither is part of a run's identity), and the
    console log at WARNING while the sweep's own bar shows progress (the job's log file keeps everything)."""
    loader = launcher.hydra_context.config_loader
    out = []
    for i, overrides in enumerate(job_overrides):
        cfg = loader.load_sweep_config(launcher.config, list(overrides))
        with open_dict(cfg):
            cfg.hydra.job.id = initial_job_idx + i
            cfg.hydra.job.num = initial_job_idx + i
            if "trainer" in cfg:
                cfg.trainer.progress = False
                cfg.trainer.num_threads = threads
            console = cfg.hydra.job_logging.get("handlers", {}).get("console")
            if launcher.progress and console is not None:
                console.level = "WARNING"
        out.append(cfg)
    return out


def launch_in_pool(launcher, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list:
    """The launcher's `launch`: every job on the pool, longest first (each model's first job before its others:
    loopscale/launch/compile_order.py); returns their JobReturns in order."""
    setup_globals()
    configure_log(launcher.config.hydra.hydra_logging, launcher.config.hydra.verbose)
    try:
        # unset threads_per_worker: the jobs' own trainer.num_threads when the sweep sets it (> 0), else 1
        threads_per_worker = launcher.threads_per_worker
        if threads_per_worker is None:
            job_threads = OmegaConf.select(launcher.config, "trainer.num_threads", default=None)
            threads_per_worker = job_threads if isinstance(job_threads, int) and job_threads > 0 else None
        workers, threads = pool_size(launcher.workers, threads_per_worker, len(job_overrides), usable_cores())
        Path(str(launcher.config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
        jobs = _job_configs(launcher, job_overrides, initial_job_idx, threads)
        tokens = [job_tokens(job) for job in jobs]
        # memory only (GPU runs): a local job's time limit is the user's own; an invalid job runs to record why
        refuse_over_limits([job for job, t in zip(jobs, tokens) if t is not None], None)
    except LoopscaleError as err:  # the user's to fix: Hydra prints a compact error as one line
        raise CompactHydraException(f"loopscale-train: error: {err}") from None
    except OSError as err:  # a read-only or full runs dir: one line, as loopscale-train says it
        found = user_error(err)
        if found is None:
            raise
        raise CompactHydraException(f"loopscale-train: error: {found.line}") from None
    # longest first, the first job of each model before its others (seeds...), trainer.compile=auto resolved;
    # an invalid job (no tokens: it runs only to record why) is scheduled as the shortest
    order = schedule_hydra_jobs(jobs, tokens)
    tokens = [1 if t is None else t for t in tokens]  # the bar's weight of a job that only records its error
    state = Singleton.get_state()
    payloads = {i: cloudpickle.dumps((launcher.hydra_context, launcher.task_function, jobs[i], state)) for i in order}
    log.info(
        "local pool: %d job(s) on %d worker process(es) x %d thread(s) (%d cores)",
        len(jobs),
        workers,
        threads,
        usable_cores(),
    )
    try:
        results, outcomes = _run_with_progress(launcher, jobs, order, payloads, tokens, workers, threads)
    except KeyboardInterrupt:
        print("loopscale-train: interrupted (the runs record it and resume on the next launch)", file=sys.stderr)
        raise SystemExit(EXIT_INTERRUPTED) from None
    except Terminated:  # a SystemExit of its own, so loopscale-train's main does not say it again
        print("loopscale-train: terminated", file=sys.stderr, flush=True)
        raise SystemExit(EXIT_TERMINATED) from None
    return _elsewhere_fails(results, outcomes, jobs)


def _run_with_progress(launcher, jobs, order, payloads, tokens, workers, threads) -> list:
    results: list[Any] = [None] * len(jobs)
    outcomes: list[str | None] = [None] * len(jobs)  # "running elsewhere", "skipped (done)" (JobResult.outcome)
    console = Console(stderr=True)
    columns = [TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), TextColumn("ETA {task.fields[eta]}")]
    started = time.perf_counter()
    eta = SweepEta([tokens[i] for i in order], workers)
    with Progress(*columns, console=console, disable=not launcher.progress) as progress:
        # the bar advances by the tokens each job has trained (its workers report every batch): the ETA weighs
        # a long job more than a short one, and moves while the first jobs still train
        bar = progress.add_task(f"0/{len(jobs)} jobs", total=sum(tokens), eta="-:--:--")

        def tick(trained: list[float], running: list[int]) -> None:
            done_tokens, eta_s = eta.update(trained, running)
            progress.update(bar, completed=done_tokens, eta=_clock(eta_s))

        pending = [(i, payloads[i]) for i in order]
        finished = run_in_workers(_run_indexed, pending, workers, threads, tick=tick)
        with contextlib.closing(finished):
            try:
                for (i, _), result in finished:
                    if isinstance(result, WorkerDied):
                        result = _dead_worker_result(jobs[i], result)
                    results[i], outcomes[i] = _job_return(result, jobs[i]), result.outcome
                    eta.finish(order.index(i))
                    done = sum(r is not None for r in results)
                    progress.update(bar, description=f"{done}/{len(jobs)} jobs")
                    line = f"  {_run_name(jobs[i]):<28} {_outcome(result, _run_name(jobs[i]))}"
                    progress.console.print(
                        line, soft_wrap=True, highlight=False, markup=False
                    )  # a reason is data: '[/x]' is no tag
            except KeyboardInterrupt:  # Ctrl-C while this loop, not the pool, ran: the pool's own Ctrl-C path
                finished.throw(KeyboardInterrupt())  # (runs recorded interrupted), which raises it on
    wall_s = time.perf_counter() - started
    log.info("local pool: %d job(s) in %.1f s (%d worker(s) x %d thread(s))", len(jobs), wall_s, workers, threads)
    return results, outcomes


class SweepEta:
    """The bar's position and the ETA from the workers' reported tokens: each running job's remaining tokens
    and each waiting job's, at the tokens/s a busy worker has managed so far in this sweep (start-up and
    validation included, since the clock runs from each job's hand-out), scheduled on the workers as the pool
    hands them out (wall_time.list_schedule_s). Jobs in hand-out order; `trained` as run_in_workers' tick."""

    def __init__(self, tokens: Sequence[int], workers: int):
        self.tokens, self.workers = list(tokens), workers
        self.done = [False] * len(tokens)
        self.busy_s = 0.0  # worker-seconds spent on jobs so far
        self.trained_total = 0.0  # tokens trained by jobs that ended, and by those running (last tick)
        self.last: float | None = None
        self.trained = [0.0] * len(tokens)

    def finish(self, k: int) -> None:
        self.done[k] = True
        self.trained[k] = self.tokens[k]

    def update(self, trained: Sequence[float], running: Sequence[int], now: float | None = None):
        """(tokens done, for the bar; seconds left, None while nothing has trained yet)."""
        now = time.monotonic() if now is None else now
        if self.last is not None:
            self.busy_s += (now - self.last) * len(running)
        self.last = now
        for k, t in enumerate(trained):
            if not self.done[k]:
                self.trained[k] = min(float(t), self.tokens[k])
        done_tokens = sum(self.trained)
        if done_tokens <= 0 or self.busy_s <= 0:
            return done_tokens, None
        rate = done_tokens / self.busy_s  # tokens per second of one busy worker
        busy = [(self.tokens[k] - self.trained[k]) / rate for k in running if not self.done[k]]
        waiting = [self.tokens[k] / rate for k in range(len(self.tokens)) if not self.done[k] and k not in running]
        return done_tokens, list_schedule_s(waiting, self.workers, busy)


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "-:--:--"
    seconds = round(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


@dataclass(frozen=True)
class JobResult:
    """What comes back from a worker: plain data (a JobReturn holds configs and exceptions that need not
    unpickle in the parent)."""

    completed: bool
    value: Any = None  # the task function's return value when it is plain data (a loss), else None
    error: str = ""  # the failed job's exception, as one text
    outcome: str | None = None  # "skipped (done)", "running elsewhere" (loopscale-train's jobs), else None


def _run_indexed(item: tuple[int, bytes]) -> JobResult:
    """run_hydra_job on (index, payload) as a JobResult; an error becomes the result, so one job cannot
    stop the pool (loopscale-train's task function records a failed run and raises RunFailed)."""
    try:
        ret = run_hydra_job(item[1])
    except Exception as err:  # Hydra's own set-up failed for this job (an unsafe run name, a read-only dir)
        found = user_error(err)
        line = found.line if found is not None else f"{type(err).__name__}: {err}".splitlines()[0]
        return JobResult(False, error=f"{FAILED_PREFIX}(nothing recorded): {line}")

    if ret.status == JobStatus.COMPLETED:
        plain = ret._return_value if isinstance(ret._return_value, (int, float, str, type(None))) else None
        runner = sys.modules.get("loopscale.train.runner")  # loaded when the task is loopscale-train's
        return JobResult(True, plain, outcome=runner.last_outcome() if runner is not None else None)
    err = ret._return_value
    return JobResult(False, error=str(err) or type(err).__name__)


def _dead_worker_result(job: DictConfig, died) -> JobResult:
    """The JobResult of a job whose worker died: its run's record (written here when the worker could not:
    local_workers.record_dead_worker) named in one line."""
    record = None
    if job_tokens(job) is not None and "model" in job:
        _, record = record_dead_worker(_train_config(job), died)
    written = f"recorded in {record}" if record else "nothing recorded"
    return JobResult(False, error=f"{FAILED_PREFIX}({written}): {_run_name(job)}: {died.reason}")


def _job_return(result: JobResult, job: DictConfig):
    if result.completed:
        return JobReturn(status=JobStatus.COMPLETED, _return_value=result.value, hydra_cfg=job)
    # Hydra raises the first failed job's return value after the sweep; a compact error prints one line
    error = CompactHydraException(result.error)
    return JobReturn(status=JobStatus.FAILED, _return_value=error, hydra_cfg=job, overrides=_overrides(job))


def _overrides(job: DictConfig) -> list[str]:
    """The job's overrides, for Hydra's "Error executing job with overrides: ..." line."""
    return list(OmegaConf.select(job, "hydra.overrides.task", default=None) or [])


def _elsewhere_fails(results: list, outcomes: list, jobs: list) -> list:
    """A sweep whose runs are still training elsewhere is not done: when no job failed (whose line Hydra
    prints), the first such job's return becomes a failure saying so in one line (exit 1)."""
    elsewhere = [i for i, outcome in enumerate(outcomes) if outcome == "running elsewhere"]
    if not elsewhere or any(r.status == JobStatus.FAILED for r in results):
        return results
    names = ", ".join(_run_name(jobs[i]) for i in elsewhere)
    line = (
        f"loopscale-train: {len(elsewhere)} run(s) of this sweep are running elsewhere, not done yet: {names} "
        "(`loopscale status` shows them; relaunch once they end)"
    )
    first = elsewhere[0]
    results[first] = JobReturn(
        status=JobStatus.FAILED, _return_value=CompactHydraException(line), hydra_cfg=jobs[first]
    )
    return results


def _run_name(job: DictConfig) -> str:
    return str(job.get("run_name", job.hydra.job.get("override_dirname") or job.hydra.job.num))


def _outcome(result: JobResult, name: str) -> str:
    """A finished job's line: trained, skipped or running elsewhere (loopscale-train says which), or failed
    (where it is recorded, and why: the sweep's last line repeats the first failure's with its run name)."""
    if not result.completed:
        line = result.error.splitlines()[0] if result.error else "no reason given"
        line = line.removeprefix(FAILED_PREFIX).replace(f"): {name}: ", "): ", 1)
        return line if line.startswith("(") else f"failed: {line}"
    loss = f", L = {result.value:.4f}" if isinstance(result.value, float) else ""
    if result.outcome == "running elsewhere":
        return "running elsewhere (not trained here)"
    return f"{result.outcome or 'done'}{loss}"
