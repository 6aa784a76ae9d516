"""Real jobs on a real one-node SLURM cluster (slurm/cluster.sh): plain sbatch, a Hydra multirun
through hydra-submitit-launcher (loopscale/conf/hydra/launcher/slurm.yaml) as an array job, requeues that
rerun the job with SLURM_RESTART_COUNT=1, and a stop/start of the cluster.

The jobs run tests/system/slurm_app/app.py, a tiny Hydra app that writes one JSON record per run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from loopscale.config.dirs import config_dir
from support.paths import REPO_ROOT
from support.procs import run_python
from support.slurm import requeue, run_cluster_sh, submit, wait_for_file, wait_for_jobs

APP = REPO_ROOT / "tests" / "system" / "slurm_app" / "app.py"
TRAIN_SBATCH = REPO_ROOT / "slurm" / "train.sbatch"
# Hydra finds hydra/launcher/{slurm,local}.yaml in loopscale's configs through this search path entry.
SEARCHPATH = f"hydra.searchpath=[file://{config_dir()}]"
# The test node has no GPUs and few CPUs: the launcher file's defaults (1 GPU, 8 CPUs) are for
# real clusters, so the tests override them like a user would.
SLURM_LAUNCHER = [
    "hydra/launcher=slurm",
    SEARCHPATH,
    "hydra.launcher.gpus_per_node=0",
    "hydra.launcher.cpus_per_task=1",
    "hydra.launcher.timeout_min=5",
    # submitit's files beside the sweep (a private tmp dir here), where the tests read them; by default they
    # go to ~/.loopscale/submitit, outside a shared runs dir (slurm.yaml)
    "hydra.launcher.submitit_folder=${hydra.sweep.dir}/.submitit/%j",
]


def read_records(out_dir: Path, prefix: str = "result") -> dict[int, dict]:
    """The app's rank-0 records by x."""
    records = {}
    for path in out_dir.glob(f"{prefix}-x*.rank0.json"):
        rec = json.loads(path.read_text())
        records[rec["x"]] = rec
    return records


def run_app(args: list[str], cwd: Path, timeout_s: float = 120) -> tuple[subprocess.CompletedProcess, float]:
    t0 = time.perf_counter()
    proc = run_python([APP, *args], cwd=cwd, timeout_s=timeout_s)
    return proc, time.perf_counter() - t0


@pytest.mark.slurm
def test_sbatch_wrap_runs_on_the_node(slurm_cluster, tmp_path):
    # The job records when it started, so the submit-to-start latency is measured by Slurm's clock
    # (the same machine's clock here).
    t_submit = time.time()
    job = submit(["--output=out.txt", "--wrap", "date +%s.%N; hostname"], cwd=tmp_path)
    assert wait_for_jobs([job], timeout_s=60) == {job: "COMPLETED"}
    started, host = (tmp_path / "out.txt").read_text().split()
    assert host == slurm_cluster.node
    latency = float(started) - t_submit
    print(f"sbatch -> job start: {latency:.2f} s")  # measured, not asserted: the machine's load decides it
    assert latency > 0  # it ran after it was submitted


