"""hydra/launcher=local_pool under faults, as a user meets them (issue 41): a worker killed outright or sent
SIGTERM alone is that job's failure, recorded under its own name, while a new worker takes its place and the
other jobs finish (exit 1, one line); an invalid job is recorded and the valid ones run, as with the basic
launcher; runs skipped because they are done or running elsewhere are said to be, and a sweep whose runs are
still training elsewhere does not exit 0; the workers report their steps, so the bar and ETA move before a
job ends; a bad pool size is refused in one line. Real processes, real signals, real records."""

from __future__ import annotations

import json
import os
import signal

import pytest

from support.procs import finish, orphans, run_loopscale, start_loopscale, wait_until
from support.train import TINY

POOL = ["hydra/launcher=local_pool", "hydra.launcher.workers=2", "hydra.launcher.threads_per_worker=1"]


def _args(tmp_path, data_dir, *extra):
    return ["-m", *POOL, *TINY, f"runs_dir={tmp_path / 'runs'}", f"data.data_dir={data_dir}", *extra]


def _records(sweep):
    return {p.parent.name: json.loads(p.read_text()) for p in sweep.glob("*/run.json")}


def _lock_pid(run_dir) -> int | None:
    try:
        return json.loads((run_dir / ".lock").read_text())["pid"]
    except (OSError, ValueError, KeyError):
        return None


def _last_line(out: str) -> str:
    """The sweep's own last line (Hydra's "Error executing job with overrides" line comes before it)."""
    return [line for line in out.strip().splitlines() if line.strip()][-1]


@pytest.mark.parametrize(
    "signum, status",
    [(signal.SIGKILL, "failed"), pytest.param(signal.SIGTERM, "terminated", marks=pytest.mark.slow)],  # ~45 s each
)
def test_a_dead_worker_fails_its_own_job_and_the_sweep_goes_on(tmp_path, data_dir, signum, status):
    # three 60-step jobs on two workers: seed1 is killed while it trains, seed0 must finish and seed2, which
    # was waiting for a worker, must still start and finish on the worker that replaces the dead one
    proc = start_loopscale(
        _args(tmp_path, data_dir, "seed=0,1,2", "budget.tokens=61440", "trainer.ckpt_every_steps=5"),
        tmp_path,
        module="loopscale.train.entry",
    )
    sweep = tmp_path / "runs" / "default"
    victim = sweep / "baseline-r1-d64-D6.14e4-seed1"
    seen = wait_until(proc, lambda _: (victim / "checkpoints" / "last.ckpt").exists() and _lock_pid(victim))
    worker = _lock_pid(victim)
    assert worker in seen and worker != proc.pid  # a worker of the pool holds it, not the launcher
    os.kill(worker, signum)
    rc, _, out = finish(proc, 0.0, timeout_s=600)
    assert rc == 1 and "Traceback" not in out, out[-3000:]
    assert orphans(seen - {worker}) == []
    records = _records(sweep)
    assert {name: r["status"] for name, r in records.items()} == {
        "baseline-r1-d64-D6.14e4": "done",
        "baseline-r1-d64-D6.14e4-seed1": status,
        "baseline-r1-d64-D6.14e4-seed2": "done",
    }, out[-3000:]
    killed = records[victim.name]
    if signum == signal.SIGKILL:  # nothing of its own: the launcher wrote why, and took its dead lock away
        assert killed["reason"] == f"its worker process (pid {worker}) died: killed by SIGKILL", killed
        assert not (victim / ".lock").exists()
    else:  # the run wrote its own record on the way out
        assert killed["reason"] == "terminated (SIGTERM)", killed
    last = _last_line(out)
    assert last.startswith("loopscale-train: a run of this sweep failed (recorded in "), out[-3000:]
    assert f"{victim / 'run.json'}): {victim.name}: its worker process (pid {worker}) died" in last, last
    assert "nothing recorded" not in out
    for healthy in ("baseline-r1-d64-D6.14e4 ", "baseline-r1-d64-D6.14e4-seed2 "):
        assert any(line.strip().startswith(healthy) and "done, L = " in line for line in out.splitlines()), out


