"""loopscale's Hydra launchers (loopscale/conf/hydra/launcher/{slurm,local,local_pool}.yaml). local_pool: the
worker pool of loopscale/launch/pool_launcher.py. slurm and local: hydra-submitit-launcher's, with the job
layout taken from the trainer config and checked before submission, and GPU jobs predicted not to fit their
device's memory or (SLURM) their time limits refused before sbatch (loopscale/launch/estimate.py). Hydra
instantiates launchers only from its `hydra_plugins` namespace, hence this module; the rules live in
loopscale/launch/launchers.py and loopscale/launch/pool_launcher.py."""

from __future__ import annotations

import copy
import functools
import logging
import queue
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from hydra.errors import CompactHydraException
from hydra.plugins.launcher import Launcher

from hydra_plugins.hydra_submitit_launcher.submitit_launcher import LocalLauncher, SlurmLauncher
from loopscale.errors import LoopscaleError
from loopscale.launch.estimate import LaunchLimits
from loopscale.launch.launchers import (
    LayoutError,
    check_slurm_params,
    compose_jobs,
    gpu_blocks,
    job_layout,
    refuse_over_limits,
    sweep_layout,
)
from loopscale.train.batching import GPU_ACCELERATORS

log = logging.getLogger("loopscale.launch.launchers")


def refusals_compact(launch):
    """A launcher's refusal (an unsafe submitit folder, a layout that cannot work, jobs over their limits) as
    Hydra's compact error: its message without a traceback, exit 1."""

    @functools.wraps(launch)
    def checked(self, job_overrides, initial_job_idx):
        try:
            return launch(self, job_overrides, initial_job_idx)
        except LoopscaleError as err:
            raise CompactHydraException(f"loopscale-train: error: {err}") from None

    return checked


class CheckedSlurmLauncher(SlurmLauncher):
    """submitit_slurm, with the sweep's layout checked against the launcher and completed (GPUs, memory,
    srun --cpus-per-task) before the array is submitted."""

    @refusals_compact
    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int):
        jobs = compose_jobs(self, job_overrides)
        self.params = check_slurm_params(self.params, sweep_layout([job_layout(job) for job in jobs]))
        # memory and time: a job that would die out of memory or time out for good is not submitted
        refuse_over_limits(jobs, LaunchLimits(float(self.params["timeout_min"]), int(self.params["max_num_timeout"])))
        log.info(
            "SLURM layout: %d node(s) x %d task(s), %s GPU(s) per node, %s CPUs per task, mem_gb=%s per node",
            self.params["nodes"],
            self.params["tasks_per_node"],
            self.params["gpus_per_node"],
            self.params.get("cpus_per_task"),
            self.params.get("mem_gb"),
        )
        return super().launch(job_overrides, initial_job_idx)


class GpuSlotLocalLauncher(LocalLauncher):
    """submitit_local, with each job on GPUs of its own. submitit_local alone gives every job the first
    gpus_per_node GPUs (all jobs on GPU 0); here each job waits for a free block of trainer.devices GPUs and
    runs with CUDA_VISIBLE_DEVICES set to it. CPU runs launch as submitit_local does, without GPUs."""

    @refusals_compact
    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int):
        jobs = compose_jobs(self, job_overrides)
        layout = sweep_layout([job_layout(job) for job in jobs])
        refuse_over_limits(jobs, None)  # memory only: a local job's time limit is the user's own
        if layout.num_nodes != 1 or self.params.get("tasks_per_node", 1) != 1:
            raise LayoutError(
                "the local launcher runs one process per job on this machine (Lightning starts the "
                f"devices' processes itself): trainer.num_nodes={layout.num_nodes} and "
                f"hydra.launcher.tasks_per_node={self.params.get('tasks_per_node')} must both be 1"
            )
        if layout.accelerator not in GPU_ACCELERATORS:
            self.params = {**self.params, "gpus_per_node": 0}
            return super().launch(job_overrides, initial_job_idx)
        import torch

        blocks = gpu_blocks(torch.cuda.device_count(), layout.devices)
        free: queue.Queue = queue.Queue()
        for block in blocks:
            free.put(block)

        def run_one(i: int):
            block = free.get()
            try:  # a launcher of its own per job: `launch` builds the job's executor from self.params
                single = copy.copy(self)
                single.params = {**self.params, "gpus_per_node": len(block), "visible_gpus": list(block)}
                return LocalLauncher.launch(single, [job_overrides[i]], initial_job_idx + i)[0]
            finally:
                free.put(block)

        log.info(
            "local launcher: %d job(s) on %d block(s) of %d GPU(s): %s",
            len(job_overrides),
            len(blocks),
            layout.devices,
            blocks,
        )
        with ThreadPoolExecutor(max_workers=len(blocks)) as pool:
            return list(pool.map(run_one, range(len(job_overrides))))


class LocalPoolLauncher(Launcher):
    """hydra/launcher=local_pool (loopscale/conf/hydra/launcher/local_pool.yaml): the jobs of a multirun on a
    pool of `workers` processes x `threads_per_worker` torch threads (null: from the core count), with one
    progress bar and ETA over the sweep (loopscale/launch/pool_launcher.py)."""

    def __init__(self, workers: int | None = None, threads_per_worker: int | None = None, progress: bool = True):
        super().__init__()
        self.workers, self.threads_per_worker, self.progress = workers, threads_per_worker, progress
        self.config = self.hydra_context = self.task_function = None

    def setup(self, *, hydra_context, task_function, config) -> None:
        self.config, self.hydra_context, self.task_function = config, hydra_context, task_function

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int):
        from loopscale.launch.pool_launcher import launch_in_pool

        return launch_in_pool(self, job_overrides, initial_job_idx)
