"""One process per run directory, across the nodes of a cluster that share a file system.

The lock is the file `<run_dir>/.lock`, created with O_CREAT | O_EXCL (atomic on local file systems and on
NFS v3+, where `flock`/`fcntl` locks are not always shared between nodes). It holds its owner: host, pid,
the pid's start time and the host's boot id, SLURM job id, start time. While the run trains, a thread
touches the file every HEARTBEAT_S seconds (its mtime is the heartbeat).

A lock is stale, and is taken over, when
- its heartbeat is older than STALE_AFTER_S, on any host, whatever its pid (a live pid can be another
  process: pids are reused after a container or node restart); a heartbeat that far in the FUTURE is
  stale too (a clock cannot be that wrong while its owner lives);
- its owner is on this host and its pid no longer exists, or that pid is now another process (another
  start time or boot id), or it is this very process, which does not hold it;
- it is not a lock at all: a directory, a symlink (dangling or not), or a file that is not a lock record
  and is older than GARBAGE_GRACE_S (a writer fills its new lock right after creating it).
Otherwise the run is running elsewhere: `acquire` raises RunLocked, which loopscale-train reports and
exits 0 from, touching nothing in the run dir.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import socket
import stat
import threading
import time
from pathlib import Path
from typing import TypedDict

log = logging.getLogger("loopscale.train.lock")

LOCK_FILE = ".lock"
HEARTBEAT_S = 30.0
STALE_AFTER_S = 600.0  # 20 missed heartbeats: a live owner on a loaded node is never taken for dead
GARBAGE_GRACE_S = 5.0  # a new lock file is filled at once; one still unreadable after this never will be
_HELD_TOKENS: set[str] = set()  # locks this process holds (a lock naming our pid but not here is stale)


class LockOwner(TypedDict, total=False):
    """The lock file's JSON (_owner_record); {} for a file that is not one. RunLocked adds the heartbeat's age."""

    host: str
    pid: int
    pid_start: int | None  # the pid's start, in clock ticks since boot (a reused pid is another process)
    boot_id: str | None
    slurm_job_id: str | None
    started: float  # time.time()
    token: str  # this holding's own (a lock naming our pid but another token is stale)
    heartbeat_age_s: float


class RunLocked(RuntimeError):
    """Another live process holds the run dir."""

    def __init__(self, run_dir: Path, owner: LockOwner):
        self.run_dir, self.owner = run_dir, owner
        job = f", SLURM job {owner['slurm_job_id']}" if owner.get("slurm_job_id") else ""
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(owner.get("started") or 0))
        beat = f", last heartbeat {owner['heartbeat_age_s']:.0f} s ago" if "heartbeat_age_s" in owner else ""
        super().__init__(
            f"{run_dir} is running elsewhere (host {owner.get('host')}, pid {owner.get('pid')}{job}, "
            f"since {since}{beat}): not touching it"
        )

    def __reduce__(self):  # crosses process boundaries (worker pools): rebuilt from its arguments
        return type(self), (self.run_dir, self.owner)


def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def _pid_start(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (Linux), which tells a reused pid apart."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[19])  # field 22 of proc(5); fields[0] is field 3
    except (OSError, IndexError, ValueError):
        return None


def _owner_record() -> LockOwner:
    job = os.environ.get("SLURM_JOB_ID")
    if job and os.environ.get("SLURM_ARRAY_JOB_ID"):
        job = f"{os.environ['SLURM_ARRAY_JOB_ID']}_{os.environ.get('SLURM_ARRAY_TASK_ID', '')}"
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "pid_start": _pid_start(os.getpid()),
        "boot_id": _boot_id(),
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
    except (OverflowError, ValueError):  # not a pid at all
        return False
    return True


def _read_owner(path: Path) -> LockOwner | None:
    """The lock's owner record; None when there is no lock; {} when `path` is not a lock record (garbage,
    a directory, a symlink: never followed)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return {}
    try:
        owner = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}
    ok = isinstance(owner, dict) and isinstance(owner.get("host"), str) and isinstance(owner.get("pid"), int)
    return owner if ok else {}


def _file_id(path: Path) -> tuple[int, int] | None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


def _heartbeat_age(path: Path, now: float | None = None) -> float | None:
    try:
        return (now or time.time()) - os.lstat(path).st_mtime
    except FileNotFoundError:
        return None


