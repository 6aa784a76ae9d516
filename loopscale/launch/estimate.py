"""Will each job finish, and fit, inside its launcher's limits? Estimates before anything is submitted.

Time. A job's compute is its training C = F x D (its plan; for a forked job the parent plus every cooldown
branch) plus its validation: every trainer.val_every_steps steps a forward over the intermediate subset
(trainer.val_subset of the final set), and once at the end a forward over the whole final set (data.val_rows
packed rows, or data.val_tokens of windows), each token at accounting.eval_flops_per_token; and its scoring
(`job_plan.scoring_flops`): the loss curve's evaluations, every r_eval of trainer.curve_r_eval at its own forward
FLOPs per token, and the final set again at each other r_eval of trainer.r_eval. At an assumed
model-FLOPs utilisation u (trainer.assumed_mfu) on `world` devices of dense bf16 peak P (trainer.plan_device,
loopscale/train/mfu.py), plus COMPILE_S[trainer.compile] for torch.compile:

    device hours = (C_train + C_val) / (u P) / 3600,      wall time = (C_train + C_val) / (u P world) + compile

A SLURM job gets timeout_min per attempt and is requeued at most max_num_timeout times (the composed
hydra.launcher config), so it has (max_num_timeout + 1) x timeout_min of wall time, less what each requeue
loses: the steps since the last checkpoint (at most ckpt_every_steps steps, or ckpt_every_minutes when that
is sooner), the restart (RESTART_S) and the compile again.

Memory. A GPU job's predicted peak (loopscale/model/memory.py) at its device batch must fit trainer.plan_device's
usable memory.

`launch_problems` says, per job, what does not fit, with the numbers and the override that lets it through;
hydra_plugins/loopscale_launchers.py refuses such a sweep before sbatch, `loopscale sweep` and `plan` warn.
Both checks are for GPU trainers (trainer.accelerator=gpu): a CPU job's speed is not the plan device's.
trainer.check_limits=false submits anyway.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser

from loopscale.config.dirs import compose
from loopscale.config.schema import TrainConfig
from loopscale.data.heldout import final_val_sequences, intermediate_validations, subset_count
from loopscale.errors import ConfigError
from loopscale.model.accounting import eval_flops_per_token
from loopscale.model.memory import GIB, MARGIN, estimate_memory, usable_memory
from loopscale.train.batching import candidate_device_batches, on_gpu, split_and_memory
from loopscale.train.job_plan import JobPlan, plan_job, scoring_flops
from loopscale.train.mfu import peak_flops

RESTART_S = 300.0  # per requeue besides compiling: queue-to-start, imports, data open, checkpoint load
# torch.compile per attempt (estimates for one GPU node; benchmarks/gpu_check.py measures them):
# blocks: one graph per layer shape and variant; model: the whole unrolled forward and backward
# auto: "model" on GPUs (loopscale/train/compiling.py), at most that on CPU
COMPILE_S = {False: 0.0, "blocks": 180.0, "model": 600.0, "auto": 600.0}


@dataclass(frozen=True)
class LaunchLimits:
    timeout_min: float  # one attempt's wall-clock limit
    max_num_timeout: int  # requeues after a timeout

    @property
    def attempts(self) -> int:
        return self.max_num_timeout + 1


@dataclass(frozen=True)
class JobEstimate:
    run_name: str
    C: float  # FLOPs the job trains
    C_val: float  # FLOPs of its validations (intermediate subsets, the final set) and scoring (curves, r_eval)
    gpu_hours: float  # device hours of training + validation
    compile_h: float  # torch.compile, once per attempt
    wall_h: float  # on its `world` devices, compile included
    allowed_h: float | None  # usable wall time within the launcher's limits; None: no limit known
    requeue_loss_h: float = 0.0  # what each requeue costs: steps since the checkpoint, restart, compile

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


def validation_tokens(cfg: TrainConfig, steps: int) -> int:
    """Tokens the job validates on: the intermediate subsets every val_every_steps (not at the last step)
    and the final set once (loopscale/data/heldout.py)."""
    final = final_val_sequences(cfg.data, cfg.model.seq_len)
    subset = subset_count(final, cfg.trainer.val_subset)
    return (final + intermediate_validations(steps, cfg.trainer.val_every_steps) * subset) * cfg.model.seq_len


def estimate_job(cfg: TrainConfig, limits: LaunchLimits | None, job: JobPlan | None = None) -> JobEstimate:
    """The job's device hours and wall time (training, validation, compile) at trainer.assumed_mfu on
    trainer.plan_device, and the wall time its launcher allows after requeue losses. `job`: its plan, when the
    caller has it (else planned here)."""
    peak = peak_flops(cfg.trainer.plan_device)
    if peak is None:
        raise ConfigError(
            f"trainer.plan_device={cfg.trainer.plan_device!r} has no known bf16 peak; use one of the "
            "names in loopscale/train/mfu.py PEAK_BF16_FLOPS"
        )
    job = plan_job(cfg) if job is None else job
    C = job.flops  # everything the job trains: its run's C, or a forked job's parent + branches
    steps = max(1, job.run.steps)  # forked jobs: the parent's steps, a fair per-step time
    final = final_val_sequences(cfg.data, cfg.model.seq_len)
    C_val = validation_tokens(cfg, steps) * eval_flops_per_token(cfg.model) + scoring_flops(job, final)
    world = cfg.trainer.devices * cfg.trainer.num_nodes
    device_s = (C + C_val) / (cfg.trainer.assumed_mfu * peak)
    compile_s = COMPILE_S[cfg.trainer.compile]
    wall_s = device_s / world + compile_s
    allowed_h = None
    if limits is not None:
        lost_s = cfg.trainer.ckpt_every_steps * C / steps / (cfg.trainer.assumed_mfu * peak * world)
        if cfg.trainer.ckpt_every_minutes:
            lost_s = min(lost_s, cfg.trainer.ckpt_every_minutes * 60)
        loss_h = (lost_s + RESTART_S + compile_s) / 3600
        allowed_h = limits.attempts * limits.timeout_min / 60 - limits.max_num_timeout * loss_h
        return JobEstimate(cfg.run_name, C, C_val, device_s / 3600, compile_s / 3600, wall_s / 3600, allowed_h, loss_h)
    return JobEstimate(cfg.run_name, C, C_val, device_s / 3600, compile_s / 3600, wall_s / 3600, allowed_h)


def needed_limits(estimate: JobEstimate, limits: LaunchLimits) -> tuple[int, int]:
    """(timeout_min, max_num_timeout), each the smallest that lets the job finish with the other as it is:
    attempts x timeout - requeues x loss >= wall."""
    wall, loss, requeues = estimate.wall_h, estimate.requeue_loss_h, limits.max_num_timeout
    timeout_min = math.ceil((wall + requeues * loss) / (requeues + 1) * 60)
    gain = limits.timeout_min / 60 - loss  # what one more attempt adds
    needed = math.ceil((wall - limits.timeout_min / 60) / gain) if gain > 0 else requeues
    return timeout_min, max(needed, requeues)


def limit_warning(estimate: JobEstimate, limits: LaunchLimits, cfg: TrainConfig) -> str | None:
    """A one-line message for a job that cannot finish in its launcher's limits, else None: the numbers and
    the overrides that let it through."""
    if estimate.fits:
        return None
    timeout, requeues = needed_limits(estimate, limits)
    return (
        f"job {estimate.run_name} needs ~{estimate.wall_h:.1f} h on {cfg.trainer.devices * cfg.trainer.num_nodes} "
        f"x {cfg.trainer.plan_device} at trainer.assumed_mfu={cfg.trainer.assumed_mfu:g} (training C="
        f"{estimate.C:.3g} + validation {estimate.C_val:.3g} FLOPs = {estimate.gpu_hours:.1f} GPU h, compile "
        f"{estimate.compile_h * 60:.0f} min) but the launcher allows {limits.attempts} x {limits.timeout_min:g} min = "
        f"{estimate.allowed_h:.1f} h after requeue losses: set hydra.launcher.timeout_min={timeout} or "
        f"hydra.launcher.max_num_timeout={requeues} (or trainer.check_limits=false to submit it anyway)"
    )


def memory_problem(cfg: TrainConfig) -> str | None:
    """A one-line message for a GPU job whose predicted peak does not fit trainer.plan_device, else None."""
    if not on_gpu(cfg.trainer):
        return None
    batching, peak = split_and_memory(cfg.budget, cfg.model, cfg.trainer, cfg.optim.optimizer)
    world = batching.world
    usable = usable_memory(cfg.trainer.plan_device)
    if peak.peak <= usable:
        return None
    smaller = [
        b
        for b in candidate_device_batches(cfg.model, batching.device_batch * batching.grad_accum)
        if estimate_memory(cfg.model, b, cfg.trainer.compile, cfg.optim.optimizer, True, world).peak <= usable
    ]
    fix = f"set budget.device_batch={smaller[0]}" if smaller else "use a larger trainer.plan_device"
    return (
        f"job {cfg.run_name} is predicted to need {peak.peak / GIB:.1f} GiB per device at device batch "
        f"{batching.device_batch} (compile={cfg.trainer.compile}, optim={cfg.optim.optimizer}; "
        "loopscale/model/memory.py) "
        f"but {cfg.trainer.plan_device} has {usable / GIB:.1f} GiB usable ({1 - MARGIN:.0%} of its memory): "
        f"{fix} (or trainer.check_limits=false to submit it anyway)"
    )


def launch_problems(cfg: TrainConfig, limits: LaunchLimits | None) -> list[str]:
    """Why this GPU job should not be submitted under `limits` (time) and its plan device (memory); empty when
    it fits, for CPU jobs, and with trainer.check_limits=false."""
    if not (cfg.trainer.check_limits and on_gpu(cfg.trainer)):
        return []
    problems = [memory_problem(cfg)]
    if limits is not None:
        problems.append(limit_warning(estimate_job(cfg, limits), limits, cfg))
    return [p for p in problems if p]


def launcher_limits_of(overrides: list[str]) -> LaunchLimits | None:
    """The launcher limits a `loopscale-train -m OVERRIDES` would run under (sweep overrides left out)."""
    given = OverridesParser.create().parse_overrides(overrides)
    fixed = [o.input_line for o in given if not o.is_sweep_override()]
    return launch_limits(compose(fixed, return_hydra_config=True).hydra)


def limit_warnings(cfgs: list[TrainConfig], limits: LaunchLimits | None) -> list[str]:
    """The message of every job in `cfgs` that cannot finish within `limits` or does not fit its device."""
    return [problem for cfg in cfgs for problem in launch_problems(cfg, limits)]


def print_limit_warnings(cfgs: list[TrainConfig], limits: LaunchLimits | None) -> int:
    """Print each warning of `limit_warnings` to stderr (before anything is submitted); returns their count."""
    found = limit_warnings(cfgs, limits)
    for warning in found:
        print(f"WARNING: {warning}", file=sys.stderr)
    if found:
        print(
            f"WARNING: {len(found)} problem(s) in {len(cfgs)} jobs: they would be refused at submission",
            file=sys.stderr,
        )
    return len(found)
