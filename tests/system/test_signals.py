"""Exit codes and records that tell the truth: Ctrl-C gives 130 and a record saying "interrupted", SIGTERM
(kill, a timeout, a scheduler's cancel) 143 and "terminated", in `loopscale-train` alone and in a sweep; a
`-m` sweep whose runs fail exits non-zero once its other runs are done. Real processes, real signals."""

from __future__ import annotations

import json
import signal

from loopscale.train.run_json import read_record
from support.procs import finish, orphans, run_loopscale, signal_group, start_loopscale, wait_until
from support.train import TINY

# long enough to be training when the signal comes (~2000 steps), checkpoints every 5 steps
LONG = [*TINY, "budget.tokens=2048000", "trainer.ckpt_every_steps=5"]


def _train(tmp_path, data_dir, *extra):
    flags = [a for a in extra if a.startswith("-")]  # Hydra's flags (-m) before the overrides
    args = [*flags, *LONG, f"runs_dir={tmp_path / 'runs'}", f"data.data_dir={data_dir}"]
    args += [a for a in extra if not a.startswith("-")]
    return start_loopscale(args, tmp_path, module="loopscale.train.entry")


def _signal_while_training(proc, run_dir, signum):
    """Once the run has checkpointed (it is training), send `signum` to its process group."""
    seen = wait_until(proc, lambda _: (run_dir / "checkpoints" / "last.ckpt").exists())
    rc, waited, out = finish(proc, signal_group(proc, signum))
    assert orphans(seen) == []
    return rc, waited, out


def test_ctrl_c_exits_130_and_the_record_says_interrupted(tmp_path, data_dir):
    run_dir = tmp_path / "runs" / "default" / "r"
    rc, waited, out = _signal_while_training(_train(tmp_path, data_dir, "run_name=r"), run_dir, signal.SIGINT)
    assert rc == 130, out[-3000:]
    assert out.strip().splitlines()[-1] == "loopscale-train: interrupted" and "Traceback" not in out, out[-3000:]
    record = read_record(run_dir)
    assert record["status"] == "interrupted" and record["step"] > 0, record
    print(f"exit {waited:.2f} s after SIGINT, at step {record['step']} of {record['steps']}")
    assert record["step"] < record["steps"]  # it stopped where it was, it did not train on to the end


def test_sigterm_exits_143_and_the_record_says_terminated(tmp_path, data_dir):
    run_dir = tmp_path / "runs" / "default" / "r"
    rc, _, out = _signal_while_training(_train(tmp_path, data_dir, "run_name=r"), run_dir, signal.SIGTERM)
    assert rc == 143, out[-3000:]
    assert out.strip().splitlines()[-1] == "loopscale-train: terminated" and "Traceback" not in out, out[-3000:]
    assert read_record(run_dir)["status"] == "terminated"


def test_sigterm_stops_a_whole_sweep_with_143(tmp_path, data_dir):
    proc = _train(tmp_path, data_dir, "-m", "seed=0,1")
    sweep = tmp_path / "runs" / "default"
    rc, _, out = _signal_while_training(proc, next_run_dir(sweep, proc), signal.SIGTERM)
    assert rc == 143, out[-3000:]
    records = [json.loads(p.read_text()) for p in sweep.glob("*/run.json")]
    assert [r["status"] for r in records] == ["terminated"], records  # the second run never started


def next_run_dir(sweep, proc):
    """The first run dir a sweep creates (its name comes from the config)."""
    wait_until(proc, lambda _: any(sweep.glob("*/identity.json")))
    return next(sweep.glob("*/identity.json")).parent


def test_a_sweep_whose_runs_fail_exits_1_after_running_them_all(tmp_path, data_dir):
    args = [
        "-m",
        *TINY,
        "budget.tokens=5120",
        "model.r=1,2",
        "trainer.nan_at_step=2",
        f"runs_dir={tmp_path / 'runs'}",
        f"data.data_dir={data_dir}",
    ]
    proc = run_loopscale(args, cwd=tmp_path, module="loopscale.train.entry")
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "a run of this sweep failed (recorded in its run.json)" in proc.stderr, proc.stderr[-3000:]
    records = [json.loads(p.read_text()) for p in (tmp_path / "runs" / "default").glob("*/run.json")]
    assert sorted(r["status"] for r in records) == ["diverged", "diverged"]  # both ran, both recorded


def test_ctrl_c_stops_a_basic_sweep_and_the_record_says_interrupted(tmp_path, data_dir):
    """Issue 29 (11): Ctrl-C in a sequential sweep (hydra/launcher=basic: the jobs run in this process) was
    recorded as failed "SystemExit: 1" (Lightning's own exit on a KeyboardInterrupt); it is interrupted, the
    sweep exits 130 and its second run never starts."""
    proc = _train(tmp_path, data_dir, "-m", "hydra/launcher=basic", "seed=0,1")
    sweep = tmp_path / "runs" / "default"
    rc, _, out = _signal_while_training(proc, next_run_dir(sweep, proc), signal.SIGINT)
    records = [json.loads(p.read_text()) for p in sweep.glob("*/run.json")]
    assert [(r["status"], r["reason"]) for r in records] == [("interrupted", "interrupted (Ctrl-C / SIGINT)")], records
    assert rc == 130 and "Traceback" not in out, out[-3000:]


def _maps(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/maps") as fh:
            return fh.read()
    except (FileNotFoundError, ProcessLookupError):
        return ""


def test_ctrl_c_while_a_command_loads_is_one_line_and_130(tmp_path):
    """Issue 57: Ctrl-C in the first second of a command, while it imports its module (numpy loaded, scipy,
    pandas and matplotlib still to come), printed a KeyboardInterrupt traceback: the import sat outside the try."""
    proc = start_loopscale(["validate", str(tmp_path / "fit.json")], tmp_path)
    wait_until(proc, lambda _: "_multiarray_umath" in _maps(proc.pid), timeout_s=60)
    rc, _, out = finish(proc, signal_group(proc, signal.SIGINT))
    assert rc == 130 and out.strip() == "loopscale validate: interrupted", out[-3000:]
