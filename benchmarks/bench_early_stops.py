"""A stop in the first seconds of `loopscale-train -m ... hydra/launcher=local_pool`: while the training stack
imports, while Hydra composes the sweep and the pool plans it, while the workers start. Does every stop give
its exit code and its one line, with no traceback and no process left?

    .venv/bin/python benchmarks/bench_early_stops.py [--runs 30] [--max-delay-s 6] [--modules NAME ...]

Each run launches a 6-job sweep of the tiny model (one seed each, ~2000 steps: nothing finishes) in its own
process group and sends the stop at a moment drawn uniformly from [0.1, --max-delay-s] seconds after the launch,
SIGINT to the group (a terminal's Ctrl-C) and SIGTERM to the launching process (`kill PID`) in turn. The
moments are seeded (--seed) and the same for every module, so `--modules loopscale.train loopscale.train.entry`
measures `python -m loopscale.train` (loopscale-train's own entry, loopscale/train/command.py) against the heavy
entry module (what the console script ran before 2026-12-03) on the same moments, on the same machine, in one
run. Prints each failure and, per module and signal, passes / runs.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_ctrl_c import _descendants  # the benchmarks' folder is on sys.path when one runs as a script
from bench_ctrl_c import _running as _alive

from loopscale.signals import sigint_at_default

SWEEP = ["-m", "hydra/launcher=local_pool", "hydra.launcher.workers=2", "hydra.launcher.threads_per_worker=1"]
SWEEP += ["model=tiny", "budget.tokens=2048000", "seed=0,1,2,3,4,5", "trainer.progress=false"]
EXPECTED = {signal.SIGINT: (130, "interrupted"), signal.SIGTERM: (143, "terminated")}


def one_stop(module: str, signum: int, delay_s: float, work: Path) -> str | None:
    """None when the promise held, else what went wrong."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    args = [sys.executable, "-m", module, *SWEEP, f"runs_dir={work / 'runs'}"]
    with sigint_at_default():
        proc = subprocess.Popen(
            args, cwd=work, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
    seen: set[int] = set()
    deadline = time.monotonic() + delay_s
    while time.monotonic() < deadline and proc.poll() is None:
        seen |= _descendants(proc.pid)
        time.sleep(0.02)
    seen |= _descendants(proc.pid)
    if signum == signal.SIGINT:
        os.killpg(proc.pid, signum)
    else:
        proc.send_signal(signum)
    try:
        out, _ = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
    code, word = EXPECTED[signum]
    time.sleep(0.5)
    left = [p for p in seen if _alive(p)]
    problems = [
        *([f"rc {proc.returncode}"] if proc.returncode != code else []),
        *(["traceback"] if "Traceback" in out else []),
        *(
            [f"{out.count('loopscale-train: ' + word)} stop lines"]
            if out.count(f"loopscale-train: {word}") != 1
            else []
        ),
        *([f"{len(left)} processes left"] if left else []),
    ]
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    if not problems:
        return None
    tail = [line for line in out.strip().splitlines() if line.strip()][-3:]
    return f"{', '.join(problems)}; last lines: {tail}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30, help="stops per module (SIGINT and SIGTERM in turn)")
    parser.add_argument("--max-delay-s", type=float, default=6.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--modules", nargs="+", default=["loopscale.train", "loopscale.train.entry"])
    args = parser.parse_args()
    rng = random.Random(args.seed)
    moments = [rng.uniform(0.1, args.max_delay_s) for _ in range(args.runs)]
    tally: dict[tuple[str, str], list[int]] = {}
    with tempfile.TemporaryDirectory(prefix="bench_early_stops_") as tmp:
        for i, delay_s in enumerate(moments):
            signum = signal.SIGINT if i % 2 == 0 else signal.SIGTERM
            for module in args.modules:
                why = one_stop(module, signum, delay_s, Path(tmp) / "work")
                passed = tally.setdefault((module, signal.Signals(signum).name), [0, 0])
                passed[0] += why is None
                passed[1] += 1
                if why is not None:
                    print(f"{module} {signal.Signals(signum).name} at {delay_s:.2f} s: {why}", flush=True)
    for (module, name), (ok, n) in sorted(tally.items()):
        print(f"{module:26s} {name:8s} {ok} of {n} kept the promise")
    return 0


if __name__ == "__main__":
    sys.exit(main())
