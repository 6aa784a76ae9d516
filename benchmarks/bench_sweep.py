"""Scheduler overhead: the 4-job `isodepth_cpu` mini-sweep through SLURM vs the same 4 runs in one process.

The same multirun (r = 1, 2 at two budgets of width 64, 23-45 steps each; the size of the mini-sweep of
tests/system/test_slurm_sweep.py) is launched three ways on this machine:
  1. `hydra/launcher=basic`: one process runs the 4 jobs one after the other (imports once);
  2. `hydra/launcher=slurm` with `array_parallelism=1`: a SLURM array job whose tasks run one at a time,
     so the difference from (1) is the scheduler's cost (sbatch, job start, a fresh Python and torch /
     Lightning import per job, submitit's pickles and result polling);
  3. `hydra/launcher=slurm`: the tasks run as the node allows (2 CPUs, one per job: two at once).
Each job trains on one torch thread, so every launcher does the same work per run. Printed: the wall time
of each multirun, the training time inside it (sum of run.json wall_time_s), and the overhead.

Needs the one-node test cluster (root and `bash slurm/install.sh`); it is started if not running and
stopped again afterwards.

    .venv/bin/python benchmarks/bench_sweep.py [--skip-serial]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from loopscale.config.dirs import train_config
from loopscale.data.shards import prepare

REPO_ROOT = Path(__file__).resolve().parents[1]
CLUSTER_SH = REPO_ROOT / "slurm" / "cluster.sh"
SWEEP = "isodepth_cpu"
MINI = [
    f"experiment={SWEEP}",
    "model.r=1,2",
    "point=C5e10-d64,C1e11-d64",
    "trainer.progress=false",
    "trainer.num_threads=1",
    "data.val_tokens=2048",
]
# The node's default partition (partition null), no GPU, one CPU per job.
SLURM = [
    "hydra/launcher=slurm",
    "hydra.launcher.gpus_per_node=0",
    "hydra.launcher.cpus_per_task=1",
    "hydra.launcher.timeout_min=10",
]
MULTIRUN_TIMEOUT_S = 300


def run_cluster_sh(action: str, timeout_s: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(CLUSTER_SH), action], capture_output=True, text=True, timeout=timeout_s)


def default_node() -> tuple[str, int]:
    """(node name, CPUs) of the default partition's first node, as sinfo lists it (marked '*')."""
    out = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %P %c"], capture_output=True, text=True, check=True).stdout
    for node, partition, cpus in (line.split() for line in out.splitlines()):
        if partition.endswith("*"):
            return node, int(cpus)
    raise SystemExit(f"no default partition in sinfo output:\n{out}")


def launch(name: str, launcher: list[str], workdir: Path, data_dir: Path) -> dict:
    runs_dir = workdir / "".join(c if c.isalnum() else "_" for c in name)  # a Hydra-safe value (no commas)
    args = [
        sys.executable,
        "-m",
        "loopscale.train.entry",
        "-m",
        *MINI,
        *launcher,
        f"runs_dir={runs_dir}",
        f"data.data_dir={data_dir}",
    ]
    started = time.perf_counter()
    proc = subprocess.run(args, cwd=workdir, capture_output=True, text=True, timeout=MULTIRUN_TIMEOUT_S)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{name} multirun failed:\n{proc.stderr[-3000:]}")
    records = [json.loads(p.read_text()) for p in (runs_dir / SWEEP).glob("*/run.json")]
    if len(records) != 4 or any(r["status"] != "done" for r in records):
        raise SystemExit(f"{name}: expected 4 finished runs, got {[(r['run_name'], r['status']) for r in records]}")
    return {
        "name": name,
        "wall_s": wall,
        "train_s": sum(r["wall_time_s"] for r in records),
        "steps": sum(r["steps"] for r in records),
        "L": {r["run_name"]: r["L"] for r in records},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-serial", action="store_true", help="skip the SLURM run with array_parallelism=1")
    args = parser.parse_args()

    started_here = False
    if run_cluster_sh("status", timeout_s=30).returncode != 0:
        start = run_cluster_sh("start")
        if start.returncode != 0:
            raise SystemExit(f"could not start the test cluster:\n{start.stderr[-2000:]}")
        started_here = True
    try:
        node, cpus = default_node()
        slurm = SLURM
        with tempfile.TemporaryDirectory(prefix="bench_sweep_") as tmp:
            workdir = Path(tmp)
            data_dir = workdir / "data"
            # tokenize once, outside the timings: every variant reads the same cache
            prepare(train_config([f"experiment={SWEEP}", f"data.data_dir={data_dir}"]).data, progress=False)
            results = [launch("basic", ["hydra/launcher=basic"], workdir, data_dir)]
            if not args.skip_serial:
                results.append(
                    launch("slurm, 1 at a time", [*slurm, "hydra.launcher.array_parallelism=1"], workdir, data_dir)
                )
            results.append(launch(f"slurm, {cpus} CPUs", slurm, workdir, data_dir))
    finally:
        if started_here:
            run_cluster_sh("stop")

    base = results[0]
    print(
        f"4-job isodepth_cpu mini-sweep ({base['steps']} steps in all), node {node} with "
        f"{cpus} CPUs, one torch thread per job"
    )
    print(f"{'launcher':<22}{'wall s':>9}{'train s':>9}{'wall - basic':>14}{'per job':>10}")
    for r in results:
        extra = r["wall_s"] - base["wall_s"]
        print(f"{r['name']:<22}{r['wall_s']:>9.1f}{r['train_s']:>9.1f}{extra:>+14.1f}{extra / 4:>+10.1f}")
    same = all(abs(r["L"][k] - base["L"][k]) < 1e-5 for r in results for k in base["L"])
    print(f"final losses identical across launchers (1e-5): {same}")


if __name__ == "__main__":
    main()
