"""One process per run directory, across the nodes of a cluster that share a file system.

The lock is the file `<run_dir>/.lock`, created with O_CREAT | O_EXCL (atomic on local file systems and on
NFS v3+, where `flock`/`fcntl` locks are not always shared between nodes). It holds its owner: host, pid,
SLURM job id, start time. While the run trains, a thread touches the file every HEARTBEAT_S seconds.

A lock is stale, and is taken over, when its owner is on this host and its pid no longer exists, or when
it is on another host (a dead node cannot clean up) and it has not been touched for STALE_AFTER_S seconds.
Otherwise the run is running elsewhere: `acquire` raises RunLocked, which loopscale-train reports and
exits 0 from, touching nothing in the run dir.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import threading
import time
from pathlib import Path
from typing import Any

LOCK_FILE = ".lock"
HEARTBEAT_S = 30.0
STALE_AFTER_S = 600.0  # 20 missed heartbeats: a live owner on a loaded node is never taken for dead


class RunLocked(RuntimeError):
    """Another live process holds the run dir."""

    def __init__(self, run_dir: Path, owner: dict[str, Any]):
        self.run_dir, self.owner = run_dir, owner
        job = f", SLURM job {owner['slurm_job_id']}" if owner.get("slurm_job_id") else ""
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(owner.get("started", 0)))
        super().__init__(
            f"{run_dir} is running elsewhere (host {owner.get('host')}, pid {owner.get('pid')}{job}, "
            f"since {since}): not touching it"
        )


def _owner_record() -> dict[str, Any]:
    job = os.environ.get("SLURM_JOB_ID")
    if job and os.environ.get("SLURM_ARRAY_JOB_ID"):
        job = f"{os.environ['SLURM_ARRAY_JOB_ID']}_{os.environ.get('SLURM_ARRAY_TASK_ID', '')}"
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "slurm_job_id": job,
        "started": time.time(),
        "token": secrets.token_hex(8),
    }


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def _read_owner(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):  # being written right now, or garbage: judge by its age alone
        return {}


def is_stale(path: Path, owner: dict[str, Any], now: float | None = None) -> bool:
    if owner.get("host") == socket.gethostname() and isinstance(owner.get("pid"), int):
        return not _pid_alive(owner["pid"])
    try:
        age = (now or time.time()) - path.stat().st_mtime
    except FileNotFoundError:
        return True
    return age > STALE_AFTER_S


class RunLock:
    """`with RunLock(run_dir):` holds the run dir for this process (raises RunLocked if someone else does)."""

    def __init__(self, run_dir: Path | str):
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOCK_FILE
        self.owner: dict[str, Any] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def acquire(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        owner = _owner_record()
        payload = json.dumps(owner).encode()
        for _ in range(3):
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                held = _read_owner(self.path)
                if held is None:
                    continue  # released between the two calls: try again
                if not is_stale(self.path, held):
                    raise RunLocked(self.run_dir, held) from None
                self._break(held)
                continue
            try:
                os.write(fd, payload)
                os.fsync(fd)
            finally:
                os.close(fd)
            self.owner = owner
            self._thread = threading.Thread(target=self._beat, name=f"runlock-{self.run_dir.name}", daemon=True)
            self._thread.start()
            return
        raise RunLocked(self.run_dir, _read_owner(self.path) or {})

    def _break(self, stale: dict[str, Any]) -> None:
        """Move a stale lock aside (a rename is atomic: of two processes breaking it, one wins)."""
        aside = self.path.with_name(f"{LOCK_FILE}.stale-{secrets.token_hex(4)}")
        try:
            os.rename(self.path, aside)
        except FileNotFoundError:
            return
        if _read_owner(aside) not in (stale, None):  # we moved a fresh lock taken in between: put it back
            try:
                os.link(aside, self.path)
            except FileExistsError:
                pass
        aside.unlink(missing_ok=True)

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            try:
                os.utime(self.path)
            except OSError:  # a full or vanished file system: the run itself will report it
                pass

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self.owner is not None and (_read_owner(self.path) or {}).get("token") == self.owner["token"]:
            self.path.unlink(missing_ok=True)
        self.owner = None

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()
