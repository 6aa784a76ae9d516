"""Issue 29 (11): `loopscale status` tells a run that is training from one whose process died, by the run dir's
lock (loopscale/train/lock.py): a lock whose holder lives and beats is "running"; one whose holder is gone
(its pid on this host) or silent (no heartbeat for STALE_AFTER_S, on any host) is "stale". Real lock files,
the command in-process."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

from loopscale.train.lock import LOCK_FILE, STALE_AFTER_S, RunLock
from support.cli import run_cli


def _never_a_pid() -> int:
    """A pid no process can have: pids stay below kernel.pid_max."""
    return int(Path("/proc/sys/kernel/pid_max").read_text())


def _plant_lock(run_dir: Path, host: str, pid: int, age_s: float = 0.0) -> None:
    run_dir.mkdir(parents=True)
    lock = run_dir / LOCK_FILE
    lock.write_text(json.dumps({"host": host, "pid": pid, "started": time.time() - age_s, "token": "t"}))
    os.utime(lock, (time.time() - age_s, time.time() - age_s))


def _started(run_dir: Path, record: dict | None = None) -> None:
    (run_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
    (run_dir / "checkpoints" / "last.ckpt").write_bytes(b"ckpt")
    if record is not None:
        (run_dir / "run.json").write_text(json.dumps(record))


def test_status_tells_running_from_dead_runs_by_the_lock(tmp_path):
    sweep = tmp_path / "sweep"
    _plant_lock(sweep / "dead", socket.gethostname(), _never_a_pid())
    _started(sweep / "dead")
    _plant_lock(sweep / "silent", "another-node", 12345, age_s=STALE_AFTER_S + 60)
    _started(sweep / "silent")
    _started(sweep / "killed")  # no lock at all: killed long ago, as before
    with RunLock(sweep / "live"), RunLock(sweep / "resumed"):  # held by this (live) process
        _started(sweep / "live")
        _started(sweep / "resumed", {"status": "interrupted", "reason": "interrupted (Ctrl-C / SIGINT)", "step": 7})
        res = run_cli(["status", sweep, "--json"])
        table = run_cli(["status", sweep])
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    by_run = {Path(p["run_dir"]).name: p for p in report["problems"]}
    assert {name: p["status"] for name, p in by_run.items()} == {
        "dead": "stale",
        "silent": "stale",
        "killed": "incomplete",
        "live": "running",
        "resumed": "running",  # trains again after its Ctrl-C: running, not interrupted
    }
    assert (report["counts"]["running"], report["counts"]["stale"]) == (2, 2)
    assert f"pid {_never_a_pid()} is gone" in by_run["dead"]["reason"]
    assert "no heartbeat for" in by_run["silent"]["reason"] and "another-node" in by_run["silent"]["reason"]
    assert str(os.getpid()) in by_run["live"]["reason"] and "heartbeat" in by_run["live"]["reason"]
    assert "running" in table.stdout and "stale" in table.stdout
