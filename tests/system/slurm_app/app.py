"""A tiny Hydra app that proves the SLURM mechanics the real sweeps rely on.

It writes one JSON record per run (and per SLURM task) with the value it computed and the SLURM
environment it saw, so a test can check that a Hydra multirun really ran as a SLURM array job and
that a requeued job really ran a second time.

Requeue probe: with `wait_for_requeue_s > 0`, the first run (no SLURM_RESTART_COUNT in the
environment) writes `started-x<x>.json` and sleeps, waiting for the test to `scontrol requeue` it; if
nobody does, it fails after that many seconds instead of hanging the test. The rerun Slurm starts
after a requeue has SLURM_RESTART_COUNT=1 and finishes normally.

Run directly: python tests/system/slurm_app/app.py out_dir=/tmp/x x=3
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path

import hydra
from omegaconf import DictConfig

# What a record keeps from the environment: enough to tell array jobs, tasks and restarts apart.
SLURM_VARS = (
    "SLURM_JOB_ID",
    "SLURM_ARRAY_JOB_ID",
    "SLURM_ARRAY_TASK_ID",
    "SLURM_RESTART_COUNT",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "SLURM_JOB_PARTITION",
    "SLURM_CPUS_PER_TASK",
)


def _write_json(path: Path, record: dict) -> None:
    """Write atomically, so a test polling for the file never reads half of it."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(record, indent=1, sort_keys=True))
    tmp.replace(path)


@hydra.main(version_base=None, config_path="conf", config_name="app")
def main(cfg: DictConfig) -> int:
    out_dir = Path(cfg.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    x = int(cfg.x)
    record = {
        "x": x,
        "value": x * x,
        "time": time.time(),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "slurm": {k: os.environ[k] for k in SLURM_VARS if k in os.environ},
        "trainer": {"devices": int(cfg.trainer.devices), "num_nodes": int(cfg.trainer.num_nodes)},
    }
    # One file per SLURM task, so a multi-task job shows every rank ran.
    rank = os.environ.get("SLURM_PROCID", "0")

    if cfg.wait_for_requeue_s > 0 and "SLURM_RESTART_COUNT" not in os.environ:
        _write_json(out_dir / f"started-x{x}.rank{rank}.json", record)
        time.sleep(cfg.wait_for_requeue_s)
        print(f"app: not requeued within {cfg.wait_for_requeue_s}s", file=sys.stderr)
        sys.exit(3)

    _write_json(out_dir / f"result-x{x}.rank{rank}.json", record)
    return x * x


if __name__ == "__main__":
    main()
