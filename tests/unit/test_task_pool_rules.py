"""fit/task_pool.py's promises in this process (issue 58): results come back in task order, one task or one job runs
here (no pool), every solve runs with BLAS on one thread, and the progress bar counts each task's size."""

from __future__ import annotations

import io
import os

from threadpoolctl import threadpool_info

from loopscale.fit import task_pool as TP


def _solve(problem, task):
    blas = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
    return problem + task, os.getpid(), blas


def test_tasks_come_back_in_order_solved_here_on_one_blas_thread():
    out = TP.run_tasks(_solve, 100, [3, 1, 2], jobs=1, progress=None, label="t", unit="task")
    assert [o[0] for o in out] == [103, 101, 102]
    assert {o[1] for o in out} == {os.getpid()} and all(b == [1] * len(b) for _, _, b in out)
    (one,) = TP.run_tasks(_solve, 5, [7], jobs=8, progress=None, label="t", unit="task")  # one task: no pool
    assert one[:2] == (12, os.getpid())
    assert TP.run_tasks(_solve, 0, [], jobs=1, progress=None, label="t", unit="task") == []


def test_the_bar_counts_each_tasks_size():
    stream = io.StringIO()
    TP.run_tasks(
        _solve, 0, [1, 2, 3], jobs=1, progress=stream, label="boot", unit="replicate", sizes=[16, 16, 4], delay_s=0.0
    )
    assert "/36 [" in stream.getvalue() and "boot:" in stream.getvalue()  # the total: the sizes summed