@pytest.mark.slow  # ~30 s (default suite under 15 min)
def test_an_invalid_job_is_recorded_and_the_valid_ones_run_then_a_relaunch_skips_the_done_one(tmp_path, data_dir):
    args = _args(tmp_path, data_dir, "model.d_model=64,65")
    proc = run_loopscale(args, cwd=tmp_path, module="loopscale.train.entry")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "Traceback" not in out, out[-3000:]
    records = _records(tmp_path / "runs" / "default")
    assert records["baseline-r1-d64-D3.07e4"]["status"] == "done", records
    bad = records["auto-r1-d65-D3.07e4"]
    assert bad["status"] == "failed" and "d_model=65 must be a multiple of head_dim" in bad["reason"], bad
    assert _last_line(out).startswith("loopscale-train: a run of this sweep failed (recorded in its run.json): ")
    assert "auto-r1-d65-D3.07e4: d_model=65" in _last_line(out), out[-3000:]

    again = run_loopscale(args, cwd=tmp_path, module="loopscale.train.entry")
    out = again.stdout + again.stderr
    assert again.returncode == 1, out[-3000:]
    done_line = next(line for line in out.splitlines() if line.strip().startswith("baseline-r1-d64-D3.07e4 "))
    loss = records["baseline-r1-d64-D3.07e4"]["L"]
    assert done_line.split(None, 1)[1] == f"skipped (done), L = {loss:.4f}", done_line


def test_runs_held_elsewhere_are_said_to_be_and_the_sweep_does_not_exit_0(tmp_path, data_dir):
    from loopscale.train.lock import RunLock

    sweep = tmp_path / "runs" / "default"
    held = sweep / "baseline-r1-d64-D3.07e4-seed1"
    with RunLock(held):  # another live process (this test) trains seed1
        proc = run_loopscale(_args(tmp_path, data_dir, "seed=0,1"), cwd=tmp_path, module="loopscale.train.entry")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "Traceback" not in out, out[-3000:]
    lines = {line.split()[0]: line.split(None, 1)[1] for line in out.splitlines() if line.startswith("  baseline")}
    assert lines[held.name] == "running elsewhere (not trained here)", out[-3000:]
    assert lines["baseline-r1-d64-D3.07e4"].startswith("done, L = "), out[-3000:]
    assert _last_line(out) == (
        f"loopscale-train: 1 run(s) of this sweep are running elsewhere, not done yet: {held.name} "
        "(`loopscale status` shows them; relaunch once they end)"
    )
    assert not (held / "run.json").exists()


def test_the_workers_report_their_steps_before_their_jobs_end(tmp_path, data_dir):
    """The bar and ETA read the tokens each worker's run has trained (step_progress): seen rising while
    the jobs still run, on spawned workers."""
    from loopscale.launch.local_workers import train_one
    from loopscale.launch.worker_pool import run_in_workers
    from support.train import train_config

    cfgs = [
        train_config([*TINY, f"seed={s}", f"runs_dir={tmp_path / 'runs'}", f"data.data_dir={data_dir}"]) for s in (0, 1)
    ]
    ticks = []
    finished_at = {}
    for cfg, outcome in run_in_workers(train_one, cfgs, 2, 1, tick=lambda t, r: ticks.append((list(t), list(r)))):
        assert outcome.status == "done", outcome
        finished_at[cfg.seed] = len(ticks)
    first_end = min(finished_at.values())
    during = [t for t, running in ticks[:first_end] if running]
    assert any(0 < max(t) < 30720 for t in during), ticks[:first_end]  # part of a job's 30,720 tokens
    assert max(max(t) for t, _ in ticks) <= 30720


@pytest.mark.parametrize(
    "override, shown",
    [
        ("hydra.launcher.workers=abc", "hydra.launcher.workers=abc and hydra.launcher.threads_per_worker=1"),
        ("hydra.launcher.threads_per_worker=0", "hydra.launcher.workers=2 and hydra.launcher.threads_per_worker=0"),
    ],
)
def test_a_pool_size_that_is_not_a_whole_number_from_1_is_refused_in_one_line(tmp_path, data_dir, override, shown):
    proc = run_loopscale(_args(tmp_path, data_dir, "seed=0,1", override), cwd=tmp_path, module="loopscale.train.entry")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.stderr.startswith(f"loopscale-train: error: {shown} must be >= 1"), proc.stderr[-3000:]
    assert list((tmp_path / "runs").rglob("identity.json")) == []  # no run launched
