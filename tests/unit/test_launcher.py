"""The launchers' layout: from the trainer config, checked before submission (loopscale/launch/launchers.py)."""

from __future__ import annotations

import pytest

from loopscale.launch.launchers import (
    JobLayout,
    LayoutError,
    check_slurm_params,
    gpu_blocks,
    host_memory_gb,
    job_layout,
    sweep_layout,
)
from support.paths import REPO_ROOT
from support.procs import run_loopscale
from support.train import compose_cfg

# What loopscale/conf/hydra/launcher/slurm.yaml resolves to for one CPU task on one node.
PARAMS = {"nodes": 1, "tasks_per_node": 1, "gpus_per_node": None, "cpus_per_task": 8, "mem_gb": None}


def test_consistent_layout_is_completed_gpus_memory_and_srun_cpus():
    gpu = check_slurm_params({**PARAMS, "nodes": 2, "tasks_per_node": 8}, JobLayout(8, 2, "gpu", 10**9))
    assert gpu["gpus_per_node"] == 8 and gpu["nodes"] == 2 and gpu["tasks_per_node"] == 8
    assert gpu["mem_gb"] == host_memory_gb(10**9, 8) == 8 * (4 + 24)
    assert gpu["srun_args"] == ["--cpus-per-task=8"]
    cpu = check_slurm_params(PARAMS, JobLayout(1, 1, "cpu", None))
    assert cpu["gpus_per_node"] == 0 and cpu["mem_gb"] is None  # no loopscale model: no estimate
    assert check_slurm_params({**PARAMS, "mem_gb": 500}, JobLayout(1, 1, "cpu", 10**6))["mem_gb"] == 500


@pytest.mark.parametrize(
    "params, layout, fields",
    [
        ({"tasks_per_node": 1}, JobLayout(8, 1, "gpu", None), ["tasks_per_node=1", "trainer.devices=8"]),
        ({"nodes": 1}, JobLayout(1, 2, "cpu", None), ["nodes=1", "trainer.num_nodes=2"]),
        ({"gpus_per_node": 4}, JobLayout(1, 1, "gpu", None), ["gpus_per_node=4", "trainer.devices=1"]),
        ({"gpus_per_node": 1}, JobLayout(1, 1, "cpu", None), ["gpus_per_node=1", "accelerator=cpu"]),
    ],
)
def test_a_mismatch_is_an_error_naming_the_fields(params, layout, fields):
    with pytest.raises(LayoutError) as err:
        check_slurm_params({**PARAMS, **params}, layout)
    assert all(f in str(err.value) for f in fields), str(err.value)


def test_one_sweep_needs_one_layout_and_takes_the_largest_model():
    layout = sweep_layout([JobLayout(8, 2, "gpu", 10**8), JobLayout(8, 2, "gpu", 3 * 10**8)])
    assert layout == JobLayout(8, 2, "gpu", 3 * 10**8)
    with pytest.raises(LayoutError, match="one sweep per layout"):
        sweep_layout([JobLayout(1, 1, "gpu", None), JobLayout(2, 1, "gpu", None)])


def test_layout_of_the_largest_published_point():
    cfg = compose_cfg(
        ["experiment=isodepth", "point=C2.15e19-s34", "model.r=1", "trainer=gpu_ddp", "trainer.num_nodes=2"]
    )
    layout = job_layout(cfg)
    assert (layout.devices, layout.num_nodes, layout.accelerator) == (8, 2, "gpu")
    assert 1.0e9 < layout.params < 1.3e9  # ~1.14e9 parameters at s = 34, r = 1
    assert 200 < host_memory_gb(layout.params, 8) < 300  # GB per 8-GPU node


def test_gpu_blocks_for_the_local_launcher():
    assert gpu_blocks(8, 1) == [(i,) for i in range(8)]
    assert gpu_blocks(8, 2) == [(0, 1), (2, 3), (4, 5), (6, 7)]
    assert gpu_blocks(3, 2) == [(0, 1)]
    with pytest.raises(LayoutError, match="trainer.devices=2"):
        gpu_blocks(1, 2)


def test_gpu_ddp_trainer_and_slurm_launcher_agree_by_construction():
    """loopscale/conf/trainer/gpu_ddp.yaml once set devices = 8 while the launcher kept tasks_per_node = 1."""
    cfg = compose_cfg(["trainer=gpu_ddp", "trainer.num_nodes=3", "hydra/launcher=slurm"], return_hydra_config=True)
    assert cfg.hydra.launcher.tasks_per_node == cfg.trainer.devices == 8
    assert cfg.hydra.launcher.nodes == cfg.trainer.num_nodes == 3
    assert cfg.hydra.launcher._target_ == "hydra_plugins.loopscale_launchers.CheckedSlurmLauncher"
    local = compose_cfg(["trainer=gpu", "hydra/launcher=local"], return_hydra_config=True).hydra.launcher
    assert local._target_ == "hydra_plugins.loopscale_launchers.GpuSlotLocalLauncher" and local.gpus_per_node is None


@pytest.mark.system
def test_a_contradicting_launcher_override_stops_the_multirun_before_submission(tmp_path):
    """A real multirun: the launcher composes the job, finds tasks_per_node=1 against trainer.devices=8 and
    exits before sbatch is ever called (none is needed for this test)."""
    proc = run_loopscale(
        [
            "-m",
            "trainer=gpu_ddp",
            "hydra/launcher=slurm",
            "hydra.launcher.tasks_per_node=1",
            f"runs_dir={tmp_path}",
        ],
        cwd=REPO_ROOT,
        timeout_s=300,
        module="loopscale.train.entry",
    )
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr and "hydra.launcher.tasks_per_node=1 but trainer.devices=8" in proc.stderr
    assert proc.stderr.startswith("loopscale-train: error: launcher and trainer disagree: ")  # one line (issue 41)
    assert not (tmp_path / "default" / ".submitit").exists()
