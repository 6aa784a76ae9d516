"""The SLURM launcher refuses, before sbatch, a GPU job that cannot finish within its time limits or would
not fit its card, naming the numbers and the override; with the override the job reaches sbatch (on the
real one-node test cluster, which has no GPU, sbatch then rejects the GPU request itself)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from support.procs import run_loopscale

pytestmark = pytest.mark.slurm


def submit(tmp_path: Path, partition: str, *extra: str):
    """`loopscale-train -m` of the published s34 job at 2.15e19 FLOPs (r = 1, trainer=gpu) on the test
    cluster, with a one-hour timeout and one requeue: ~15 h of H100 time cannot fit 2 h."""
    args = [
        "-m",
        "experiment=isodepth",
        "point=C2.15e19-s34",
        "model.r=1",
        "hydra/launcher=slurm",
        f"hydra.launcher.partition={partition}",
        "hydra.launcher.cpus_per_task=1",
        "hydra.launcher.timeout_min=60",
        "hydra.launcher.max_num_timeout=1",
        f"runs_dir={tmp_path / 'runs'}",
        # submitit's files beside the sweep (a private tmp dir), where `submitted` looks for them
        "hydra.launcher.submitit_folder=${hydra.sweep.dir}/.submitit/%j",
        *extra,
    ]
    return run_loopscale(args, cwd=tmp_path, timeout_s=120, module="loopscale.train.entry")


def submitted(tmp_path: Path) -> bool:
    """submitit writes the job's submission file (.submitit/.submission_file_*.sh) just before it calls sbatch."""
    return any((tmp_path / "runs").rglob(".submission_file_*"))


def test_a_job_that_cannot_finish_or_fit_is_refused_before_sbatch(slurm_cluster, tmp_path):  # noqa: F811
    refused = submit(tmp_path, slurm_cluster.partition)
    assert refused.returncode != 0 and "refused before submission" in refused.stderr, refused.stderr[-3000:]
    assert "baseline-r1-C2.15e19-s34" in refused.stderr and "2 x 60 min" in refused.stderr
    assert not submitted(tmp_path)
    requeues = re.search(r"hydra\.launcher\.max_num_timeout=(\d+)", refused.stderr).group(1)

    # memory: a device batch of 64 sequences of 2048 tokens at size 34 does not fit an H100
    too_big = submit(
        tmp_path, slurm_cluster.partition, f"hydra.launcher.max_num_timeout={requeues}", "budget.device_batch=64"
    )
    assert too_big.returncode != 0 and "budget.device_batch=8" in too_big.stderr, too_big.stderr[-3000:]
    assert "GiB" in too_big.stderr and not submitted(tmp_path)

    # the override it named lets it through to sbatch, which refuses the GPU this node lacks
    through = submit(tmp_path, slurm_cluster.partition, f"hydra.launcher.max_num_timeout={requeues}")
    assert through.returncode != 0 and "refused before submission" not in through.stderr
    assert "gres" in through.stderr.lower() and submitted(tmp_path), through.stderr[-3000:]
