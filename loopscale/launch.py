"""Will each job of a sweep finish inside its launcher's limits? An estimate before anything is submitted.

A job's compute is C = F x D (its plan; for a forked job the parent plus every cooldown branch). At an
assumed model-FLOPs utilisation u (trainer.assumed_mfu) on `world` devices of dense bf16 peak P (the device
named by trainer.plan_device, loopscale/mfu.py):

    GPU hours = C / (u P) / 3600,      wall time = C / (u P world)

A SLURM job gets timeout_min per attempt and is requeued at most max_num_timeout times (the composed
hydra.launcher config), so it has (max_num_timeout + 1) x timeout_min of wall time, less what each requeue
loses: the steps since the last checkpoint (at most ckpt_every_steps steps, or ckpt_every_minutes when that
is sooner) plus the restart and recompile (RESTART_S).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loopscale.config import TrainConfig
from loopscale.mfu import peak_flops

RESTART_S = 600.0  # per requeue: queue-to-start, imports, data open and torch.compile of the model (estimate)


@dataclass(frozen=True)
class LaunchLimits:
    timeout_min: float  # one attempt's wall-clock limit
    max_num_timeout: int  # requeues after a timeout


@dataclass(frozen=True)
class JobEstimate:
    run_name: str
    C: float  # FLOPs the job trains
    gpu_hours: float
    wall_h: float  # on its `world` devices
    allowed_h: float | None  # usable wall time within the launcher's limits; None: no limit known

    @property
    def fits(self) -> bool:
        return self.allowed_h is None or self.wall_h <= self.allowed_h


def launch_limits(hydra_cfg: Any) -> LaunchLimits | None:
    """The time limits of the composed `hydra` node's launcher; None for a launcher without a timeout."""
    launcher = hydra_cfg.get("launcher") or {}
    timeout_min = launcher.get("timeout_min")
    if timeout_min is None:
        return None
    return LaunchLimits(float(timeout_min), int(launcher.get("max_num_timeout") or 0))


def job_compute_flops(cfg: TrainConfig) -> float:
    """Everything the job trains: its run's C, or a forked job's parent + branches."""
    from loopscale.planning import plan_run

    if cfg.budget.mode == "forks":
        from loopscale.planning import plan_forks

        return plan_forks(cfg).C_forked
    return plan_run(cfg).C


def estimate_job(cfg: TrainConfig, limits: LaunchLimits | None, C: float | None = None) -> JobEstimate:
    """The job's GPU hours and wall time at trainer.assumed_mfu on trainer.plan_device, and the wall time its
    launcher allows after requeue losses."""
    peak = peak_flops(cfg.trainer.plan_device)
    if peak is None:
        raise ValueError(
            f"trainer.plan_device={cfg.trainer.plan_device!r} has no known bf16 peak; use one of the "
            "names in loopscale/mfu.py PEAK_BF16_FLOPS"
        )
    C = job_compute_flops(cfg) if C is None else C
    world = cfg.trainer.devices * cfg.trainer.num_nodes
    device_s = C / (cfg.trainer.assumed_mfu * peak)
    wall_s = device_s / world
    allowed_h = None
    if limits is not None:
        from loopscale.planning import plan_run

        steps = max(1, plan_run(cfg).steps)
        step_s = wall_s / steps  # forked jobs: the parent's steps, a fair per-step time
        lost_s = cfg.trainer.ckpt_every_steps * step_s
        if cfg.trainer.ckpt_every_minutes:
            lost_s = min(lost_s, cfg.trainer.ckpt_every_minutes * 60)
        attempts = limits.max_num_timeout + 1
        allowed_s = attempts * limits.timeout_min * 60 - limits.max_num_timeout * (lost_s + RESTART_S)
        allowed_h = allowed_s / 3600
    return JobEstimate(cfg.run_name, C, device_s / 3600, wall_s / 3600, allowed_h)


def limit_warning(estimate: JobEstimate, limits: LaunchLimits, cfg: TrainConfig) -> str | None:
    """A one-line warning for a job that cannot finish in its launcher's limits, else None."""
    if estimate.fits:
        return None
    return (
        f"job {estimate.run_name} needs ~{estimate.wall_h:.1f} h on {cfg.trainer.devices * cfg.trainer.num_nodes} "
        f"x {cfg.trainer.plan_device} at MFU {cfg.trainer.assumed_mfu:g} (C={estimate.C:.3g} FLOPs, "
        f"{estimate.gpu_hours:.1f} GPU h) but the launcher allows {limits.max_num_timeout + 1} x "
        f"{limits.timeout_min:g} min = {estimate.allowed_h:.1f} h after requeue losses: raise "
        f"hydra.launcher.timeout_min or max_num_timeout, or add devices"
    )


def launcher_limits_of(overrides: list[str]) -> LaunchLimits | None:
    """The launcher limits a `loopscale-train -m OVERRIDES` would run under (sweep overrides left out)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from loopscale.config_dirs import compose

    given = OverridesParser.create().parse_overrides(overrides)
    fixed = [o.input_line for o in given if not o.is_sweep_override()]
    return launch_limits(compose(fixed, return_hydra_config=True).hydra)


def limit_warnings(cfgs: list[TrainConfig], limits: LaunchLimits | None) -> list[str]:
    """The warning of every job in `cfgs` that cannot finish within `limits`."""
    if limits is None:
        return []
    warnings = (limit_warning(estimate_job(cfg, limits), limits, cfg) for cfg in cfgs)
    return [w for w in warnings if w]


def print_limit_warnings(cfgs: list[TrainConfig], limits: LaunchLimits | None) -> int:
    """Print each warning of `limit_warnings` to stderr (before anything is submitted); returns their count."""
    import sys

    found = limit_warnings(cfgs, limits)
    for warning in found:
        print(f"WARNING: {warning}", file=sys.stderr)
    if found:
        print(f"WARNING: {len(found)} of {len(cfgs)} jobs cannot finish within the launcher's limits", file=sys.stderr)
    return len(found)
