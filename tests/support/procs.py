"""Child processes for the tests that need one (system tier): the one way to run a Python child and wait
for it (run_python; the loopscale command lines through run_loopscale; modules_loaded_by for what an import
really pulls in), and real signals: start a command in its own session (a process group, as a terminal runs
it), wait until some observable state holds, signal it, and check that nothing it started is left running.
No sleeps stand in for synchronisation: every wait polls a condition. Error paths of the `loopscale`
command run in-process instead (the `cli` fixture, support/cli.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from loopscale.signals import sigint_at_default


def run_python(
    args: list,
    cwd: Path | None = None,
    timeout_s: float = 600,
    env: dict | None = None,
    drop_env: tuple[str, ...] = (),
) -> subprocess.CompletedProcess:
    """`python ARGS` with the current interpreter in a child process (a script, `-c CODE` or `-m MODULE`), its
    output captured as text. `env` entries are added to this process's environment after the variables that
    start with a prefix in `drop_env` are removed; output is unbuffered so a timeout still shows what was
    printed. The one way the tests start a Python child."""
    kept = {k: v for k, v in os.environ.items() if not k.startswith(drop_env)} if drop_env else dict(os.environ)
    return subprocess.run(
        [sys.executable, *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env={**kept, "PYTHONUNBUFFERED": "1", **(env or {})},
    )


def run_loopscale(
    args: list,
    cwd: Path | None = None,
    timeout_s: float = 600,
    env: dict | None = None,
    module: str = "loopscale",
    drop_env: tuple[str, ...] = (),
) -> subprocess.CompletedProcess:
    """`python -m MODULE ARGS`, the way a user or a SLURM job runs it (module "loopscale" for the `loopscale`
    CLI, "loopscale.train.entry" for `loopscale-train`); `env` and `drop_env` as in run_python."""
    return run_python(["-m", module, *args], cwd=cwd, timeout_s=timeout_s, env=env, drop_env=drop_env)


def modules_loaded_by(code: str) -> set[str]:
    """Every module in `sys.modules` after a fresh interpreter runs `code`: what an import really pulls in,
    deferred imports that `code` triggers included, with nothing this test process already imported."""
    proc = run_python(["-c", f"import sys, json\n{code}\nprint(json.dumps(sorted(sys.modules)))"], timeout_s=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return set(json.loads(proc.stdout.splitlines()[-1]))


def tree(pid: int) -> list[int]:
    """Every descendant of `pid` (children first), read from /proc: the children of each of its threads (a
    pool's manager thread starts workers too)."""
    kids = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            kids += [int(c) for c in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue
    return [k for c in dict.fromkeys(kids) for k in [c, *tree(c)]]


def cmdline(pid: int) -> list[str]:
    """A process's command line (empty once it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
    except (FileNotFoundError, ProcessLookupError):
        return []


def running(pid: int) -> bool:
    """The process exists and is not a zombie (an exited child that its new parent, init, has not reaped
    yet holds no resources: multiprocessing's resource tracker ends that way once its owner is gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def start(args: list, cwd: Path, env: dict | None = None) -> subprocess.Popen:
    """`args` in a new session (its own process group), output merged and captured as text, with SIGINT at
    its default as a terminal's foreground job has it, even when pytest runs as a script's background job
    (loopscale.signals.sigint_at_default)."""
    with sigint_at_default():
        return subprocess.Popen(
            [str(a) for a in args],
            cwd=cwd,
            start_new_session=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        )


def start_loopscale(args: list, cwd: Path, module: str = "loopscale", env: dict | None = None) -> subprocess.Popen:
    return start([sys.executable, "-m", module, *args], cwd, env)


def wait_until(proc: subprocess.Popen, ready: Callable[[set[int]], bool], timeout_s: float = 300) -> set[int]:
    """Poll until ready(descendants seen so far) holds; fails if the process ends first. Returns the
    descendants seen."""
    seen: set[int] = set()
    started = time.monotonic()
    while not ready(seen):
        seen |= set(tree(proc.pid))
        if proc.poll() is not None:
            pytest.fail(f"ended (rc {proc.returncode}) before it got ready: {proc.stdout.read()[-3000:]}")
        if time.monotonic() - started > timeout_s:
            stop_all(proc, seen)
            pytest.fail("never got ready")
        time.sleep(0.1)
    return seen | set(tree(proc.pid))


def finish(proc: subprocess.Popen, sent_at: float, timeout_s: float = 120) -> tuple[int, float, str]:
    """(exit code, seconds from `sent_at` to the exit, output) once the process ends."""
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        masks = signal_masks(proc.pid)  # a signal that was ignored or blocked there says why it went on
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        shown = ", ".join(f"{name} {mask:#x}" for name, mask in masks.items()) or "no /proc status"
        pytest.fail(f"still running {timeout_s} s after the signal ({shown}): {out[-2000:]}")
    return proc.returncode, time.monotonic() - sent_at, out


def signal_masks(pid: int) -> dict[str, int]:
    """The process's ignored, blocked and caught signals as /proc shows them (SigIgn, SigBlk, SigCgt; bit n-1 for
    signal n, so SigIgn & 0x2 means SIGINT is ignored there); {} once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
    except (FileNotFoundError, ProcessLookupError):
        return {}
    fields = (line.split() for line in status if line.startswith(("SigIgn:", "SigBlk:", "SigCgt:")))
    return {name.rstrip(":"): int(mask, 16) for name, mask in fields}


def signal_group(proc: subprocess.Popen, signum: int) -> float:
    """Send `signum` to the process group (Ctrl-C in a terminal reaches every process of it)."""
    os.killpg(proc.pid, signum)
    return time.monotonic()


def orphans(seen: set[int], grace_s: float = 15.0) -> list[int]:
    """The processes of `seen` still running once `grace_s` passed without all of them ending (polled);
    killed before returning, so a failing test leaves nothing behind."""
    deadline = time.monotonic() + grace_s
    while any(running(p) for p in seen) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [p for p in seen if running(p)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    return left


def stop_all(proc: subprocess.Popen, seen: set[int]) -> None:
    for pid in [proc.pid, *seen]:
        if running(pid):
            os.kill(pid, signal.SIGKILL)