def stale_reason(path: Path, owner: LockOwner, now: float | None = None) -> str | None:
    """Why the lock at `path` (whose record is `owner`, {} for garbage) is stale, or None if it is live."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "gone"
    age = (now or time.time()) - st.st_mtime
    if not owner:
        if not stat.S_ISREG(st.st_mode):
            return "not a lock file"
        return "not a lock record" if abs(age) > GARBAGE_GRACE_S else None
    if abs(age) > STALE_AFTER_S:
        return f"no heartbeat for {age:.0f} s" if age > 0 else f"heartbeat {-age:.0f} s in the future"
    if owner["host"] != socket.gethostname():
        return None
    pid = owner["pid"]
    if not _pid_alive(pid):
        return f"pid {pid} is gone"
    if pid == os.getpid() and owner.get("token") not in _HELD_TOKENS:
        return "it names this process, which does not hold it"
    if owner.get("boot_id") and _boot_id() and owner["boot_id"] != _boot_id():
        return "the host rebooted since"
    if owner.get("pid_start") is not None and _pid_start(pid) not in (None, owner["pid_start"]):
        return f"pid {pid} is another process now"
    return None


def lock_state(run_dir: Path | str, now: float | None = None) -> tuple[str, str] | None:
    """What the run dir's lock says about the process that trains it: ("running", who and its last
    heartbeat) while the holder lives, ("stale", why it is dead: stale_reason) when it left the lock behind,
    None when there is no lock (no one trains there; a finished or failed run releases its lock)."""
    path = Path(run_dir) / LOCK_FILE
    owner = _read_owner(path)
    if owner is None:
        return None
    now = now or time.time()
    reason = stale_reason(path, owner, now)
    if reason == "gone":
        return None
    who = f"host {owner.get('host')}, pid {owner.get('pid')}" if owner else "a lock file that is not a record"
    age = _heartbeat_age(path, now)
    beat = "" if age is None else f", last heartbeat {max(age, 0.0):.0f} s ago"
    if reason is None:
        return "running", f"held by {who}{beat}"
    return "stale", f"its lock ({who}{beat}) is stale: {reason}"


def release_dead_holder(run_dir: Path | str, pid: int) -> bool:
    """Delete the run dir's lock if process `pid` of this host holds it and is gone (a pool worker that was
    killed: its parent knows it died, so the next launch or `collect` need not judge the lock stale).
    True when a lock was deleted."""
    path = Path(run_dir) / LOCK_FILE
    owner = _read_owner(path)
    if not owner or owner["pid"] != pid or owner["host"] != socket.gethostname() or _pid_alive(pid):
        return False
    path.unlink(missing_ok=True)
    return True


class RunLock:
    """`with RunLock(run_dir):` holds the run dir for this process (raises RunLocked if someone else does)."""

    def __init__(self, run_dir: Path | str):
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOCK_FILE
        self.owner: LockOwner | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def acquire(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        owner = _owner_record()
        payload = json.dumps(owner).encode()
        for _ in range(5):
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            except FileExistsError:
                seen = _file_id(self.path)
                held = _read_owner(self.path)
                if held is None:
                    continue  # released between the two calls: try again
                reason = stale_reason(self.path, held)
                if reason is None:
                    raise RunLocked(self.run_dir, {**held, "heartbeat_age_s": _heartbeat_age(self.path) or 0}) from None
                if reason != "gone":
                    log.warning("%s: taking over a stale lock (%s)", self.path, reason)
                    self._break(seen)
                continue
            try:
                os.write(fd, payload)
                os.fsync(fd)
            finally:
                os.close(fd)
            self.owner = owner
            _HELD_TOKENS.add(owner["token"])
            self._thread = threading.Thread(target=self._beat, name=f"runlock-{self.run_dir.name}", daemon=True)
            self._thread.start()
            return
        raise RunLocked(self.run_dir, _read_owner(self.path) or {})

    def _break(self, seen: tuple[int, int] | None) -> None:
        """Move the stale lock `seen` (its file id) aside and delete it. A rename is atomic: of two processes
        breaking it, one wins; a fresh lock taken in between is put back (the caller then finds it live)."""
        aside = self.path.with_name(f"{LOCK_FILE}.stale-{secrets.token_hex(4)}")
        try:
            os.rename(self.path, aside)
        except FileNotFoundError:
            return
        if _file_id(aside) != seen:  # we moved a lock taken after we judged the old one: put it back
            try:
                os.rename(aside, self.path) if os.path.isdir(aside) else os.link(aside, self.path)
            except OSError:  # yet another lock is already there: the caller judges that one
                pass
            if not os.path.isdir(aside):
                aside.unlink(missing_ok=True)
            return
        if stat.S_ISDIR(os.lstat(aside).st_mode):
            try:
                aside.rmdir()
            except OSError:  # a folder with contents: not ours to delete, only to move out of the way
                log.warning("%s was a folder with contents; moved it to %s", self.path, aside)
            return
        aside.unlink(missing_ok=True)

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            if (_read_owner(self.path) or {}).get("token") != self.owner["token"]:
                log.warning("%s: lost the lock (taken over after a long pause?); heartbeat stopped", self.path)
                return  # touching another owner's lock would keep it alive for the wrong process
            try:
                os.utime(self.path, follow_symlinks=False)
            except OSError:  # a full or vanished file system: the run itself will report it
                pass

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self.owner is not None:
            _HELD_TOKENS.discard(self.owner["token"])
            if (_read_owner(self.path) or {}).get("token") == self.owner["token"]:
                self.path.unlink(missing_ok=True)
        self.owner = None

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()
