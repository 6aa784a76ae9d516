"""Ctrl-C and SIGTERM at each moment of a local pool's life (hydra/launcher=local_pool), as docs/operations.md
promises them: exit 130 / 143 with one line saying so, no traceback, every stopped run's record
"interrupted" / "terminated" (a finished one stays "done"), no process left. The moments: Hydra still planning
the jobs (no worker yet), the workers still starting (importing; no job begun), a worker between jobs while
the other trains; mid-step is test_local_pool.py's. Ctrl-C goes to the process group, as a terminal sends it;
SIGTERM to the launching process alone, as `kill PID` or a scheduler does (the SIGTERM cases are slow, as is
the loop over many moments). The worker-start case runs with SIGINT ignored in pytest, as when the suite runs
as a script's background job: the harness must still give the command a terminal's Ctrl-C."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from support.procs import cmdline, finish, orphans, signal_group, signal_masks, start_loopscale, tree, wait_until
from support.train import TINY

POOL = ["hydra/launcher=local_pool", "hydra.launcher.workers=2", "hydra.launcher.threads_per_worker=1"]
LONG = "budget.tokens=2048000"  # ~2000 steps: still training when the signal comes
STOPS = [
    pytest.param(signal.SIGINT, 130, "interrupted", id="ctrl-c"),
    pytest.param(signal.SIGTERM, 143, "terminated", id="sigterm", marks=pytest.mark.slow),
]
# The stop races seen in fresh-clone CI runs under load are fixed: a stop raised while omegaconf builds a config
# (Hydra's sweeper composing the sweep; Hydra's import storing its structured configs, stop 45's CI) unwound
# through omegaconf's flag_override, whose clean-up then failed (an AttributeError, exit 1) -- signals.stop_behind
# reports the stop behind it, in loopscale.train.command and in the entry (test_entry_stops.py lands a stop there
# on purpose); a Ctrl-C in the first seconds landed in the Lightning import, before any handler --
# loopscale-train's module is now loopscale.train.command, which installs them first
# (benchmarks/bench_early_stops.py: 3 of 30 early stops kept the promise before, 40 of 40 after). The loop over
# many moments stays xfail (not strict) for what remains possible: a Ctrl-C that lands in code run through `exec`
# of a string after the imports makes CPython 3.11 end by SIGINT (rc -2, the line printed, a shell sees 130).
KNOWN_RACE = pytest.mark.xfail(reason="a Ctrl-C inside exec'd code: CPython exits by SIGINT (rc -2)")


def _start(tmp_path, data_dir, *extra):
    args = ["-m", *POOL, *TINY, f"runs_dir={tmp_path / 'runs'}", f"data.data_dir={data_dir}"]
    args += ["trainer.ckpt_every_steps=5", *extra]
    return start_loopscale(args, tmp_path, module="loopscale.train"), tmp_path / "runs" / "default"


def _records(sweep: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in sweep.glob("*/run.json")}


def _workers(pids) -> list[int]:
    """The pool's worker processes among `pids` (spawned: multiprocessing's spawn_main; not its resource
    tracker)."""
    return [p for p in pids if any("spawn_main" in part for part in cmdline(p))]


def _ignores_sigint(pid: int) -> bool:
    return bool(signal_masks(pid)["SigIgn"] & (1 << (signal.SIGINT - 1)))


def _stop(proc, seen: set[int], signum: int, code: int, word: str, sweep: Path) -> dict[str, dict]:
    """Send the stop; assert the promise (exit code, one line, no traceback, nothing left); the records."""
    if signum == signal.SIGINT:
        sent = signal_group(proc, signum)
    else:
        proc.send_signal(signum)
        sent = time.monotonic()
    rc, _, out = finish(proc, sent)
    assert rc == code and "Traceback" not in out, out[-3000:]
    assert out.count(f"loopscale-train: {word}") == 1, out[-3000:]
    assert out.strip().splitlines()[-1].startswith(f"loopscale-train: {word}"), out[-3000:]
    assert orphans(seen | set(tree(proc.pid))) == []
    records = _records(sweep)
    for name, record in records.items():  # nothing half-way: a run ends done, or says how it was stopped
        assert record["status"] in ("done", word), (name, record)
        if record["status"] == word:
            assert record["reason"] == f"{word} ({'Ctrl-C / SIGINT' if code == 130 else 'SIGTERM'})", record
    return records


@pytest.mark.parametrize("signum, code, word", STOPS)
def test_a_stop_while_the_training_stack_imports(tmp_path, data_dir, signum, code, word):
    """0.3 s after the launch `loopscale-train` (`python -m loopscale.train`: loopscale/train/command.py) is still
    importing torch, Lightning and Hydra (seconds): the stop is one line and its code, not a KeyboardInterrupt
    traceback or a silent kill, and nothing was planned."""
    proc, sweep = _start(tmp_path, data_dir, LONG, "seed=0,1")
    time.sleep(0.3)
    assert proc.poll() is None
    _stop(proc, {proc.pid}, signum, code, word, sweep)
    assert not sweep.exists()


@pytest.mark.parametrize("signum, code, word", STOPS)
def test_a_stop_while_hydra_plans_the_jobs(tmp_path, data_dir, signum, code, word):
    """Hydra has written the sweep's multirun.yaml and the launcher composes its 6 jobs: nothing has started,
    nothing is recorded, the one line says so."""
    proc, sweep = _start(tmp_path, data_dir, LONG, "seed=0,1,2,3,4,5")
    seen = wait_until(proc, lambda _: (sweep / "multirun.yaml").is_file())
    records = _stop(proc, seen, signum, code, word, sweep)
    assert records == {}, records


@pytest.fixture
def sigint_ignored():
    """This process ignores SIGINT, as pytest run by a script as `pytest ... &` does (POSIX: a background
    job of a shell without job control)."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize("signum, code, word", STOPS)
