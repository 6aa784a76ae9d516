"""`loopscale demo` never hangs and never leaves workers behind: a diverged job ends it (exit 1, one line
naming the job and its record), SIGTERM to the demo takes its workers with it (exit 143), a worker whose
parent is killed outright ends too, Ctrl-C with one worker exits 130, and a demo with no finished run to fit
says so in one line. Real processes and signals."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

from loopscale.launch.sweep import expand
from loopscale.train.plan import run_dir_of
from support.procs import finish, orphans, run_loopscale, signal_group, start_loopscale, wait_until

TWO_JOBS = ["--bootstrap", "0", "--seeds", "1", "model.r=1,2", "point=C6e10-d16"]  # two jobs: one seed


def _demo(out, data_dir, *extra):
    return ["demo", "--out", str(out), "--data-dir", str(data_dir), *TWO_JOBS, *extra]


def _job_dirs() -> list[str]:
    """The run dir names of TWO_JOBS' jobs, as the demo names them (they carry the lr rule's multiplier)."""
    jobs = expand(["experiment=isodepth_cpu_demo", *[a for a in TWO_JOBS if "=" in a]])
    return [run_dir_of(job.cfg).name for job in jobs]


def _records(out):
    return {p.parent.name: json.loads(p.read_text()) for p in out.glob("runs/*/*/*.json") if p.name != "identity.json"}


def test_a_diverged_job_ends_the_demo_with_it_recorded(tmp_path, data_dir):
    out = tmp_path / "demo"
    proc = run_loopscale(_demo(out, data_dir, "trainer.nan_at_step=3"), cwd=tmp_path, timeout_s=300)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("loopscale demo: error: job baseline-r") and " diverged: non-finite training loss" in last
    assert "fork_parent.json" in last and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    statuses = {r["status"] for r in _records(out).values()}
    assert "diverged" in statuses and statuses <= {"diverged", "terminated"}, _records(out)


def _done(out) -> set[str]:
    return {name for name, r in _records(out).items() if r["status"] == "done"}


def _when_training(out):
    return lambda seen: len(seen) >= 2 and any(out.glob("runs/*/*/metrics"))


def test_sigterm_to_the_demo_takes_its_workers_with_it(tmp_path, data_dir):
    out = tmp_path / "demo"
    proc = start_loopscale(_demo(out, data_dir), tmp_path)
    seen = wait_until(proc, _when_training(out))
    proc.send_signal(signal.SIGTERM)  # to the demo alone, as `kill PID` or a scheduler does
    rc, _, text = finish(proc, time.monotonic())
    assert rc == 143 and text.strip().splitlines()[-1] == "loopscale demo: terminated", text[-3000:]
    assert orphans(seen) == []
    assert {r["status"] for r in _records(out).values()} == {"terminated"}, _records(out)


def test_workers_end_when_the_demo_is_killed_outright(tmp_path, data_dir):
    out = tmp_path / "demo"
    proc = start_loopscale(_demo(out, data_dir), tmp_path)
    seen = wait_until(proc, _when_training(out))
    proc.kill()  # SIGKILL: the demo cleans up nothing; the kernel tells its workers (PR_SET_PDEATHSIG)
    proc.wait()
    done_at_the_kill = _done(out)
    assert orphans(seen - {proc.pid}) == []
    # a worker left alone would also end, after its job, on its closed pipe: ending is not enough, it must not
    # have trained on (on a fast machine these jobs finish inside orphans' grace period)
    done = _done(out)
    assert done == done_at_the_kill, f"trained to the end after the demo was killed: {done - done_at_the_kill}"


def test_ctrl_c_with_one_worker_exits_130(tmp_path, data_dir):
    out = tmp_path / "demo"
    proc = start_loopscale(_demo(out, data_dir, "--workers", "1"), tmp_path)
    seen = wait_until(proc, lambda _: any(out.glob("runs/*/*/metrics")))
    rc, _, text = finish(proc, signal_group(proc, signal.SIGINT))
    assert rc == 130 and text.strip().splitlines()[-1] == "loopscale demo: interrupted", text[-3000:]
    assert "Traceback" not in text and orphans(seen) == []
    assert {r["status"] for r in _records(out).values()} == {"interrupted"}, _records(out)


def test_a_demo_with_nothing_finished_to_fit_says_so(tmp_path, data_dir):
    """Every job held by another live process ("running elsewhere"): the demo trains nothing and ends with
    one line instead of an IndexError on the empty table."""
    out = tmp_path / "demo"
    sweep = out / "runs" / "isodepth_cpu_demo"
    code = (
        "import sys, time; from loopscale.train.lock import RunLock\n"
        f"locks = [RunLock({str(sweep)!r} + '/' + n) for n in {_job_dirs()!r}]\n"
        "[lock.acquire() for lock in locks]; print('held', flush=True); time.sleep(600)"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        proc = run_loopscale(_demo(out, data_dir), cwd=tmp_path, timeout_s=300)
    finally:
        holder.kill()
        holder.wait()
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines()[-1].startswith("loopscale demo: error: no finished runs to fit")
