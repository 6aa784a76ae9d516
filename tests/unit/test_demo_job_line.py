"""The demo's console line per job (loopscale/demo.py `job_line`) for every record the worker pool hands back: a
single run, a forked job with its branches, a forked job whose parent another process holds, and none.

A forked job with branches once raised AttributeError ('ForkedJob' object has no attribute 'status') and stopped
`make demo` after its first job: the slow system test was the only one to run the line."""

from __future__ import annotations

from types import SimpleNamespace

from loopscale.demo import job_line
from loopscale.train.run_json import ForkedJob, RunRecord

CFG = SimpleNamespace(run_name="baseline-r2-d24")


def done(L: float) -> RunRecord:
    return RunRecord(status="done", L=L)


def test_a_forked_job_with_branches_gives_its_branches_losses_and_wall_time():
    record = ForkedJob(parent=done(3.9), branches=[done(3.71), done(3.64), None])
    line = job_line(CFG, record, 61.4)
    assert line == f"{'baseline-r2-d24':<22} 2 points, L = 3.6400..3.7100  (61 s)"


def test_a_single_run_gives_its_loss():
    assert job_line(CFG, done(3.5), 9.0) == f"{'baseline-r2-d24':<22} 1 point, L = 3.5000  (9 s)"


def test_a_run_another_process_holds_gives_its_status_and_reason():
    held = RunRecord(status="running-elsewhere", reason="pid 7 holds the lock", run_dir="runs/x")
    for record in (held, ForkedJob(parent=held, branches=[])):
        assert job_line(CFG, record, 0.0) == f"{'baseline-r2-d24':<22} running-elsewhere: pid 7 holds the lock"


def test_a_forked_job_with_no_finished_branch_says_so():
    record = ForkedJob(parent=done(3.9), branches=[None, RunRecord(status="failed", reason="nan")])
    assert job_line(CFG, record, 3.0) == f"{'baseline-r2-d24':<22} 0 points, no finished point  (3 s)"
