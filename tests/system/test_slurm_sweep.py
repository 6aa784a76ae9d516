"""The iso-depth sweep end to end on a real one-node SLURM cluster (slurm/cluster.sh): a 4-job
`isodepth_cpu` mini-sweep launched with `hydra/launcher=slurm` (hydra-submitit-launcher -> sbatch array ->
real training), collected into the runs table; a relaunch that trains nothing; a job requeued mid-run that
resumes from its checkpoint to the same loss; a failing job that does not stop the sweep.

Multiruns run as subprocesses with a timeout: without sacct, submitit cannot tell that a job died without
writing its result, and the multirun would wait forever.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from loopscale.data.shards import prepare
from loopscale.fit.runs_table import required_columns
from loopscale.train.run_json import TABLE_COLUMNS, read_record
from support.paths import REPO_ROOT
from support.procs import run_loopscale
from support.slurm import job_records, requeue, wait_for_file, wait_for_jobs
from support.train import train_config

pytestmark = pytest.mark.slurm

SWEEP = "isodepth_cpu"
# The test node has 2 CPUs and no GPU: one CPU per job (two jobs at a time), torch on one thread.
SLURM = [
    "hydra/launcher=slurm",
    "hydra.launcher.gpus_per_node=0",
    "hydra.launcher.cpus_per_task=1",
    "hydra.launcher.timeout_min=10",
    # submitit's files beside the sweep (a private tmp dir here), where the tests read its logs
    "hydra.launcher.submitit_folder=${hydra.sweep.dir}/.submitit/%j",
]
# The CPU iso-depth experiment cut to 4 jobs of 23-45 steps (r = 1, 2 at two budgets of width 64), with
# checkpoints every 5 steps so a requeued job has one to resume from.
MINI = [
    f"experiment={SWEEP}",
    "model.r=1,2",
    "point=C5e10-d64,C1e11-d64",
    "trainer.progress=false",
    "trainer.num_threads=1",
    "trainer.ckpt_every_steps=5",
    "data.val_tokens=2048",
]
MULTIRUN_TIMEOUT_S = 300
NONE = {
    s: 0 for s in ("done", "failed", "diverged", "interrupted", "terminated", "incomplete", "running", "stale")
}  # `status` counts
FIT_COLUMNS = ["r", "N_once", "N_rec", "N", "D", "C", "L"]


def multirun_args(runs_dir: Path, data_dir: Path, partition: str, *extra: str) -> list[str]:
    """The arguments of `loopscale-train -m` for the mini-sweep on SLURM."""
    return [
        "-m",
        *MINI,
        *SLURM,
        f"hydra.launcher.partition={partition}",
        f"runs_dir={runs_dir}",
        f"data.data_dir={data_dir}",
        *extra,
    ]


def multirun(runs_dir: Path, data_dir: Path, partition: str, *extra: str) -> tuple[subprocess.CompletedProcess, float]:
    started = time.perf_counter()
    proc = run_loopscale(
        multirun_args(runs_dir, data_dir, partition, *extra),
        cwd=runs_dir.parent,
        timeout_s=MULTIRUN_TIMEOUT_S,
        module="loopscale.train.entry",
    )
    return proc, time.perf_counter() - started


def loopscale(*args: str) -> subprocess.CompletedProcess:
    return run_loopscale(args, cwd=REPO_ROOT, timeout_s=120)


def status_counts(sweep_dir: Path) -> dict[str, int]:
    proc = loopscale("status", "--json", str(sweep_dir))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)["counts"]


def records(sweep_dir: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in sweep_dir.glob("*/run.json")}


def array_tasks(sweep_dir: Path) -> list[str]:
    """Slurm job ids (`<array>_<task>`, or `<id>` for a one-job sweep) that submitit made folders for."""
    return sorted(
        p.name
        for p in (sweep_dir / ".submitit").iterdir()
        if p.name[0].isdigit() and p.is_dir() and any(p.glob("*_submitted.pkl"))
    )


@pytest.fixture(scope="module")
def corpus(data_dir):
    """Tokenize the experiment's corpus once here, so the jobs only read the cache."""
    prepare(train_config([f"experiment={SWEEP}", f"data.data_dir={data_dir}"]).data, progress=False)
    return data_dir


