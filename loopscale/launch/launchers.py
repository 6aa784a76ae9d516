"""Hydra's submitit launchers with the job layout checked before anything is submitted.

Lightning runs one process per device and takes its ranks and world size from srun (SLURM_PROCID,
SLURM_NTASKS), so a SLURM job must have `tasks_per_node = trainer.devices` tasks on `nodes = trainer.num_nodes`
nodes, with `trainer.devices` GPUs per node when it trains on GPUs. loopscale/conf/hydra/launcher/slurm.yaml takes
nodes and tasks_per_node from trainer.num_nodes and trainer.devices (one place), and these launchers compose
every job of the sweep before submitting and raise `LayoutError` naming the fields when a job disagrees
with the launcher (e.g. `hydra.launcher.tasks_per_node=1` with `trainer=gpu_ddp`, or a sweep over
trainer.devices, which one launcher cannot serve). They also:
- pass `--cpus-per-task` to srun (Slurm 22.05's srun no longer inherits it from sbatch: each task would get
  one core),
- set `mem_gb` (memory per node) from the largest job's plan when it is null (every rank loads the resume
  checkpoint into host memory),
- take `gpus_per_node` from the jobs when it is null: trainer.devices for GPU runs, 0 for CPU runs.

The local launcher (submitit_local) gives each job its own GPUs: jobs run at most
(visible GPUs // trainer.devices) at a time, each with CUDA_VISIBLE_DEVICES set to a distinct block.

The launcher classes live in hydra_plugins/loopscale_launchers.py (Hydra instantiates launchers only
from its plugin namespace); the rules are here.
"""

from __future__ import annotations

import copy
import logging
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, open_dict

from loopscale.config.schema import with_vocab
from loopscale.errors import ConfigError
from loopscale.launch.estimate import launch_problems
from loopscale.train.batching import GPU_ACCELERATORS
from loopscale.train.job_plan import plan_job
from loopscale.train.plan import to_train_config

log = logging.getLogger(__name__)

# Host memory per task besides the checkpoint: Python, torch, Lightning and the CUDA runtime's host side
# (measured ~1.5 GB RSS for the CPU process here; the CUDA context adds ~1-2 GB), with headroom.
HOST_BASE_GB_PER_TASK = 4.0
# A resume reads the checkpoint (fp32 weights + AdamW's two moments: 12 bytes per parameter) into host
# memory, and torch.load holds it while the state dicts are copied: budget twice that per task.
CHECKPOINT_BYTES_PER_PARAM = 12


class LayoutError(ConfigError):
    """A job's trainer layout (devices, num_nodes, accelerator) does not match the launcher's request."""


@dataclass(frozen=True)
class JobLayout:
    devices: int
    num_nodes: int
    accelerator: str
    params: int | None  # the model's parameter count N (None for configs without a loopscale model)


def host_memory_gb(params: int, tasks_per_node: int) -> int:
    """Memory per node (GB, rounded up) for `tasks_per_node` ranks of a model with `params` parameters."""
    per_task = HOST_BASE_GB_PER_TASK + 2 * CHECKPOINT_BYTES_PER_PARAM * params / 1e9
    return math.ceil(tasks_per_node * per_task)


def job_layout(job_cfg: DictConfig) -> JobLayout:
    """The layout one composed job config asks Lightning for."""
    trainer = job_cfg.trainer
    params = None
    if "model" in job_cfg and "budget" in job_cfg:  # a loopscale run: its plan knows N
        cfg = copy.deepcopy(job_cfg)
        with open_dict(cfg):
            cfg.pop("hydra", None)
        params = plan_job(to_train_config(cfg)).run.N
    return JobLayout(
        int(trainer.devices), int(trainer.get("num_nodes", 1)), str(trainer.get("accelerator", "cpu")), params
    )


def sweep_layout(layouts: Sequence[JobLayout]) -> JobLayout:
    """The one layout all jobs of a sweep share (one launcher submits them all), with the largest model."""
    kinds = {(x.devices, x.num_nodes, x.accelerator) for x in layouts}
    if len(kinds) > 1:
        raise LayoutError(
            "the jobs of one sweep must share trainer.devices, trainer.num_nodes and trainer.accelerator (one "
            f"launcher submits them all with one request); this sweep has {sorted(kinds)}: run one sweep per layout"
        )
    sizes = [x.params for x in layouts if x.params is not None]
    first = layouts[0]
    return JobLayout(first.devices, first.num_nodes, first.accelerator, max(sizes) if sizes else None)


