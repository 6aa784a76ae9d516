"""Ctrl-C during `loopscale demo` training, N times in a row on a loaded machine: does the demo end, with
its workers, quickly and cleanly every time?

    .venv/bin/python benchmarks/bench_ctrl_c.py [--runs 20] [--load N] [--out runs/bench_ctrl_c] [--data-dir DIR]

--load N busy processes (default: one per CPU) spin for the whole benchmark, like `stress -c N`. Then, per
run: `loopscale demo` (2 jobs: model.r=1,2 point=C6e10-d16, --bootstrap 0) starts in a fresh output folder
in its own process group; once both worker processes are up and training has begun (a metrics folder
exists), SIGINT goes to the group, as a terminal's Ctrl-C does. A run passes when the demo exits with 130
and the one line "loopscale demo: interrupted" (no traceback) within MAX_EXIT_S, no process it started is
still running after that, and every record its workers left says "interrupted". Prints each run and then the
pass count and the exit-time statistics (seconds from SIGINT to the demo's exit).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from loopscale.signals import sigint_at_default

REPO_ROOT = Path(__file__).resolve().parents[1]
MAX_EXIT_S = 10.0  # the default suite's Ctrl-C test allows this long
GRACE_S = 5.0  # a worker's last moments (its exit after the parent's) may end a little after the demo
DEMO = ["--bootstrap", "0", "model.r=1,2", "point=C6e10-d16"]


def _spin() -> None:
    while True:
        pass


def _descendants(pid: int) -> set[int]:
    try:
        kids = [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except FileNotFoundError:
        return set()
    return {k for c in kids for k in {c, *_descendants(c)}}


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:120]
    except OSError:
        return "?"


def _still_running(pids: set[int], grace_s: float) -> list[int]:
    """The processes of `pids` still running once all ended or `grace_s` passed (polled)."""
    deadline = time.monotonic() + grace_s
    while any(_running(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [p for p in pids if _running(p)]


def _start_demo(out: Path, data_dir: Path) -> subprocess.Popen:
    args = [sys.executable, "-m", "loopscale", "demo", "--out", str(out), "--data-dir", str(data_dir), *DEMO]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with sigint_at_default():  # as a terminal's foreground job, also when this benchmark runs in the background
        return subprocess.Popen(
            args,
            cwd=out.parent,
            start_new_session=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )


def one_run(out: Path, data_dir: Path) -> dict:
    """Start the demo, Ctrl-C it once training has begun; what happened."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    proc = _start_demo(out, data_dir)
    seen: set[int] = set()
    started = time.monotonic()
    while not (len(seen) >= 2 and any(out.glob("runs/*/*/metrics"))):  # polled: workers up, training begun
        seen |= _descendants(proc.pid)
        if proc.poll() is not None or time.monotonic() - started > 600:
            os.killpg(proc.pid, signal.SIGKILL)
            return {"ok": False, "why": f"not ready (rc {proc.poll()}): {proc.stdout.read()[-500:]}"}
        time.sleep(0.1)
    seen |= _descendants(proc.pid)
    os.killpg(proc.pid, signal.SIGINT)
    sent = time.monotonic()
    try:
        text, _ = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        text, _ = proc.communicate()
    exit_s = time.monotonic() - sent
    left = _still_running(seen, GRACE_S)
    names = sorted({_cmdline(p) for p in left})
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    records = [json.loads(p.read_text()) for p in out.glob("runs/*/*/*.json") if p.name != "identity.json"]
    statuses = sorted({r.get("status") for r in records})
    last = text.strip().splitlines()[-1] if text.strip() else ""
    problems = [
        *([f"rc {proc.returncode}"] if proc.returncode != 130 else []),
        *([f"last line {last!r}"] if last != "loopscale demo: interrupted" else []),
        *(["traceback"] if "Traceback" in text else []),
        *([f"exit {exit_s:.1f} s"] if exit_s > MAX_EXIT_S else []),
        *([f"{len(left)} processes left {GRACE_S:g} s after the exit: {names}"] if left else []),
        *([f"records {statuses}"] if statuses != ["interrupted"] else []),
    ]
    return {"ok": not problems, "why": "; ".join(problems), "exit_s": exit_s, "ready_s": sent - started}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--load", type=int, default=os.cpu_count() or 2, help="busy processes (default: CPUs)")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "runs" / "bench_ctrl_c")
    parser.add_argument(
        "--data-dir", type=Path, default=None, help="token cache, built by the first run (default OUT/data)"
    )
    args = parser.parse_args()
    out = args.out.resolve()
    data_dir = (args.data_dir or out / "data").resolve()
    spinners = [multiprocessing.get_context("spawn").Process(target=_spin, daemon=True) for _ in range(args.load)]
    for s in spinners:
        s.start()
    results = []
    try:
        for i in range(args.runs):
            result = one_run(out / "demo", data_dir)
            results.append(result)
            where = f"exit {result['exit_s']:.2f} s after SIGINT" if "exit_s" in result else ""
            print(f"run {i + 1:2d}: {'pass' if result['ok'] else 'FAIL'} {where} {result['why']}", flush=True)
    finally:
        for s in spinners:
            s.kill()
    times = [r["exit_s"] for r in results if "exit_s" in r]
    passed = sum(r["ok"] for r in results)
    print(f"\n{passed}/{len(results)} passed under {args.load} busy processes on {os.cpu_count()} CPUs")
    if times:
        print(
            f"exit after SIGINT: min {min(times):.2f} s, median {statistics.median(times):.2f} s, "
            f"mean {statistics.fmean(times):.2f} s, max {max(times):.2f} s"
        )
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
