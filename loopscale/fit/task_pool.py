"""Many small fits over worker processes, with a progress bar: the bootstrap's replicate chunks
(`resample.bootstrap`) and `loopscale validate`'s (form, fold) refits (`validation.run`).

`run_tasks(solve, problem, tasks, ...)` returns [solve(problem, task) for task in tasks], in task order: in this
process when jobs is 1 (or there is one task), else over `jobs` processes that receive the problem once (it can
be large: a table, its law and data) and then only the tasks. Every solve runs with BLAS on one thread
(`one_blas_thread`): the fits' matrices are tiny. Ctrl-C stops the pool; tasks not started are dropped.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any, TextIO

from threadpoolctl import threadpool_limits
from tqdm.auto import tqdm


def one_blas_thread():
    """A context in which BLAS runs on one thread (threadpoolctl). The fit's matrices are tiny (parameters x
    rows): a threaded BLAS spends its time waking threads, which on a busy machine, or beside the other worker
    processes, costs several times the work itself; the numbers are the same either way."""
    return threadpool_limits(limits=1, user_api="blas")


_WORKER: tuple | None = None  # (solve, problem) of a worker process, set once per worker


def _set_worker(solve: Callable, problem: Any) -> None:
    global _WORKER
    _WORKER = (solve, problem)
    # Ctrl-C reaches the whole process group: the parent stops the pool (`run_tasks`), a worker says nothing
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    one_blas_thread().__enter__()  # for the worker's life: it only solves tasks


def _solve_in_worker(task: Any) -> Any:
    solve, problem = _WORKER
    return solve(problem, task)


def run_tasks(
    solve: Callable[[Any, Any], Any],
    problem: Any,
    tasks: Sequence,
    jobs: int,
    progress: TextIO | None,
    label: str,
    unit: str,
    sizes: Sequence[int] | None = None,
    delay_s: float = 1.0,
) -> list:
    """solve(problem, task) for every task, in task order (module docstring). `solve` is a module-level function
    (workers unpickle it by name); sizes: each task's steps on the bar (1 each by default); the bar (tqdm, to
    `progress`, none when None) appears when the work lasts over delay_s."""
    sizes = [1] * len(tasks) if sizes is None else list(sizes)
    bar = tqdm(total=sum(sizes), desc=label, unit=unit, file=progress, disable=progress is None, delay=delay_s,
               mininterval=0.25, leave=False, dynamic_ncols=True)  # fmt: skip
    out: list = [None] * len(tasks)
    try:
        if jobs <= 1 or len(tasks) <= 1:
            with one_blas_thread():
                for i, task in enumerate(tasks):
                    out[i] = solve(problem, task)
                    bar.update(sizes[i])
            return out
        pool = ProcessPoolExecutor(
            max_workers=min(jobs, len(tasks)), initializer=_set_worker, initargs=(solve, problem)
        )
        try:
            futures = {pool.submit(_solve_in_worker, task): i for i, task in enumerate(tasks)}
            for done in as_completed(futures):
                i = futures[done]
                out[i] = done.result()
                bar.update(sizes[i])
        finally:  # on an error or Ctrl-C, tasks not started are dropped rather than waited for
            pool.shutdown(wait=True, cancel_futures=True)
        return out
    finally:
        bar.close()
