"""hydra/launcher=local_pool (loopscale/launch/pool_launcher.py): a multirun on a pool of worker processes,
as a user runs it (`loopscale-train -m ... hydra/launcher=local_pool`): every run trained and recorded as
loopscale-train records it, one progress line per job, failed runs recorded while the others go on (exit 1),
Ctrl-C (a real SIGINT to the process group) recorded as "interrupted", not "failed", in every worker, SIGTERM
recorded as "terminated" (exit 143), no worker left behind when the launcher is killed outright, the longest
job handed out first and the workers' threads from trainer.num_threads when threads_per_worker is unset."""

from __future__ import annotations

import json
import signal
import time

import pytest

from support.procs import finish, orphans, run_loopscale, signal_group, start_loopscale, wait_until
from support.train import TINY

POOL = ["hydra/launcher=local_pool", "hydra.launcher.workers=2", "hydra.launcher.threads_per_worker=1"]


def _args(tmp_path, data_dir, *extra):
    return ["-m", *POOL, *TINY, f"runs_dir={tmp_path / 'runs'}", f"data.data_dir={data_dir}", *extra]


def _records(sweep):
    return {p.parent.name: json.loads(p.read_text()) for p in sweep.glob("*/run.json")}


def test_a_tiny_sweep_on_the_pool(tmp_path, data_dir):
    proc = run_loopscale(_args(tmp_path, data_dir, "seed=0,1,2"), cwd=tmp_path, module="loopscale.train.entry")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Traceback" not in out, out[-3000:]
    records = _records(tmp_path / "runs" / "default")
    assert len(records) == 3 and {r["status"] for r in records.values()} == {"done"}, records
    assert "3 job(s) on 2 worker process(es) x 1 thread(s)" in out and "3/3 jobs" in out, out[-3000:]
    for name, record in records.items():  # one line per finished job, with its loss
        assert f"{name}" in out and f"L = {record['L']:.4f}" in out
    for run_dir in (tmp_path / "runs" / "default").glob("*-D*"):  # Hydra's job files, as the basic launcher's
        assert (run_dir / ".hydra" / "config.yaml").is_file() and (run_dir / "entry.log").is_file()


def test_a_failed_run_is_recorded_and_the_others_go_on_then_the_sweep_exits_1(tmp_path, data_dir):
    """8 jobs on 2 workers: the 4 longest (handed out first) diverge at step 2, while the 4 one-step jobs are
    still waiting; each failure is recorded and every waiting job is still trained (a pool that stopped, or
    stopped handing out jobs, at the first failure would leave healthy runs untrained with the same exit 1)."""
    args = _args(tmp_path, data_dir, "budget.tokens=1024,5120", "seed=0,1,2,3", "trainer.nan_at_step=2")
    proc = run_loopscale(args, cwd=tmp_path, module="loopscale.train.entry")
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "a run of this sweep failed (recorded in its run.json)" in proc.stderr, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    records = _records(tmp_path / "runs" / "default")
    statuses = {name: r["status"] for name, r in records.items()}
    assert sorted(statuses.values()) == ["diverged"] * 4 + ["done"] * 4, statuses
    for name, record in records.items():  # the long runs diverged, every short one finished
        assert record["status"] == ("diverged" if record["D"] > 1024 else "done"), (name, record)
    assert "8/8 jobs" in proc.stdout + proc.stderr


@pytest.mark.slow  # ~50 s (default suite under 15 min; test_pool_stops keeps a Ctrl-C mid-run in it)
def test_ctrl_c_stops_the_pool_and_records_interrupted(tmp_path, data_dir):
    proc = start_loopscale(
        _args(tmp_path, data_dir, "seed=0,1", "budget.tokens=2048000", "trainer.ckpt_every_steps=5"),
        tmp_path,
        module="loopscale.train.entry",
    )
    sweep = tmp_path / "runs" / "default"
    seen = wait_until(proc, lambda _: len(list(sweep.glob("*/checkpoints/last.ckpt"))) == 2)  # both training
    rc, _, out = finish(proc, signal_group(proc, signal.SIGINT))
    assert rc == 130 and "Traceback" not in out, out[-3000:]
    assert out.count("loopscale-train: interrupted") == 1, out[-3000:]  # the sweep's line, none per worker
    assert orphans(seen) == []
    records = _records(sweep)
    assert len(records) == 2, records
    for record in records.values():
        assert (record["status"], record["reason"]) == ("interrupted", "interrupted (Ctrl-C / SIGINT)"), record
        assert 0 < record["step"] < record["steps"]


