"""hydra/launcher=local_pool (loopscale/launch/pool_launcher.py): a multirun on a pool of worker processes,
as a user runs it (`loopscale-train -m ... hydra/launcher=local_pool`): every run trained and recorded as
loopscale-train records it, one progress line per job, failed runs recorded while the others go on (exit 1),
and Ctrl-C (a real SIGINT to the process group) recorded as "interrupted", not "failed", in every worker."""

from __future__ import annotations

import json
import signal

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
    assert orphans(seen) == []
    records = _records(sweep)
    assert len(records) == 2, records
    for record in records.values():
        assert (record["status"], record["reason"]) == ("interrupted", "interrupted (Ctrl-C / SIGINT)"), record
        assert 0 < record["step"] < record["steps"]


def test_a_pool_of_no_workers_is_refused_in_one_line(tmp_path, data_dir):
    proc = run_loopscale(
        _args(tmp_path, data_dir, "hydra.launcher.workers=0", "seed=0,1"), cwd=tmp_path, module="loopscale.train.entry"
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.stderr.startswith("hydra.launcher.workers=0 and hydra.launcher.threads_per_worker=1 must be >= 1")
    assert list((tmp_path / "runs").rglob("identity.json")) == []  # no run launched
