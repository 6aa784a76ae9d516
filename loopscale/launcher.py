"""Hydra's submitit launchers with the job layout checked before anything is submitted.

Lightning runs one process per device and takes its ranks and world size from srun (SLURM_PROCID,
SLURM_NTASKS), so a SLURM job must have `tasks_per_node = trainer.devices` tasks on `nodes = trainer.num_nodes`
nodes, with `trainer.devices` GPUs per node when it trains on GPUs. sweeps/hydra/launcher/slurm.yaml takes
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
"""

from __future__ import annotations

import copy
import logging
import math
import queue
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Sequence

from hydra_plugins.hydra_submitit_launcher.submitit_launcher import LocalLauncher, SlurmLauncher
from omegaconf import DictConfig, open_dict

log = logging.getLogger(__name__)

# Host memory per task besides the checkpoint: Python, torch, Lightning and the CUDA runtime's host side
# (measured ~1.5 GB RSS for the CPU process here; the CUDA context adds ~1-2 GB), with headroom.
HOST_BASE_GB_PER_TASK = 4.0
# A resume reads the checkpoint (fp32 weights + AdamW's two moments: 12 bytes per parameter) into host
# memory, and torch.load holds it while the state dicts are copied: budget twice that per task.
CHECKPOINT_BYTES_PER_PARAM = 12
GPU_ACCELERATORS = ("gpu", "cuda")


class LayoutError(ValueError):
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
        from loopscale.train import plan_run, to_train_config

        cfg = copy.deepcopy(job_cfg)
        with open_dict(cfg):
            cfg.pop("hydra", None)
        params = plan_run(to_train_config(cfg)).N
    return JobLayout(int(trainer.devices), int(trainer.get("num_nodes", 1)), str(trainer.get("accelerator", "cpu")),
                     params)


def sweep_layout(layouts: Sequence[JobLayout]) -> JobLayout:
    """The one layout all jobs of a sweep share (one launcher submits them all), with the largest model."""
    kinds = {(x.devices, x.num_nodes, x.accelerator) for x in layouts}
    if len(kinds) > 1:
        raise LayoutError(
            "the jobs of one sweep must share trainer.devices, trainer.num_nodes and trainer.accelerator (one "
            f"launcher submits them all with one request); this sweep has {sorted(kinds)}: run one sweep per layout")
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
        problems.append(f"hydra.launcher.tasks_per_node={out['tasks_per_node']} but trainer.devices={layout.devices} "
                        "(Lightning runs one srun task per device)")
    if out["nodes"] != layout.num_nodes:
        problems.append(f"hydra.launcher.nodes={out['nodes']} but trainer.num_nodes={layout.num_nodes}")
    if layout.accelerator in GPU_ACCELERATORS and out["gpus_per_node"] != layout.devices:
        problems.append(f"hydra.launcher.gpus_per_node={out['gpus_per_node']} but trainer.devices={layout.devices} "
                        f"GPUs per node (trainer.accelerator={layout.accelerator})")
    if layout.accelerator == "cpu" and out["gpus_per_node"]:
        problems.append(f"hydra.launcher.gpus_per_node={out['gpus_per_node']} GPUs for a trainer.accelerator=cpu "
                        "run, which would leave them idle")
    if problems:
        raise LayoutError("launcher and trainer disagree: " + "; ".join(problems) + ". Set trainer.devices / "
                          "trainer.num_nodes only: sweeps/hydra/launcher/slurm.yaml takes tasks_per_node and nodes "
                          "from them")
    if layout.params is not None:
        needed = host_memory_gb(layout.params, layout.devices)
        if out.get("mem_gb") is None:
            out["mem_gb"] = needed
        elif out["mem_gb"] < needed:
            log.warning("hydra.launcher.mem_gb=%s is below the estimated %d GB per node (%d tasks, N = %.3g: "
                        "resume checkpoints are read into host memory)", out["mem_gb"], needed, layout.devices,
                        layout.params)
    cpus = out.get("cpus_per_task")
    if cpus:  # Slurm 22.05's srun does not inherit --cpus-per-task from the allocation
        out["srun_args"] = [*(out.get("srun_args") or []), f"--cpus-per-task={cpus}"]
    return out


def _compose_layouts(launcher, job_overrides: Sequence[Sequence[str]]) -> JobLayout:
    layouts = []
    for overrides in job_overrides:
        job_cfg = launcher.hydra_context.config_loader.load_sweep_config(launcher.config, list(overrides))
        layouts.append(job_layout(job_cfg))
    return sweep_layout(layouts)


class CheckedSlurmLauncher(SlurmLauncher):
    """hydra-submitit-launcher's SLURM launcher, with the sweep's layout checked and completed first."""

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int):
        layout = _compose_layouts(self, job_overrides)
        self.params = check_slurm_params(self.params, layout)
        log.info("SLURM layout: %d node(s) x %d task(s), %s GPU(s) per node, %s CPUs per task, mem %s GB per node",
                 self.params["nodes"], self.params["tasks_per_node"], self.params["gpus_per_node"],
                 self.params.get("cpus_per_task"), self.params.get("mem_gb"))
        return super().launch(job_overrides, initial_job_idx)


def visible_gpu_count() -> int:
    import torch

    return torch.cuda.device_count()


class GpuSlotLocalLauncher(LocalLauncher):
    """submitit_local, with each job on GPUs of its own: submitit_local alone gives every job the first
    gpus_per_node GPUs (all jobs on GPU 0), so here the jobs of a batch wait for a free block of
    trainer.devices GPUs and run with CUDA_VISIBLE_DEVICES set to it. CPU runs launch as submitit_local does."""

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int):
        layout = _compose_layouts(self, job_overrides)
        if layout.num_nodes != 1 or self.params.get("tasks_per_node", 1) != 1:
            raise LayoutError(f"the local launcher runs one process per job on this machine (Lightning starts the "
                              f"devices' processes itself): trainer.num_nodes={layout.num_nodes} and "
                              f"hydra.launcher.tasks_per_node={self.params.get('tasks_per_node')} must be 1")
        if layout.accelerator not in GPU_ACCELERATORS:
            self.params = {**self.params, "gpus_per_node": 0}
            return super().launch(job_overrides, initial_job_idx)
        blocks = gpu_blocks(visible_gpu_count(), layout.devices)
        free: queue.Queue = queue.Queue()
        for block in blocks:
            free.put(block)

        def one(i: int):
            block = free.get()
            try:
                # a launcher of its own per job: `launch` reads self.params to build the job's executor
                single = copy.copy(self)
                single.params = {**self.params, "gpus_per_node": len(block), "visible_gpus": list(block)}
                return super(GpuSlotLocalLauncher, single).launch([job_overrides[i]], initial_job_idx + i)[0]
            finally:
                free.put(block)

        log.info("local launcher: %d job(s) on %d block(s) of %d GPU(s): %s", len(job_overrides), len(blocks),
                 layout.devices, blocks)
        with ThreadPoolExecutor(max_workers=len(blocks)) as pool:
            return list(pool.map(one, range(len(job_overrides))))


def gpu_blocks(n_gpus: int, devices: int) -> list[tuple[int, ...]]:
    """Disjoint blocks of `devices` GPU indices out of `n_gpus` (what runs at once on this machine)."""
    if devices < 1 or n_gpus < devices:
        raise LayoutError(f"trainer.devices={devices} GPUs per job, but this machine shows {n_gpus} GPU(s)")
    return [tuple(range(b * devices, (b + 1) * devices)) for b in range(n_gpus // devices)]

