"""Training across two SLURM nodes: the test cluster restarted as two nodes of one CPU each (two slurmd
daemons on this host, slurm/cluster.sh start --nodes 2), DDP over gloo on CPU.

- slurm/train.sbatch with 2 nodes x 1 task: both nodes train (each rank records its SLURM_NODEID in
  run.json), on the one-process run's global batch, to its loss within 1e-4;
- `scontrol requeue` of the running 2-node job: it restarts on both nodes, every rank resumes from the same
  checkpoint step, and it ends at the same loss;
- a 2-job sweep through `hydra/launcher=slurm` with trainer.num_nodes=2 (nodes and tasks per node follow
  from the trainer config) collects into a runs table.

The module restores the default single-node cluster when it is done.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from loopscale.data.shards import prepare
from loopscale.train.run_json import TABLE_COLUMNS, read_record
from support.paths import REPO_ROOT
from support.procs import run_loopscale
from support.slurm import job_records, requeue, submit, wait_for_file, wait_for_jobs
from support.train import TINY, train_config

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

TRAIN_SBATCH = REPO_ROOT / "slurm" / "train.sbatch"
# 12 steps of 16 x 64 tokens (8 windows per rank on two ranks), a checkpoint every 4 steps; one torch
# thread per process (each node has one CPU).
RUN = [*TINY, "budget.tokens=12288", "trainer.ckpt_every_steps=4", "trainer.num_threads=1", "data.val_tokens=4096"]
JOB_TIMEOUT_S = 300


def _one_run_dir(runs_dir: Path) -> Path:
    (record,) = runs_dir.glob("*/*/run.json")
    return record.parent


@pytest.fixture(scope="module")
def corpus(data_dir):
    prepare(train_config([*RUN, f"data.data_dir={data_dir}"]).data, progress=False)
    return data_dir


@pytest.fixture(scope="module")
def one_process(corpus, tmp_path_factory):
    """The reference: the same run in one process, no SLURM."""
    runs = tmp_path_factory.mktemp("one_process") / "runs"
    proc = run_loopscale(
        [*RUN, f"data.data_dir={corpus}", f"runs_dir={runs}"], cwd=runs.parent, module="loopscale.train.entry"
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return read_record(_one_run_dir(runs))


def submit_two_node_run(corpus: Path, runs: Path, *extra: str) -> str:
    """slurm/train.sbatch on 2 nodes x 1 task; the template passes trainer.devices=1, trainer.num_nodes=2."""
    env = {**os.environ, "LOOPSCALE_TRAIN": f"{sys.executable} -m loopscale.train.entry", "PYTHONUNBUFFERED": "1"}
    return submit(
        [
            "--nodes=2",
            "--ntasks-per-node=1",
            "--cpus-per-task=1",
            "--gpus-per-node=0",
            str(TRAIN_SBATCH),
            *RUN,
            f"data.data_dir={corpus}",
            f"runs_dir={runs}",
            "trainer.strategy=ddp",
            *extra,
        ],
        cwd=runs.parent,
        env=env,
    )


def assert_ran_on_both_nodes(record: dict, nodes: list[str]) -> None:
    ranks = sorted(record["ranks"], key=lambda r: r["rank"])
    assert [r["rank"] for r in ranks] == [0, 1]
    assert [r["node_id"] for r in ranks] == ["0", "1"]  # SLURM_NODEID of each rank
    assert [r["node"] for r in ranks] == nodes
    assert record["config"]["trainer"]["num_nodes"] == 2 and record["config"]["trainer"]["devices"] == 1


def test_two_node_run_trains_on_both_nodes_to_the_one_process_loss(slurm_two_nodes, corpus, one_process, tmp_path):
    started = time.perf_counter()
    runs = tmp_path / "runs"
    job = submit_two_node_run(corpus, runs)
    assert wait_for_jobs([job], timeout_s=JOB_TIMEOUT_S) == {job: "COMPLETED"}
    assert job_records(job)[job]["NodeList"] == "loopscale-n[1-2]"
    record = read_record(_one_run_dir(runs))
    assert record["status"] == "done"
    assert_ran_on_both_nodes(record, slurm_two_nodes)
    # the same global batch (16 x 64 tokens a step, 8 windows on each rank) for the same steps
    for key in ("batch_tokens", "steps", "D", "C"):
        assert record[key] == one_process[key], key
    assert record["config"]["budget"]["batch_size"] == one_process["config"]["budget"]["batch_size"] == 16
    assert abs(record["L"] - one_process["L"]) < 1e-4, (record["L"], one_process["L"])
    print(
        f"2 nodes x 1 task: L = {record['L']:.6f}, one process {one_process['L']:.6f}; "
        f"job {time.perf_counter() - started:.1f} s"
    )


def test_requeued_two_node_job_resumes_on_both_nodes_to_the_same_loss(slurm_two_nodes, corpus, one_process, tmp_path):
    runs = tmp_path / "runs"
    job = submit_two_node_run(corpus, runs)
    ckpt = wait_for_file(runs, "*/*/checkpoints/last.ckpt", timeout_s=JOB_TIMEOUT_S)
    requeue(job)  # SIGTERM to both ranks, back to PENDING, started again at once
    assert wait_for_jobs([job], timeout_s=JOB_TIMEOUT_S) == {job: "COMPLETED"}
    assert job_records(job)[job]["Restarts"] == "1"
    record = read_record(ckpt.parent.parent)
    assert record["status"] == "done" and record["step"] == record["steps"]
    assert_ran_on_both_nodes(record, slurm_two_nodes)
    resumed = {r["resumed_from_step"] for r in record["ranks"]}
    assert len(resumed) == 1 and 0 < record["resumed_from_step"] < record["steps"], record["ranks"]
    assert resumed == {record["resumed_from_step"]}
    assert len(list((ckpt.parent.parent / "metrics").glob("version_*"))) == 2  # one CSV log per attempt
    assert abs(record["L"] - one_process["L"]) < 1e-4, (record["L"], one_process["L"])
    log = (runs.parent / f"slurm-loopscale-{job}.out").read_text()
    assert "restart 0 on loopscale-n[1-2]" in log and "restart 1 on loopscale-n[1-2]" in log
    print(
        f"requeued 2-node job resumed from step {record['resumed_from_step']} on both ranks: "
        f"L = {record['L']:.6f}, one process {one_process['L']:.6f}"
    )


def test_two_node_sweep_through_the_hydra_launcher_collects(slurm_two_nodes, corpus, tmp_path):
    """Two jobs (r = 1, 2), each over both nodes: the launcher takes nodes = 2 and 1 task per node from
    trainer.num_nodes and trainer.devices."""
    runs = tmp_path / "runs"
    proc = run_loopscale(
        [
            "-m",
            *RUN,
            "model.r=1,2",
            f"data.data_dir={corpus}",
            f"runs_dir={runs}",
            "sweep=two_nodes",
            "trainer.num_nodes=2",
            "trainer.strategy=ddp",
            "hydra/launcher=slurm",
            "hydra.launcher.cpus_per_task=1",
            "hydra.launcher.timeout_min=10",
        ],
        cwd=tmp_path,
        timeout_s=2 * JOB_TIMEOUT_S,
        module="loopscale.train.entry",
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "SLURM layout: 2 node(s) x 1 task(s)" in proc.stdout + proc.stderr
    sweep = runs / "two_nodes"
    records = {p.parent.name: json.loads(p.read_text()) for p in sweep.glob("*/run.json")}
    assert len(records) == 2
    for record in records.values():
        assert record["status"] == "done"
        assert_ran_on_both_nodes(record, slurm_two_nodes)
    collect = run_loopscale(["collect", sweep], cwd=REPO_ROOT, timeout_s=120)
    assert collect.returncode == 0, collect.stderr[-3000:]
    table = pd.read_csv(sweep / "runs.csv")
    assert list(table.columns) == TABLE_COLUMNS and sorted(table.r) == [1, 2]
    assert dict(zip(table.run_name, table.L)) == {name: r["L"] for name, r in records.items()}