@pytest.fixture(scope="module")
def mini_sweep(slurm_cluster, corpus, tmp_path_factory):
    runs_dir = tmp_path_factory.mktemp("slurm_sweep") / "runs"
    runs_dir.parent.mkdir(exist_ok=True)
    proc, seconds = multirun(runs_dir, corpus, slurm_cluster.partition)
    assert proc.returncode == 0, proc.stderr[-4000:]
    print(f"4-job mini-sweep through SLURM: {seconds:.1f} s")
    return runs_dir / SWEEP


def test_mini_sweep_runs_as_a_slurm_array_and_collects_four_rows(mini_sweep, slurm_cluster):
    runs = records(mini_sweep)
    assert sorted(runs) == [
        "baseline-r1-C1e11-d64",
        "baseline-r1-C5e10-d64",
        "baseline-r2-C1e11-d64",
        "baseline-r2-C5e10-d64",
    ]
    assert all(r["status"] == "done" and r["step"] == r["steps"] > 0 for r in runs.values())
    # four tasks of one array job, all completed according to Slurm itself
    tasks = array_tasks(mini_sweep)
    assert len(tasks) == 4 and len({t.split("_")[0] for t in tasks}) == 1
    assert set(wait_for_jobs(tasks, timeout_s=30).values()) == {"COMPLETED"}
    assert {rec["NodeList"] for t in tasks for rec in job_records(t).values()} == {slurm_cluster.node}

    proc = loopscale("collect", str(mini_sweep))
    assert proc.returncode == 0, proc.stderr[-3000:]
    table = pd.read_csv(mini_sweep / "runs.csv")
    assert list(table.columns) == TABLE_COLUMNS and len(table) == 4
    parquet = pd.read_parquet(mini_sweep / "runs.parquet")
    assert list(parquet.columns) == TABLE_COLUMNS
    pd.testing.assert_frame_equal(parquet[FIT_COLUMNS], table[FIT_COLUMNS], check_dtype=False)
    assert dict(zip(table.run_name, table.L)) == {name: r["L"] for name, r in runs.items()}
    # the columns `loopscale fit` reads are there and numeric; 4 rows are too few to fit 6 parameters, which
    # is the one check the fitter's reader leaves failing
    assert set(required_columns("looped", set(table.columns))) <= set(table.columns)
    assert table[FIT_COLUMNS].gt(0).all().all()
    fit = loopscale("fit", str(mini_sweep / "runs.csv"))
    assert fit.returncode != 0 and "4 rows is too few" in fit.stderr, fit.stderr[-2000:]

    assert pd.read_csv(mini_sweep / "runs_problems.csv").empty
    assert status_counts(mini_sweep) == {**NONE, "done": 4}


def test_relaunching_the_sweep_trains_nothing(mini_sweep, corpus, slurm_cluster):
    before = {name: (mini_sweep / name / "run.json").read_bytes() for name in records(mini_sweep)}
    ckpt_mtimes = {p: p.stat().st_mtime_ns for p in mini_sweep.glob("*/checkpoints/last.ckpt")}
    loopscale("collect", str(mini_sweep))
    table_before = (mini_sweep / "runs.csv").read_bytes()
    first_tasks = set(array_tasks(mini_sweep))

    proc, seconds = multirun(mini_sweep.parent, corpus, slurm_cluster.partition)
    assert proc.returncode == 0, proc.stderr[-4000:]
    print(f"relaunch of the finished 4-job sweep: {seconds:.1f} s")
    new_tasks = set(array_tasks(mini_sweep)) - first_tasks
    assert len(new_tasks) == 4  # the relaunch really ran four jobs on the cluster ...
    for task in new_tasks:  # ... each of which found its run finished
        (log,) = (mini_sweep / ".submitit" / task).glob("*_log.out")
        assert "already finished" in log.read_text(), log.read_text()[-2000:]
    after = {name: (mini_sweep / name / "run.json").read_bytes() for name in records(mini_sweep)}
    assert after == before  # run.json untouched: same wall_time_s, same loss
    assert {p: p.stat().st_mtime_ns for p in mini_sweep.glob("*/checkpoints/last.ckpt")} == ckpt_mtimes
    assert all(len(list((mini_sweep / name / "metrics").glob("version_*"))) == 1 for name in after)
    assert loopscale("collect", str(mini_sweep)).returncode == 0
    assert (mini_sweep / "runs.csv").read_bytes() == table_before


