"""`loopscale-train`: one Hydra command turns a compute budget into a finished, recorded run.

    loopscale-train                                   # the CPU default: model=cpu, budget=cpu, data=shakespeare
    loopscale-train model.r=4 model.recipe=tbptt budget.compute_flops=1e14
    loopscale-train -m experiment=isodepth_cpu        # a sweep (Hydra multirun), see loopscale/conf/experiment/

Flow: compose config -> prepare tokens (cached) -> plan (N_once, N_rec, F, D, steps from accounting) ->
Lightning fit (resuming from checkpoints/last.ckpt when present) -> final validation -> run.json.
A run whose run.json says done is not redone; a failed or diverged run is recorded with its reason.
budget.mode=forks (loopscale/forks.py): one stable-lr parent per model, then a cooldown branch per point.
"""

from __future__ import annotations

import errno
import logging
import warnings
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig

from loopscale.config import TrainConfig, register_configs, register_resolvers
from loopscale.config_dirs import config_dir
from loopscale.forks import run_forks

# planning and the run itself live below this entry point; re-exported here, where callers always found them
from loopscale.planning import CHECKPOINT, RunPlan, plan_run, run_dir_of, to_train_config  # noqa: F401
from loopscale.runner import fit_run, launching_rank, run_dir_lock, running_elsewhere, write_record_or_log

log = logging.getLogger("loopscale.train")


def _record_invalid_config(cfg: DictConfig | TrainConfig, err: ValueError) -> None:
    from loopscale.config import check_name

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


def run_training(cfg: DictConfig | TrainConfig) -> dict[str, Any]:
    """Train (or resume, or skip) the run described by `cfg`; return its run.json record.

    budget.mode=forks trains a stable parent and its cooldown branches instead (loopscale/forks.py) and
    returns the parent's record with the branches' records under "branches"."""
    from loopscale.identity import claim
    from loopscale.records import is_finished, read_record
    from loopscale.runlock import RunLocked

    try:
        cfg = to_train_config(cfg)
    except ValueError as err:  # an invalid sweep point: record why, so `collect` can say so
        _record_invalid_config(cfg, err)
        raise
    if cfg.budget.mode == "forks":
        return run_forks(cfg)
    run_dir = run_dir_of(cfg)
    try:
        with run_dir_lock(run_dir):  # one process per run dir, across nodes (loopscale/runlock.py)
            if launching_rank():
                claim(run_dir, cfg, restart=cfg.restart)  # resume or skip only a run of this same config
            if is_finished(run_dir):
                record = read_record(run_dir)
                log.info("run %s already finished (L=%.4f): nothing to do", run_dir, record["L"])
                return record
            return fit_run(cfg, run_dir)
    except RunLocked as err:
        return running_elsewhere(err, run_dir)


def _in_multirun() -> bool:
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


register_resolvers()
register_configs()
# Lightning warns on every run when `srun` is installed but the run is not a SLURM job step, and
# advertises a cloud logger on every Trainer: neither says anything about the run.
warnings.filterwarnings("ignore", message="The `srun` command is available")
logging.getLogger("lightning.pytorch.utilities.rank_zero").addFilter(lambda r: "litlogger" not in r.getMessage())


@hydra.main(version_base=None, config_path=str(config_dir()), config_name="train")
def main(cfg: DictConfig) -> float | None:
    """Hydra task function. In a multirun a failed run is recorded and the sweep goes on; alone it exits 1."""
    try:
        record = run_training(cfg)
    except KeyboardInterrupt:
        raise SystemExit("loopscale-train: interrupted") from None
    except Exception as err:
        if _in_multirun():
            log.error("run failed (recorded in run.json, sweep continues): %s", err)
            return None
        line = user_error_line(err)
        if line is not None:  # the user can fix it; a traceback would only bury the one line that matters
            raise SystemExit(f"loopscale-train: error: {line}") from None
        raise
    return record["L"]  # None for a forked job (its points are the branches' run.json)


DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES)


def user_error_line(err: BaseException) -> str | None:
    """One line for errors the user fixes outside the code (a full disk, a bad data path, a run dir that
    holds another config), else None."""
    from loopscale.corpus import DataError
    from loopscale.identity import IdentityMismatch

    if isinstance(err, OSError) and err.errno in DISK_ERRNOS:
        where = f" ({err.filename})" if err.filename else ""
        return f"{err.strerror or err}{where}; failure recorded in run.json where the disk allowed it"
    if isinstance(err, (DataError, IdentityMismatch)):
        return str(err)
    return None


if __name__ == "__main__":
    main()