def check_slurm_params(params: dict[str, Any], layout: JobLayout) -> dict[str, Any]:
    """The launcher's parameters made consistent with the jobs' layout; LayoutError on a contradiction."""
    out = dict(params)
    if out.get("gpus_per_node") is None:
        out["gpus_per_node"] = layout.devices if layout.accelerator in GPU_ACCELERATORS else 0
    problems = []
    if out["tasks_per_node"] != layout.devices:
        problems.append(
            f"hydra.launcher.tasks_per_node={out['tasks_per_node']} but trainer.devices={layout.devices} "
            "(Lightning runs one srun task per device)"
        )
    if out["nodes"] != layout.num_nodes:
        problems.append(f"hydra.launcher.nodes={out['nodes']} but trainer.num_nodes={layout.num_nodes}")
    if layout.accelerator in GPU_ACCELERATORS and out["gpus_per_node"] != layout.devices:
        problems.append(
            f"hydra.launcher.gpus_per_node={out['gpus_per_node']} but trainer.devices={layout.devices} "
            f"GPUs per node (trainer.accelerator={layout.accelerator})"
        )
    if layout.accelerator == "cpu" and out["gpus_per_node"]:
        problems.append(
            f"hydra.launcher.gpus_per_node={out['gpus_per_node']} GPUs for a trainer.accelerator=cpu "
            "run, which would leave them idle"
        )
    if problems:
        raise LayoutError(
            "launcher and trainer disagree: " + "; ".join(problems) + ". Set trainer.devices / "
            "trainer.num_nodes only: loopscale/conf/hydra/launcher/slurm.yaml takes tasks_per_node and nodes "
            "from them"
        )
    if layout.params is not None:
        needed = host_memory_gb(layout.params, layout.devices)
        if out.get("mem_gb") is None:
            out["mem_gb"] = needed
        elif out["mem_gb"] < needed:
            log.warning(
                "hydra.launcher.mem_gb=%s is below the estimated %d GB per node (%d tasks, N = %.3g: "
                "resume checkpoints are read into host memory)",
                out["mem_gb"],
                needed,
                layout.devices,
                layout.params,
            )
    cpus = out.get("cpus_per_task")
    if cpus:  # Slurm 22.05's srun does not inherit --cpus-per-task from the allocation
        out["srun_args"] = [*(out.get("srun_args") or []), f"--cpus-per-task={cpus}"]
    return out


class UnsafeSubmititFolder(ConfigError):
    """submitit's folder could be written by another user, who could then run code as the submitting one."""


def check_submitit_folder(folder: Any) -> None:
    """submitit unpickles the job files in its folder at every job start and requeue: a folder (or a folder
    above it) that another user may write lets that user run code as you. Refuse one that is group- or
    world-writable without the sticky bit, or owned by someone else; create the folder itself private
    (0700). The default (launcher/*.yaml) is ~/.loopscale/submitit, outside the shared runs dir."""
    if not folder:
        return
    parts = Path(str(folder)).expanduser().parts
    base = Path(*parts[: next((i for i, p in enumerate(parts) if "%" in p), len(parts))])
    base.mkdir(mode=0o700, parents=True, exist_ok=True)
    for path in (base, *base.resolve().parents):
        st = path.stat()
        shared = st.st_mode & 0o022 and not st.st_mode & 0o1000
        if shared or st.st_uid not in (os.getuid(), 0):
            who = "others can write it" if shared else f"it belongs to uid {st.st_uid}"
            raise UnsafeSubmititFolder(
                f"hydra.launcher.submitit_folder={folder}: {path} is not private ({who}), and submitit runs "
                "the job files it finds there; use a folder only you can write (the default is "
                "~/.loopscale/submitit, or set LOOPSCALE_SUBMITIT_DIR)"
            )


def compose_jobs(launcher, job_overrides: Sequence[Sequence[str]]) -> list[DictConfig]:
    """Every job composed as the launcher will run it (~0.1 s a job). Checks the submitit folder first
    (check_submitit_folder)."""
    check_submitit_folder(launcher.params.get("submitit_folder"))
    loader = launcher.hydra_context.config_loader
    return [loader.load_sweep_config(launcher.config, list(overrides)) for overrides in job_overrides]


class LaunchRefused(ConfigError):
    """Jobs predicted not to fit their device's memory or not to finish within the launcher's time limits."""


def refuse_over_limits(job_cfgs: Sequence[DictConfig], limits) -> None:
    """Raise LaunchRefused, before anything is submitted, when a loopscale job of the sweep is predicted not
    to fit trainer.plan_device or not to finish within `limits` (a launch.LaunchLimits, or None), naming
    each job's numbers and the overrides that let it through (loopscale/launch/estimate.py)."""
    problems = []
    for job_cfg in job_cfgs:
        if "model" not in job_cfg or "budget" not in job_cfg:
            continue  # not a loopscale run (the test app)
        cfg = copy.deepcopy(job_cfg)
        with open_dict(cfg):
            cfg.pop("hydra", None)
        train_cfg = to_train_config(cfg)
        problems += launch_problems(with_vocab(train_cfg, train_cfg.data.vocab_size), limits)
    if problems:
        raise LaunchRefused(
            f"refused before submission ({len(problems)} problem(s) in {len(job_cfgs)} jobs):\n  "
            + "\n  ".join(problems)
        )


def gpu_blocks(n_gpus: int, devices: int) -> list[tuple[int, ...]]:
    """Disjoint blocks of `devices` GPU indices out of `n_gpus` (what runs at once on this machine)."""
    if devices < 1 or n_gpus < devices:
        raise LayoutError(f"trainer.devices={devices} GPUs per job, but this machine shows {n_gpus} GPU(s)")
    return [tuple(range(b * devices, (b + 1) * devices)) for b in range(n_gpus // devices)]