def test_requeued_job_resumes_from_its_checkpoint_to_the_same_loss(mini_sweep, corpus, slurm_cluster, tmp_path):
    """`scontrol requeue` kills the job mid-run (SIGTERM, SIGKILL after KillWait) and Slurm starts it again;
    submitit reruns the same Hydra job, which resumes from checkpoints/last.ckpt."""
    runs_dir = tmp_path / "runs"
    name = "baseline-r2-C1e11-d64"  # 44 steps; the mini-sweep trained the same config without interruption
    args = [
        a for a in multirun_args(runs_dir, corpus, slurm_cluster.partition) if not a.startswith(("model.r=", "point="))
    ]
    proc = subprocess.Popen(  # Popen: the job is requeued while this multirun waits on it
        [sys.executable, "-m", "loopscale.train.entry", *args, "model.r=2", "point=C1e11-d64"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        run_dir = runs_dir / SWEEP / name
        wait_for_file(run_dir / "checkpoints", "last.ckpt", timeout_s=120)
        (job,) = array_tasks(runs_dir / SWEEP)
        requeue(job)
        output, _ = proc.communicate(timeout=MULTIRUN_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, output[-4000:]
    assert wait_for_jobs([job], timeout_s=30) == {job: "COMPLETED"}
    assert job_records(job)[job]["Restarts"] == "1"

    resumed, straight = read_record(run_dir), read_record(mini_sweep / name)
    assert resumed["status"] == "done" and resumed["step"] == resumed["steps"] == straight["steps"]
    assert 0 < resumed["resumed_from_step"] < resumed["steps"], resumed["resumed_from_step"]
    assert len(list((run_dir / "metrics").glob("version_*"))) == 2  # one CSV log per attempt
    assert abs(resumed["L"] - straight["L"]) < 1e-5, (resumed["L"], straight["L"])
    print(
        f"requeued at step >= 5, resumed from step {resumed['resumed_from_step']}: L = {resumed['L']:.6f} "
        f"(uninterrupted {straight['L']:.6f})"
    )


def test_a_failed_job_does_not_stop_the_sweep(corpus, slurm_cluster, tmp_path):
    """One job of a 2-job sweep finds a corrupt checkpoint in its run directory (as a full disk could leave)
    and fails; the other trains. `collect` lists the failure with its reason and `status` counts it."""
    runs_dir = tmp_path / "runs"
    broken = runs_dir / SWEEP / "baseline-r1-C5e10-d96" / "checkpoints" / "last.ckpt"
    broken.parent.mkdir(parents=True)
    broken.write_bytes(b"not a checkpoint")
    args = [
        a for a in multirun_args(runs_dir, corpus, slurm_cluster.partition) if not a.startswith(("model.r=", "point="))
    ]
    proc = run_loopscale(
        [*args, "model.r=1", "point=C5e10-d64,C5e10-d96"],
        cwd=tmp_path,
        timeout_s=MULTIRUN_TIMEOUT_S,
        module="loopscale.train.entry",
    )
    # the sweep runs both jobs, then says one failed: exit 1 (a sweep whose runs fail never exits 0)
    assert proc.returncode == 1 and "a run of this sweep failed" in proc.stderr, proc.stderr[-4000:]

    runs = records(runs_dir / SWEEP)
    assert runs["baseline-r1-C5e10-d64"]["status"] == "done"
    failed = runs["baseline-r1-C5e10-d96"]
    assert failed["status"] == "failed" and failed["reason"], failed

    collect = loopscale("collect", str(runs_dir / SWEEP))
    assert collect.returncode == 0, collect.stderr[-3000:]
    assert len(pd.read_csv(runs_dir / SWEEP / "runs.csv")) == 1
    assert "baseline-r1-C5e10-d96" in collect.stderr  # the table of runs not done
    (problem,) = pd.read_csv(runs_dir / SWEEP / "runs_problems.csv").to_dict("records")
    assert Path(problem["run_dir"]).name == "baseline-r1-C5e10-d96"
    assert (problem["status"], problem["reason"]) == ("failed", failed["reason"])
    assert status_counts(runs_dir / SWEEP) == {**NONE, "done": 1, "failed": 1}
    print(f"failed job recorded as: {failed['reason'][:160]}")


@pytest.mark.slow  # 63 s; plain SLURM sweeps stay in the default suite
def test_forked_sweep_parent_and_branches_as_separate_slurm_jobs(corpus, slurm_cluster, tmp_path):
    """A forked WSD model (experiment=isodepth_cpu_wsd, budgets 5e10 and 1e11 at width 64) split over Slurm:
    the stable parent as one job, then both cooldown branches as two tasks of one array job, each starting
    from the parent's fork checkpoint. The branches are the same points as one job that runs it all."""
    runs_dir = tmp_path / "runs"
    model = [
        "experiment=isodepth_cpu_wsd",
        "model.r=1",
        "point=C5e10_1e11-d64",
        "trainer.progress=false",
        "trainer.num_threads=1",
        "trainer.ckpt_every_steps=5",
        "data.val_tokens=2048",
        f"data.data_dir={corpus}",
    ]
    forked = [*model, *SLURM, f"hydra.launcher.partition={slurm_cluster.partition}"]
    sweep_dir = runs_dir / "isodepth_cpu_wsd"

    def launch(*extra: str, where: Path = runs_dir) -> subprocess.CompletedProcess:
        return run_loopscale(
            ["-m", *forked, f"runs_dir={where}", *extra],
            cwd=tmp_path,
            timeout_s=MULTIRUN_TIMEOUT_S,
            module="loopscale.train.entry",
        )

    parent = launch("budget.fork_stage=parent")
    assert parent.returncode == 0, parent.stderr[-4000:]
    parent_tasks = set(array_tasks(sweep_dir))
    assert len(parent_tasks) == 1
    parent_dir = sweep_dir / "baseline-r1-d64"
    assert json.loads((parent_dir / "fork_parent.json").read_text())["status"] == "done"
    assert not list(sweep_dir.glob("*/run.json"))  # no branch ran yet
    branches = launch("budget.fork_stage=C5e10,C1e11")
    assert branches.returncode == 0, branches.stderr[-4000:]
    branch_tasks = set(array_tasks(sweep_dir)) - parent_tasks
    assert len(branch_tasks) == 2 and len({t.split("_")[0] for t in branch_tasks}) == 1  # one array, two tasks
    assert set(wait_for_jobs(sorted(branch_tasks), timeout_s=30).values()) == {"COMPLETED"}

    runs = records(sweep_dir)
    assert sorted(runs) == ["baseline-r1-d64-C1e11", "baseline-r1-d64-C5e10"]
    for rec in runs.values():
        assert rec["status"] == "done" and rec["parent"] == str(parent_dir) and 0 < rec["fork_step"] < rec["steps"]
        assert rec["D"] == rec["steps"] * rec["batch_tokens"] and rec["C"] == pytest.approx(rec["F"] * rec["D"])
    # the same model as one local job (parent, then both branches): the same points, to the same loss
    whole = run_loopscale(
        [*model, f"runs_dir={tmp_path / 'whole'}"],
        cwd=tmp_path,
        timeout_s=MULTIRUN_TIMEOUT_S,
        module="loopscale.train.entry",
    )
    assert whole.returncode == 0, whole.stderr[-4000:]
    for name, rec in runs.items():
        local = read_record(tmp_path / "whole" / "isodepth_cpu_wsd" / name)
        assert (local["steps"], local["fork_step"], local["D"]) == (rec["steps"], rec["fork_step"], rec["D"])
        assert abs(local["L"] - rec["L"]) < 1e-5, (name, local["L"], rec["L"])
    collect = loopscale("collect", str(sweep_dir))
    assert collect.returncode == 0, collect.stderr[-3000:]
    assert sorted(pd.read_csv(sweep_dir / "runs.csv").run_name) == sorted(runs)
