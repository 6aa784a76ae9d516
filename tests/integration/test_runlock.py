"""Locks that clear: a run dir's `.lock` goes stale by its heartbeat's age on any host, and locks that are
not locks (a dangling symlink, garbage, a folder) or that name a pid now used by another process are taken
over, never reported as "running elsewhere" forever. Real processes and planted lock files."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from loopscale.train.lock import GARBAGE_GRACE_S, LOCK_FILE, STALE_AFTER_S, RunLock, RunLocked, stale_reason
from loopscale.train.run_json import read_record
from support.procs import run_loopscale
from support.train import TINY


def _plant(run_dir, owner: dict | None = None, age_s: float = 0.0, raw: bytes | None = None):
    run_dir.mkdir(parents=True, exist_ok=True)
    lock = run_dir / LOCK_FILE
    lock.write_bytes(raw if raw is not None else json.dumps(owner).encode())
    when = time.time() - age_s
    os.utime(lock, (when, when))
    return lock


def _owner(pid: int, **extra) -> dict:
    return {"host": socket.gethostname(), "pid": pid, "slurm_job_id": None, "started": time.time(), **extra}


@pytest.fixture
def other_process():
    """A live process that is not the lock's owner: what a reused pid points at after a restart."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    yield proc
    proc.kill()
    proc.wait()


def _takes_over(run_dir) -> None:
    with RunLock(run_dir) as held:
        assert json.loads((run_dir / LOCK_FILE).read_text())["token"] == held.owner["token"]
    assert not os.path.lexists(run_dir / LOCK_FILE)


def test_a_lock_naming_this_very_process_is_stale(tmp_path):
    # after a container restart the launcher may get the pid its dead predecessor wrote into the lock
    _plant(tmp_path / "run", _owner(os.getpid(), token="not-held-here"))
    _takes_over(tmp_path / "run")


@pytest.mark.system
def test_a_reused_pid_is_told_apart_by_its_start_time(tmp_path, other_process):
    lock = _plant(tmp_path / "run", _owner(other_process.pid, pid_start=1))  # the pid's old life started at tick 1
    assert "another process" in stale_reason(lock, json.loads(lock.read_text()))
    _takes_over(tmp_path / "run")


@pytest.mark.system
def test_a_live_pid_goes_stale_by_heartbeat_age_on_this_host_too(tmp_path, other_process):
    run_dir = tmp_path / "run"
    _plant(run_dir, _owner(other_process.pid))  # no start time recorded: only the heartbeat can tell
    with pytest.raises(RunLocked, match=f"pid {other_process.pid}"):
        RunLock(run_dir).acquire()
    _plant(run_dir, _owner(other_process.pid), age_s=STALE_AFTER_S + 60)
    _takes_over(run_dir)


def test_a_heartbeat_far_in_the_future_is_stale(tmp_path):
    _plant(tmp_path / "run", _owner(1, host="another-node"), age_s=-(STALE_AFTER_S + 60))
    _takes_over(tmp_path / "run")


@pytest.mark.parametrize("kind", ["dangling-symlink", "garbage", "empty", "json-list", "folder"])
def test_what_is_not_a_lock_is_taken_over(tmp_path, kind):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    lock = run_dir / LOCK_FILE
    if kind == "dangling-symlink":
        lock.symlink_to(tmp_path / "nowhere")
    elif kind == "folder":
        lock.mkdir()
    else:
        _plant(run_dir, raw={"garbage": b"\x00\xff not json", "empty": b"", "json-list": b"[1, 2]"}[kind])
    if kind in ("garbage", "empty", "json-list"):
        old = time.time() - GARBAGE_GRACE_S - 5
        os.utime(lock, (old, old))
    _takes_over(run_dir)


def test_a_folder_with_contents_at_the_lock_is_moved_aside_not_deleted(tmp_path):
    run_dir = tmp_path / "run"
    (run_dir / LOCK_FILE).mkdir(parents=True)
    (run_dir / LOCK_FILE / "keep.txt").write_text("someone's file")
    _takes_over(run_dir)
    (aside,) = run_dir.glob(f"{LOCK_FILE}.stale-*")
    assert (aside / "keep.txt").read_text() == "someone's file"


def test_a_lock_being_written_right_now_is_not_broken(tmp_path):
    _plant(tmp_path / "run", raw=b"")  # created a moment ago, its owner about to fill it
    with pytest.raises(RunLocked):
        RunLock(tmp_path / "run").acquire()


@pytest.mark.system
def test_loopscale_train_takes_over_a_lock_whose_pid_was_reused(tmp_path, data_dir, other_process):
    """The probe as a user meets it: a sweep relaunched after a restart found a same-host lock whose pid is
    alive (another process now) and said "running elsewhere" on every relaunch, forever."""
    runs = tmp_path / "runs"
    args = [*TINY, "budget.tokens=5120", f"runs_dir={runs}", f"data.data_dir={data_dir}", "run_name=r"]
    _plant(runs / "default" / "r", _owner(other_process.pid, pid_start=1), age_s=30)
    proc = run_loopscale(args, cwd=tmp_path, module="loopscale.train.entry")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "running elsewhere" not in proc.stderr + proc.stdout
    assert read_record(runs / "default" / "r")["status"] == "done"