def test_a_stop_while_the_workers_start(tmp_path, data_dir, sigint_ignored, signum, code, word):
    """Both workers spawned and importing, no job begun (each worker holds SIGINT back until its handlers
    are in: signals.stops_held). Started by a pytest that ignores SIGINT, the command still has it."""
    proc, sweep = _start(tmp_path, data_dir, LONG, "seed=0,1")
    assert not _ignores_sigint(proc.pid)
    seen = wait_until(proc, lambda pids: len(_workers(pids)) >= 2, timeout_s=300)
    assert not list(sweep.glob("*/run.json")), "a job had begun: not the moment this test is about"
    _stop(proc, seen, signum, code, word, sweep)


@pytest.mark.parametrize("signum, code, word", STOPS)
def test_a_stop_while_a_worker_is_between_jobs(tmp_path, data_dir, signum, code, word):
    """Three jobs on two workers, longest first: one worker trains the long job while the other trains both
    one-step jobs and waits for another. The finished runs stay done, the long one is stopped mid-run."""
    proc, sweep = _start(tmp_path, data_dir, "budget.tokens=1024,2048,2048000")
    long_ckpt = "*D2.05e6/checkpoints/last.ckpt"

    def between(_) -> bool:
        done = [r for r in _records(sweep).values() if r["status"] == "done"]
        return len(done) == 2 and any(sweep.glob(long_ckpt))

    seen = wait_until(proc, between)
    records = _stop(proc, seen, signum, code, word, sweep)
    assert sorted(r["status"] for r in records.values()) == ["done", "done", word], records
    stopped = next(r for r in records.values() if r["status"] == word)
    assert 0 < stopped["step"] < stopped["steps"], stopped


MOMENTS_S = [0.5, 1.5, 3, 4.5, 6, 8, 10, 13, 16, 20]  # from the launch: planning, workers starting, training


@pytest.mark.slow  # ~3 min: a pool launched and stopped at each moment, Ctrl-C and SIGTERM in turn
@KNOWN_RACE
def test_a_stop_at_many_moments_always_keeps_the_promise(tmp_path, data_dir):
    for i, delay_s in enumerate(MOMENTS_S):
        signum, code, word = (signal.SIGINT, 130, "interrupted") if i % 2 == 0 else (signal.SIGTERM, 143, "terminated")
        run_path = tmp_path / f"m{i}"
        run_path.mkdir()
        proc, sweep = _start(run_path, data_dir, LONG, "seed=0,1")
        started = time.monotonic()
        seen = wait_until(proc, lambda _, t0=started, wait_s=delay_s: time.monotonic() - t0 >= wait_s)
        _stop(proc, seen, signum, code, word, sweep)
