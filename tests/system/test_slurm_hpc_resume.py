"""Lightning's own SLURM requeue under slurm/train.sbatch: SIGUSR1 (what `--signal=SIGUSR1@90` sends before
the time limit) makes Lightning save hpc_ckpt_<n>.ckpt in the run directory and `scontrol requeue` the job;
the rerun resumes from the newer of that and checkpoints/last.ckpt, and the next last.ckpt deletes the hpc
checkpoints. A real loopscale-train run on the single-node test cluster."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from loopscale.data.shards import prepare
from loopscale.train.checkpoint import newest_checkpoint, prune_hpc_checkpoints
from loopscale.train.run_json import read_record
from support.paths import REPO_ROOT
from support.slurm import job_records, start_when_pending, submit, wait_for_file, wait_for_jobs
from support.train import TINY, train_config

TRAIN_SBATCH = REPO_ROOT / "slurm" / "train.sbatch"
# 60 steps of 16 x 64 tokens, last.ckpt every 4 steps: the signal comes after the first one.
RUN = [*TINY, "budget.tokens=61440", "trainer.ckpt_every_steps=4", "trainer.num_threads=1", "data.val_tokens=4096"]


def _step(ckpt: Path) -> int:
    return torch.load(ckpt, map_location="cpu", weights_only=False)["global_step"]


def _wait_for_step(ckpt: Path, step: int, timeout_s: float = 300) -> None:
    """Poll until the checkpoint at `ckpt` (replaced atomically as training goes) is at `step` or later."""
    deadline = time.monotonic() + timeout_s
    while _step(ckpt) < step:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{ckpt} not at step {step} after {timeout_s} s")
        time.sleep(0.2)


def test_newest_checkpoint_and_pruning(tmp_path):
    last = tmp_path / "checkpoints" / "last.ckpt"
    assert newest_checkpoint(last, tmp_path) is None
    last.parent.mkdir()
    last.write_bytes(b"x")
    assert newest_checkpoint(last, tmp_path) == last
    hpc = [tmp_path / "hpc_ckpt_1.ckpt", tmp_path / "hpc_ckpt_2.ckpt"]
    for i, path in enumerate(hpc):  # written after last.ckpt, in this order
        path.write_bytes(b"x")
        os.utime(path, ns=(last.stat().st_mtime_ns + (i + 1) * 10**9,) * 2)
    assert newest_checkpoint(last, tmp_path) == hpc[1]
    os.utime(last, ns=(hpc[1].stat().st_mtime_ns + 10**9,) * 2)  # a later last.ckpt wins again
    assert newest_checkpoint(last, tmp_path) == last
    prune_hpc_checkpoints(tmp_path)
    assert not list(tmp_path.glob("hpc_ckpt_*")) and last.exists()


@pytest.mark.slurm
@pytest.mark.slow
def test_sigusr1_under_train_sbatch_saves_requeues_and_resumes_from_the_hpc_checkpoint(
    slurm_cluster, data_dir, tmp_path
):
    prepare(train_config([*RUN, f"data.data_dir={data_dir}"]).data, progress=False)
    runs = tmp_path / "runs"
    env = {**os.environ, "LOOPSCALE_TRAIN": f"{sys.executable} -m loopscale.train.entry", "PYTHONUNBUFFERED": "1"}
    job = submit(
        [
            "--gpus-per-node=0",
            "--cpus-per-task=1",
            str(TRAIN_SBATCH),
            *RUN,
            f"data.data_dir={data_dir}",
            f"runs_dir={runs}",
        ],
        cwd=tmp_path,
        env=env,
    )
    last = wait_for_file(runs, "*/*/checkpoints/last.ckpt", timeout_s=300)
    run_dir = last.parent.parent
    _wait_for_step(last, 8)  # training well under way (two last.ckpt written), not only started
    subprocess.run(["scancel", "--signal=USR1", job], check=True, timeout=30)  # to the srun step's tasks
    # Lightning saves the hpc checkpoint and requeues the job itself; the rerun would wait ~2 minutes
    start_when_pending(job, timeout_s=120)
    (hpc,) = run_dir.glob("hpc_ckpt_*.ckpt")
    newest = newest_checkpoint(last, run_dir)
    hpc_step, last_step = _step(hpc), _step(last)
    assert wait_for_jobs([job], timeout_s=300) == {job: "COMPLETED"}

    assert job_records(job)[job]["Restarts"] == "1"
    log = (tmp_path / f"slurm-loopscale-{job}.out").read_text()
    assert f"job {job} restart 0" in log and f"job {job} restart 1" in log
    record = read_record(run_dir)
    assert record["status"] == "done" and record["step"] == record["steps"]
    # resumed from the newer checkpoint: the hpc one, unless a last.ckpt was written after the signal
    assert record["resumed_from_step"] == (hpc_step if newest == hpc else last_step) > 0
    assert newest == hpc and hpc_step >= last_step, (hpc_step, last_step)
    assert not list(run_dir.glob("hpc_ckpt_*.ckpt"))  # pruned once the rerun saved a newer last.ckpt
    print(f"SIGUSR1 at step {hpc_step} (last.ckpt at {last_step}); resumed from step {record['resumed_from_step']}")