@pytest.mark.slurm
def test_hydra_submitit_multirun_is_one_array_job(slurm_cluster, tmp_path):
    out = tmp_path / "out"
    proc, slurm_s = run_app(["-m", f"out_dir={out}", "x=1,2,3", *SLURM_LAUNCHER], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]

    records = read_records(out)
    assert {x: r["value"] for x, r in records.items()} == {1: 1, 2: 4, 3: 9}
    # One array job with three tasks, run by Slurm in the default partition.
    slurm = [r["slurm"] for r in records.values()]
    assert len({s["SLURM_ARRAY_JOB_ID"] for s in slurm}) == 1
    assert sorted(int(s["SLURM_ARRAY_TASK_ID"]) for s in slurm) == [0, 1, 2]
    assert {s["SLURM_JOB_PARTITION"] for s in slurm} == {slurm_cluster.partition}
    assert all(r["host"] == slurm_cluster.node for r in records.values())
    array_id = slurm[0]["SLURM_ARRAY_JOB_ID"]
    assert set(wait_for_jobs([array_id], timeout_s=30).values()) == {"COMPLETED"}
    # submitit keeps its scripts, logs and result pickles in its folder (here the sweep dir, SLURM_LAUNCHER).
    assert (out / "hydra" / "multirun" / ".submitit" / f"{array_id}_0").is_dir()
    # srun gets --cpus-per-task (Slurm 22.05's srun does not inherit it from sbatch)
    (script,) = (out / "hydra" / "multirun" / ".submitit").rglob("*_submission.sh")
    assert any(line.startswith("srun ") and "--cpus-per-task=1" in line for line in script.read_text().splitlines())

    # The same three app calls in one process (Hydra's basic launcher): the scheduler's overhead.
    base_out = tmp_path / "base"
    proc, local_s = run_app(["-m", f"out_dir={base_out}", "x=1,2,3"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(read_records(base_out)) == 3
    print(f"3-job multirun: submitit_slurm {slurm_s:.1f} s, in one process {local_s:.1f} s")


@pytest.mark.slurm
def test_impossible_request_fails_at_submission(slurm_cluster, tmp_path):
    """A GPU run asks for trainer.devices GPUs per node (slurm.yaml's gpus_per_node: null), which the test
    node lacks: sbatch rejects the array at once and the multirun exits with an error instead of waiting on
    a job that can never start."""
    launcher = [a for a in SLURM_LAUNCHER if not a.startswith("hydra.launcher.gpus_per_node")]
    queued = queued_jobs()
    proc, seconds = run_app(
        ["-m", f"out_dir={tmp_path}", "x=1,2", "trainer.accelerator=gpu", *launcher], cwd=tmp_path, timeout_s=60
    )
    assert proc.returncode != 0
    assert "gres" in proc.stderr.lower()
    assert queued_jobs() == queued  # refused by sbatch: nothing left waiting in the queue for a GPU
    print(f"refused after {seconds:.1f} s")


def queued_jobs() -> set[str]:
    """The ids of the jobs Slurm has queued or running."""
    out = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True, timeout=30, check=True)
    return set(out.stdout.split())


@pytest.mark.slurm
def test_train_sbatch_requeue_reruns_with_restart_count(slurm_cluster, tmp_path):
    """slurm/train.sbatch (the plain-sbatch template) with two tasks; the first attempt waits,
    is requeued, and the rerun sees SLURM_RESTART_COUNT=1."""
    out = tmp_path / "out"
    env = {**os.environ, "LOOPSCALE_TRAIN": f"{sys.executable} {APP}"}
    # The template asks for a GPU and 8 CPUs; command-line options override #SBATCH lines.
    job = submit(
        [
            "--gpus-per-node=0",
            "--cpus-per-task=1",
            "--ntasks-per-node=2",
            str(TRAIN_SBATCH),
            f"out_dir={out}",
            "x=5",
            "wait_for_requeue_s=60",
        ],
        cwd=tmp_path,
        env=env,
    )
    first = json.loads(wait_for_file(out, "started-x5.rank0.json", timeout_s=60).read_text())
    assert "SLURM_RESTART_COUNT" not in first["slurm"]
    requeue(job)
    assert wait_for_jobs([job], timeout_s=60) == {job: "COMPLETED"}

    for rank in (0, 1):
        rec = json.loads((out / f"result-x5.rank{rank}.json").read_text())
        assert rec["slurm"]["SLURM_JOB_ID"] == job
        assert rec["slurm"]["SLURM_RESTART_COUNT"] == "1"
        assert rec["slurm"]["SLURM_NTASKS"] == "2"
        # train.sbatch derives trainer.devices / num_nodes from the allocation.
        assert rec["trainer"] == {"devices": 2, "num_nodes": 1}
    log = (tmp_path / f"slurm-loopscale-{job}.out").read_text()
    assert f"job {job} restart 0" in log and f"job {job} restart 1" in log  # --open-mode=append


@pytest.mark.slurm
def test_train_sbatch_refuses_a_layout_the_allocation_contradicts(slurm_cluster, tmp_path):
    """trainer.devices=2 on a 1-task allocation: the template stops before starting any task."""
    env = {**os.environ, "LOOPSCALE_TRAIN": f"{sys.executable} {APP}"}
    job = submit(
        [
            "--gpus-per-node=0",
            "--cpus-per-task=1",
            "--ntasks-per-node=1",
            str(TRAIN_SBATCH),
            f"out_dir={tmp_path / 'out'}",
            "trainer.devices=2",
        ],
        cwd=tmp_path,
        env=env,
    )
    assert wait_for_jobs([job], timeout_s=60) == {job: "FAILED"}
    log = (tmp_path / f"slurm-loopscale-{job}.out").read_text()
    assert "trainer.devices=2, but the job has 1 task(s) per node" in log, log
    assert not (tmp_path / "out").exists()  # no task ran


@pytest.mark.slurm
def test_submitit_job_requeued_by_scontrol_reruns(slurm_cluster, tmp_path):
    """A Hydra submitit_slurm job killed by `scontrol requeue` is rerun by Slurm; submitit runs the
    pickled Hydra job again and the multirun still collects its result."""
    out = tmp_path / "out"
    args = ["-m", f"out_dir={out}", "x=7", "wait_for_requeue_s=60", *SLURM_LAUNCHER]
    proc = subprocess.Popen(
        [sys.executable, str(APP), *args], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        first = json.loads(wait_for_file(out, "started-x7.rank0.json", timeout_s=60).read_text())
        # submitit submits a one-point sweep as a plain job, a longer one as an array job.
        slurm = first["slurm"]
        task = slurm["SLURM_JOB_ID"]
        if "SLURM_ARRAY_JOB_ID" in slurm:
            task = f"{slurm['SLURM_ARRAY_JOB_ID']}_{slurm['SLURM_ARRAY_TASK_ID']}"
        requeue(task)
        output, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, output[-3000:]
    rec = read_records(out)[7]
    assert rec["value"] == 49
    assert rec["slurm"]["SLURM_RESTART_COUNT"] == "1"
    assert wait_for_jobs([task], timeout_s=30) == {task: "COMPLETED"}


def test_local_launcher_runs_each_point_in_its_own_process(tmp_path):
    """loopscale/conf/hydra/launcher/local.yaml (submitit_local): no Slurm involved."""
    out = tmp_path / "out"
    proc, _ = run_app(["-m", f"out_dir={out}", "x=1,2", "hydra/launcher=local", SEARCHPATH], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = read_records(out)
    assert {x: r["value"] for x, r in records.items()} == {1: 1, 2: 4}
    assert len({r["pid"] for r in records.values()}) == 2
    assert all("SLURM_JOB_ID" not in r["slurm"] for r in records.values())


@pytest.mark.slurm
def test_cluster_stops_and_starts_again(slurm_cluster, tmp_path):
    if not slurm_cluster.started_here:
        pytest.skip("the cluster was already running before the tests; not stopping someone else's cluster")
    stopped = run_cluster_sh("stop")
    assert stopped.returncode == 0, stopped.stderr
    assert run_cluster_sh("status").returncode != 0
    started = run_cluster_sh("start")
    assert started.returncode == 0, started.stderr
    # Starting a running cluster is a no-op.
    again = run_cluster_sh("start")
    assert again.returncode == 0 and "already running" in again.stderr
    job = submit(["--output=out.txt", "--wrap", "hostname"], cwd=tmp_path)
    assert wait_for_jobs([job], timeout_s=60) == {job: "COMPLETED"}
    assert (tmp_path / "out.txt").read_text().strip() == slurm_cluster.node
