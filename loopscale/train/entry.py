"""`loopscale-train`: one Hydra command turns a compute budget into a finished, recorded run.

    loopscale-train                                   # the CPU default: model=cpu, budget=cpu, data=shakespeare
    loopscale-train model.r=4 model.recipe=tbptt budget.compute_flops=1e14
    loopscale-train -m experiment=isodepth_cpu        # a sweep (Hydra multirun), see sweeps/experiment/

Flow: compose config -> prepare tokens (cached) -> plan (N_once, N_rec, F, D, steps from accounting) ->
Lightning fit (resuming from checkpoints/last.ckpt when present) -> final validation -> run.json.
A run whose run.json says done is not redone; a failed or diverged run is recorded with its reason.
budget.mode=forks (loopscale/train/forks.py): one stable-lr parent per model, then a cooldown branch per point.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import sys
import warnings
from pathlib import Path

import hydra
import lightning  # noqa: F401  (its import adds the console handler that lightning_logs_once removes)
from hydra._internal.utils import run_and_report
from hydra.core.hydra_config import HydraConfig
from hydra.errors import CompactHydraException, ConfigCompositionException, MissingConfigException
from hydra.types import RunMode
from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException

from loopscale.config.dirs import config_dir, register_configs
from loopscale.config.naming import check_name
from loopscale.config.resolvers import register_resolvers
from loopscale.config.schema import TrainConfig
from loopscale.data.run_data import open_or_error
from loopscale.errors import UnknownName, exception_chain, user_error
from loopscale.signals import (
    EXIT_INTERRUPTED,
    EXIT_TERMINATED,
    Terminated,
    raise_on_sigterm,
    says_its_stop,
    stop_behind,
)
from loopscale.train.forks import run_forks
from loopscale.train.identity import IdentityMismatch, data_identity
from loopscale.train.lock import RunLocked

# planning and the run itself live below this entry point; re-exported here, where callers always found them
from loopscale.train.plan import run_dir_of, to_train_config  # noqa: F401
from loopscale.train.recording import write_record_or_log
from loopscale.train.refusals import refuse_before_the_stack
from loopscale.train.run_json import ForkedJob, RunRecord
from loopscale.train.runner import claimed_record, note_outcome, run_dir_lock, running_elsewhere, train_run

log = logging.getLogger("loopscale.train.entry")


def _record_invalid_config(cfg: DictConfig | TrainConfig, err: ValueError) -> None:
    if not isinstance(cfg, DictConfig):
        return
    try:
        check_name("sweep", cfg.sweep)
        check_name("run_name", cfg.run_name)  # an unsafe name has no run dir of its own to write to
        run_dir = Path(cfg.runs_dir) / cfg.sweep / cfg.run_name
    except Exception:  # the run name itself cannot be resolved or is unsafe: there is no run dir to write to
        return
    write_record_or_log(
        run_dir / "run.json",
        {
            "status": "failed",
            "reason": f"invalid config: {err}",
            "step": 0,
            "run_name": str(cfg.run_name),
            "sweep": str(cfg.sweep),
        },
    )


def run_training(cfg: DictConfig | TrainConfig) -> RunRecord | ForkedJob:
    """Train (or resume, or skip) the run described by `cfg`; return its record (run.json's RunRecord).

    budget.mode=forks trains a stable parent and its cooldown branches instead (loopscale/train/forks.py) and
    returns their records (ForkedJob)."""
    note_outcome(None)
    task_cfg = cfg  # Hydra's composed config, saved into the run dir's .hydra/ once the dir is claimed
    try:
        cfg = to_train_config(cfg)
    except ValueError as err:  # an invalid sweep point: record why, so `collect` can say so
        if not isinstance(err, UnknownName):  # a typo'd name is no point of the sweep: nothing to record
            _record_invalid_config(cfg, err)
        raise
    # the data is prepared (cached) and opened once, before any run: a job's parent and branches train on it
    run_data = open_or_error(cfg.data, cfg.model.seq_len, progress=cfg.trainer.progress)
    if cfg.budget.mode == "forks":
        return run_forks(cfg, run_data, task_cfg=task_cfg)
    run_dir = run_dir_of(cfg)
    data = data_identity(run_data)  # None: the run claims its dir without a data hash and records why (train_run)
    try:
        with run_dir_lock(run_dir):  # one process per run dir, across nodes (loopscale/train/lock.py)
            record = claimed_record(run_dir, cfg, data, task_cfg)  # resume or skip only this config on this data
            if record is not None:
                log.info("run %s already finished (L=%.4f): nothing to do", run_dir, record.L)
                note_outcome("skipped (done)")
                return record
            return train_run(cfg, run_dir, run_data)
    except RunLocked as err:
        note_outcome("running elsewhere")
        return running_elsewhere(err, run_dir)


def _in_multirun() -> bool:
    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


register_resolvers()
register_configs()
# Lightning warns on every run when `srun` is installed but the run is not a SLURM job step, and
# advertises a cloud logger on every Trainer: neither says anything about the run.
warnings.filterwarnings("ignore", message="The `srun` command is available")
logging.getLogger("lightning.pytorch.utilities.rank_zero").addFilter(lambda r: "litlogger" not in r.getMessage())


class RunFailed(CompactHydraException):
    """A run of a multirun failed or was refused. Hydra runs the sweep's other jobs, then ends with this
    one line (the first such run's) and exit code 1; a compact Hydra error prints no traceback."""


def main() -> None:
    """`loopscale-train`: Hydra's app below. A LOOPSCALE_CONFIG_PATH that names no directory is one line
    here, because Hydra reads its search path before its own error reporting starts. Ctrl-C and SIGTERM
    are one line and 130 / 143 from the start, also before a run or a sweep's pool has begun (Hydra composing
    the config, a launcher planning its jobs): nothing is recorded then, as nothing has started."""
    raise_on_sigterm()
    try:
        refuse_before_the_stack(sys.argv[1:])
        with _disk_errors_in_one_line():
            hydra_main()
    except KeyboardInterrupt:
        _exit_stopped("interrupted", EXIT_INTERRUPTED)
    except Terminated:
        _exit_stopped("terminated", EXIT_TERMINATED)


@contextlib.contextmanager
def _disk_errors_in_one_line():
    """A read-only, full or denied runs dir met in Hydra's own code (the job's log file, its run dir,
    multirun.yaml), before loopscale-train's task runs, as one line and exit 1 instead of Hydra's traceback;
    loopscale's own compact errors (a sweep's failed run, a launcher's refusal) as their line alone, exit 1; a
    config that cannot be composed as one line, exit 2.
    Hydra hands an error back only under HYDRA_FULL_ERROR, so that is set for the call; any other error is
    then reported by Hydra's own reporting, as without it. A user who set HYDRA_FULL_ERROR gets Hydra's."""
    if os.environ.get("HYDRA_FULL_ERROR"):
        yield
        return
    os.environ["HYDRA_FULL_ERROR"] = "1"
    try:
        yield
    except Exception as err:
        del os.environ["HYDRA_FULL_ERROR"]
        stop = stop_behind(err)
        if stop is not None:  # a stop raised inside Hydra's or omegaconf's own clean-up came out as its error
            raise stop from None
        disk = _disk_error(err)
        if disk is not None:
            print(f"loopscale-train: error: {disk}", file=sys.stderr)
            raise SystemExit(1) from None
        if isinstance(err, CompactHydraException) and str(err).startswith("loopscale-train: "):
            print(str(err), file=sys.stderr)  # loopscale's own line (a sweep's failed run, a refusal): alone
            raise SystemExit(1) from None
        if isinstance(err, (MissingConfigException, ConfigCompositionException, OmegaConfBaseException)):
            # a config that cannot be composed (a group's option, a key, a value): errors.user_error's one line,
            # with the options and the closest one, instead of Hydra's report
            print(f"loopscale-train: error: {user_error(err).line}", file=sys.stderr)
            raise SystemExit(2) from None

        run_and_report(functools.partial(_raise, err))  # what Hydra prints without HYDRA_FULL_ERROR, and its exit code
    finally:
        os.environ.pop("HYDRA_FULL_ERROR", None)


def _disk_error(err: BaseException) -> str | None:
    """The line of a disk error (errors.user_error) anywhere in the exception's chain: Hydra wraps the log
    file's OSError in a ValueError."""
    for link in exception_chain(err):
        found = user_error(link)
        if found is not None and found.disk:
            return found.line
    return None


def _raise(err: BaseException):
    raise err


@hydra.main(version_base=None, config_path=str(config_dir()), config_name="train")
def hydra_main(cfg: DictConfig) -> float | None:
    """Hydra task function. Alone, a failed run exits 1 with one line; in a multirun it is recorded, the
    sweep goes on, and the sweep exits 1 at the end (RunFailed). Ctrl-C exits 130 and SIGTERM 143, each
    recorded in run.json as interrupted / terminated (loopscale/signals.py); a multirun stops there."""
    raise_on_sigterm()
    lightning_logs_once()
    try:
        record = run_training(cfg)
    except KeyboardInterrupt:
        _exit_stopped("interrupted", EXIT_INTERRUPTED)
    except Terminated:
        _exit_stopped("terminated", EXIT_TERMINATED)
    except Exception as err:
        found = user_error(err)
        line = None if found is None else found.line + (DISK_TAIL if found.disk else "")
        if _in_multirun():
            written = "nothing written" if isinstance(err, IdentityMismatch) else "recorded in its run.json"
            log.error("run failed (%s; the sweep goes on): %s", written, err)
            first = (line or str(err) or type(err).__name__).splitlines()[0]
            name = _run_name_or_none(cfg)
            first = first if name is None or name in first else f"{name}: {first}"
            raise RunFailed(f"loopscale-train: a run of this sweep failed ({written}): {first}") from None
        if line is not None:  # the user can fix it; a traceback would only bury the one line that matters
            raise SystemExit(f"loopscale-train: error: {line}") from None
        raise
    return record.L if isinstance(record, RunRecord) else None  # a forked job's points are its branches' run.json


def _run_name_or_none(cfg: DictConfig) -> str | None:
    """The job's run name, to say which run of a sweep failed; None when it cannot be resolved."""
    try:
        return str(cfg.run_name)
    except Exception:  # an interpolation that fails is itself the error being reported
        return None


def lightning_logs_once() -> None:
    """Lightning's top-level logger ("lightning") has a console handler of its own ("INFO: GPU available:
    ..."), and its records also reach the root logger, to which Hydra gives a console and a file handler:
    every Lightning line came out twice. With the root logger set up, Lightning's own console handlers go
    and its loggers propagate, so each line is printed once and still reaches the job's log file."""
    if not logging.getLogger().handlers:
        return
    lightning_to_root()


def lightning_to_root() -> None:
    """Lightning's own console handlers removed and its loggers propagating: its lines reach the root logger's
    handlers only, which decide where they go (Hydra's console and job log; a pool worker's job log)."""
    for name in ("lightning", "lightning.pytorch", "lightning.fabric"):
        logger = logging.getLogger(name)
        for handler in list(logger.handlers):
            if type(handler) is logging.StreamHandler:  # a console handler, not a file one
                logger.removeHandler(handler)
        logger.propagate = True


def _exit_stopped(what: str, code: int) -> None:
    """One line and the signal's exit code; in a multirun this stops the whole sweep, as the user asked. In a
    local pool's worker the pool says the line, once for the sweep (signals.stop_line_in_parent)."""
    if says_its_stop():
        print(f"loopscale-train: {what}", file=sys.stderr, flush=True)
    raise SystemExit(code) from None


DISK_TAIL = "; failure recorded in run.json where the disk allowed it"


if __name__ == "__main__":
    main()
