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

from hydra.errors import CompactHydraException
from omegaconf import DictConfig, OmegaConf, open_dict

from loopscale.machine import usable_cores

log = logging.getLogger("loopscale.launch.pool_launcher")


def pool_size(workers: int | None, threads_per_worker: int | None, n_jobs: int, cores: int) -> tuple[int, int]:
    """(workers, threads per worker): unset values from the core count, one torch thread per worker by
    default (module docstring), never more workers than jobs."""
    threads = threads_per_worker or 1
    if threads < 1 or (workers is not None and workers < 1):
        from loopscale.errors import ConfigError

        raise ConfigError(
            f"hydra.launcher.workers={workers} and hydra.launcher.threads_per_worker={threads_per_worker} "
            "must be >= 1 (or null: from the core count)"
        )
    workers = workers or max(1, cores // threads)
    return max(1, min(workers, n_jobs)), threads


def job_tokens(job_cfg: DictConfig) -> int:
    """Training tokens a job processes (its parent's and cooldowns' for a forked job): its share of the
    sweep's wall time, for the ETA and to hand out the longest jobs first; 1 for a config that is not a
    loopscale run (the test app)."""
    if "model" not in job_cfg or "budget" not in job_cfg:
        return 1
    from loopscale.config.schema import with_vocab
    from loopscale.train.plan import plan_forks, plan_run, to_train_config

    cfg = copy.deepcopy(job_cfg)
    with open_dict(cfg):
        cfg.pop("hydra", None)
    train_cfg = to_train_config(cfg)
    train_cfg = with_vocab(train_cfg, train_cfg.data.vocab_size)
    if train_cfg.budget.mode == "forks":
        plan = plan_forks(train_cfg)
        return max(1, round(plan.C_forked / plan.F))
    return max(1, plan_run(train_cfg).D)


def run_hydra_job(payload: bytes):
    """One Hydra job in a worker, as Hydra's basic launcher runs it; `payload` is the cloudpickled
    (hydra_context, task_function, job config, Hydra's singletons), as submitit sends them."""
    import cloudpickle
    from hydra.core.singleton import Singleton
    from hydra.core.utils import run_job, setup_globals

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
    import cloudpickle
    from hydra.core.singleton import Singleton
    from hydra.core.utils import configure_log, setup_globals

    from loopscale.errors import LoopscaleError
    from loopscale.launch.compile_order import schedule_hydra_jobs
    from loopscale.launch.launchers import refuse_over_limits
    from loopscale.signals import EXIT_INTERRUPTED, Terminated

    setup_globals()
    configure_log(launcher.config.hydra.hydra_logging, launcher.config.hydra.verbose)
    Path(str(launcher.config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
    # unset threads_per_worker: the jobs' own trainer.num_threads when the sweep sets it, else 1
    job_threads = int(OmegaConf.select(launcher.config, "trainer.num_threads", default=0) or 0)
    threads_per_worker = launcher.threads_per_worker or job_threads or None
    try:
        workers, threads = pool_size(launcher.workers, threads_per_worker, len(job_overrides), usable_cores())
        jobs = _job_configs(launcher, job_overrides, initial_job_idx, threads)
        refuse_over_limits(jobs, None)  # memory only (GPU runs): a local job's time limit is the user's own
    except LoopscaleError as err:  # the user's to fix: Hydra prints a compact error as one line
        raise CompactHydraException(str(err)) from None
    tokens = [job_tokens(job) for job in jobs]
    # longest first, the first job of each model before its others (seeds...), trainer.compile=auto resolved
    order = schedule_hydra_jobs(jobs, tokens)
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
        return _run_with_progress(launcher, jobs, order, payloads, tokens, workers, threads)
    except KeyboardInterrupt:
        print("loopscale-train: interrupted (the runs record it and resume on the next launch)", file=sys.stderr)
        raise SystemExit(EXIT_INTERRUPTED) from None
    except Terminated:
        print("loopscale-train: terminated", file=sys.stderr, flush=True)
        raise


def _run_with_progress(launcher, jobs, order, payloads, tokens, workers, threads) -> list:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from loopscale.launch.local_workers import run_in_workers

    results: list[Any] = [None] * len(jobs)
    console = Console(stderr=True)
    columns = [
        TextColumn("{task.description}"),
        BarColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    ]
    done = 0
    started = time.perf_counter()
    with Progress(*columns, console=console, disable=not launcher.progress) as progress:
        # the bar advances by each job's training tokens: the ETA weighs a long job more than a short one
        bar = progress.add_task(f"0/{len(jobs)} jobs", total=sum(tokens))
        pending = [(i, payloads[i]) for i in order]
        label = lambda item: _run_name(jobs[item[0]])  # noqa: E731
        with contextlib.closing(run_in_workers(_run_indexed, pending, workers, threads, label=label)) as finished:
            try:
                for (i, _), ret in finished:
                    ret = _job_return(ret, jobs[i])
                    results[i] = ret
                    done += 1
                    progress.advance(bar, tokens[i])
                    progress.update(bar, description=f"{done}/{len(jobs)} jobs")
                    progress.console.print(f"  {_run_name(jobs[i]):<28} {_outcome(ret)}")
            except KeyboardInterrupt:  # Ctrl-C while this loop, not the pool, ran: the pool's own Ctrl-C path
                finished.throw(KeyboardInterrupt())  # (runs recorded interrupted), which raises it on
    wall_s = time.perf_counter() - started
    log.info("local pool: %d job(s) in %.1f s (%d worker(s) x %d thread(s))", len(jobs), wall_s, workers, threads)
    return results


@dataclass(frozen=True)
class JobResult:
    """What comes back from a worker: plain data (a JobReturn holds configs and exceptions that need not
    unpickle in the parent)."""

    completed: bool
    value: Any = None  # the task function's return value when it is plain data (a loss), else None
    error: str = ""  # the failed job's exception, as one text


def _run_indexed(item: tuple[int, bytes]) -> JobResult:
    """run_hydra_job on (index, payload) as a JobResult; an error becomes the result, so one job cannot
    stop the pool (loopscale-train's task function records a failed run and raises RunFailed)."""
    try:
        ret = run_hydra_job(item[1])
    except Exception as err:  # Hydra's own set-up failed for this job
        return JobResult(False, error=f"{type(err).__name__}: {err}")
    from hydra.core.utils import JobStatus

    if ret.status == JobStatus.COMPLETED:
        plain = ret._return_value if isinstance(ret._return_value, (int, float, str, type(None))) else None
        return JobResult(True, plain)
    err = ret._return_value
    return JobResult(False, error=str(err) or type(err).__name__)


def _job_return(result: JobResult, job: DictConfig):
    from hydra.core.utils import JobReturn, JobStatus

    if result.completed:
        return JobReturn(status=JobStatus.COMPLETED, _return_value=result.value, hydra_cfg=job)
    # Hydra raises the first failed job's return value after the sweep; a compact error prints one line
    return JobReturn(status=JobStatus.FAILED, _return_value=CompactHydraException(result.error), hydra_cfg=job)


def _run_name(job: DictConfig) -> str:
    return str(job.get("run_name", job.hydra.job.get("override_dirname") or job.hydra.job.num))


def _outcome(ret) -> str:
    from hydra.core.utils import JobStatus

    if ret.status == JobStatus.COMPLETED:
        value = ret._return_value
        return f"done, L = {value:.4f}" if isinstance(value, float) else "done"
    return f"failed: {str(ret._return_value).splitlines()[0]}"