@pytest.mark.slow  # ~40 s (default suite under 15 min; test_signals keeps SIGTERM -> 143 in it)
def test_sigterm_records_terminated_and_exits_143_with_the_longest_jobs_first(tmp_path, data_dir):
    """SIGTERM to the launching process alone (`kill PID`, a scheduler's cancel): each worker's run records
    "terminated" and the sweep exits 143, no worker left. Two workers, threads_per_worker unset: they take the
    sweep's trainer.num_threads (2); of three jobs the two of most tokens are handed out first (the bar's
    weights), so the shortest never starts."""
    args = [
        "-m",
        "hydra/launcher=local_pool",
        "hydra.launcher.workers=2",
        *TINY,
        f"runs_dir={tmp_path / 'runs'}",
        f"data.data_dir={data_dir}",
        "trainer.num_threads=2",
        "budget.tokens=1024000,3072000,2048000",
        "trainer.ckpt_every_steps=5",
    ]
    proc = start_loopscale(args, tmp_path, module="loopscale.train.entry")
    sweep = tmp_path / "runs" / "default"
    seen = wait_until(proc, lambda _: len(list(sweep.glob("*/checkpoints/last.ckpt"))) == 2)  # both training
    proc.send_signal(signal.SIGTERM)
    rc, _, out = finish(proc, time.monotonic())
    assert rc == 143 and "Traceback" not in out, out[-3000:]
    assert out.count("loopscale-train: terminated") == 1, out[-3000:]  # the sweep's line, none per worker
    assert "3 job(s) on 2 worker process(es) x 2 thread(s)" in out, out[-3000:]
    assert len(seen - {proc.pid}) >= 2 and orphans(seen) == []
    records = _records(sweep)
    assert sorted(r["D"] for r in records.values()) == [2048000, 3072000], records  # the shortest never started
    for name, record in records.items():
        assert (record["status"], record["reason"]) == ("terminated", "terminated (SIGTERM)"), record
        assert 0 < record["step"] < record["steps"]
        assert "num_threads: 2" in (sweep / name / ".hydra" / "config.yaml").read_text()


@pytest.mark.slow  # ~30 s; the default suite checks the same worker set-up under `loopscale demo` (test_demo_failures)
def test_the_workers_end_when_the_pool_is_killed_outright(tmp_path, data_dir):
    """SIGKILL to the launching process: nothing of it runs to clean up, yet no worker is left training (the
    kernel sends them SIGTERM when their parent dies: PR_SET_PDEATHSIG)."""
    proc = start_loopscale(
        _args(tmp_path, data_dir, "seed=0,1", "budget.tokens=2048000", "trainer.ckpt_every_steps=5"),
        tmp_path,
        module="loopscale.train.entry",
    )
    sweep = tmp_path / "runs" / "default"
    seen = wait_until(proc, lambda _: len(list(sweep.glob("*/metrics"))) == 2)  # both workers training
    proc.kill()
    proc.wait()
    assert len(seen - {proc.pid}) >= 2 and orphans(seen - {proc.pid}) == []


def test_a_pool_of_no_workers_is_refused_in_one_line(tmp_path, data_dir):
    proc = run_loopscale(
        _args(tmp_path, data_dir, "hydra.launcher.workers=0", "seed=0,1"), cwd=tmp_path, module="loopscale.train.entry"
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.stderr.startswith(
        "loopscale-train: error: hydra.launcher.workers=0 and hydra.launcher.threads_per_worker=1 must be >= 1"
    )
    assert list((tmp_path / "runs").rglob("identity.json")) == []  # no run launched
