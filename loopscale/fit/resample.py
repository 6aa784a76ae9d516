"""Bootstrap replicates of a fit, in this process or over worker processes, with a progress bar.

`bootstrap` refits the law on resampled data (rows, or whole clusters: compute budgets, widths, the parent
run of forked branches) from a fit's `loopscale.fit.optimize.FitState`. Each replicate is warm-started from
the full-data optimum plus a few screened starts, solved in one batched LM pass with the other replicates
of its chunk, and polished by exact Newton steps, then L-BFGS-B to the main fit's tolerances.

Reproducible whatever the number of processes (`jobs`): the replicates are cut into chunks whose size
depends only on the table (never on `jobs`); chunk k draws its resampling weights from its own generator,
seeded by (seed, k), and is solved by the same function wherever it runs. So replicate i's numbers are the
same with one process or sixteen. A progress bar (tqdm, to the given stream) appears when a bootstrap
lasts over PROGRESS_DELAY_S.
"""

from __future__ import annotations

import functools
from typing import Any, TextIO

import numpy as np

from loopscale.errors import InputError
from loopscale.fit.laws.form import Law, LawData
from loopscale.fit.objective import Loss, chunk_size
from loopscale.fit.optimize import FitState, lm_batch, newton, refine
from loopscale.fit.task_pool import one_blas_thread, run_tasks
from loopscale.fit.two_stage import Hierarchy
from loopscale.machine import usable_cores

REPLICATES_PER_TASK = 16  # replicates per chunk: a worker's unit of work, and the progress bar's step
PROGRESS_DELAY_S = 1.0  # a bootstrap shorter than this draws no progress bar


def resolve_jobs(jobs: int | None) -> int:
    """Worker processes for `--jobs N`: N, at most the cores this process may use (loopscale/machine.py: more
    workers than cores only add their memory and switching; 24 on 2 cores took 4.7 GB), or every such core when
    None or 0."""
    if jobs is None or jobs == 0:
        return usable_cores()
    if jobs < 0:
        raise InputError(f"--jobs must be >= 1, or 0 for every core; got {jobs}")
    return min(int(jobs), usable_cores())


def bootstrap(
    state: FitState,
    n_replicates: int,
    seed: int = 0,
    clusters=None,
    n_starts: int = 3,
    polish: bool = True,
    jobs: int = 1,
    progress: TextIO | None = None,
    label: str = "bootstrap",
    hierarchy: Hierarchy | None = None,
) -> dict[str, Any]:
    """Refit on resampled data; returns {"params": {name: [...]}, "objective": [...], ...}.

    Rows are resampled with replacement (as integer weights on the objective), or, with `clusters`
    (one label per row), whole clusters are resampled. Each replicate is refit from the full-data
    optimum (warm start) plus the best `n_starts - 1` screened starts (batched `lm_batch`), the lowest
    objective is kept and, with `polish`, refined by exact Newton (`optimize.newton`) and then L-BFGS-B to
    the same tolerances as the main fit. jobs: worker processes (1: this process); progress: the stream
    for the progress bar (None: none). hierarchy: a two-stage bootstrap over points and seeds
    (`loopscale.fit.noise.Hierarchy`, for a table with seed repeats) instead of rows or `clusters`.
    """
    law, data, loss = state.law, state.data, state.loss
    starts = np.array([state.best.theta] + _distinct_starts(state.starts, n_starts - 1))
    inverse, n_labels = None, 0
    if clusters is not None:
        labels, inverse = np.unique(np.asarray(clusters), return_inverse=True)
        n_labels = len(labels)
    problem = (law, data, loss, starts, inverse, n_labels, polish, hierarchy)
    # chunks bounded in memory (replicates x starts x rows) and small enough to spread over workers
    per_task = max(1, min(REPLICATES_PER_TASK, chunk_size(len(data), 3 * law.n_params + 8, cap=4096) // len(starts)))
    tasks = [(seed, k, min(per_task, n_replicates - lo)) for k, lo in enumerate(range(0, n_replicates, per_task))]
    sizes = [t[2] for t in tasks]
    solved = run_tasks(solve_chunk, problem, tasks, jobs, progress, label, "replicate", sizes, PROGRESS_DELAY_S)
    thetas = np.vstack([t for t, _ in solved]) if solved else np.empty((0, law.n_params))
    objectives = np.concatenate([f for _, f in solved]) if solved else np.empty(0)
    user = [law.to_user(t) for t in thetas]
    two_stage = {} if hierarchy is None else {"two_stage": hierarchy.inner}  # records without seeds: as before
    return {
        "params": {name: [u[name] for u in user] for name in law.user_names},
        "objective": objectives,
        "n_replicates": n_replicates,
        "cluster": None if clusters is None else "custom",
        "seed": seed,
        "n_starts_per_replicate": len(starts),
        "replicates_per_task": per_task,
        **two_stage,
    }


def _distinct_starts(starts: np.ndarray, k: int) -> list[np.ndarray]:
    """The k best exponent-projected starts (the first family in `screen_starts` order).

    They sit near the optimum for their exponents, so a replicate converges from them in a few
    dozen LM steps; classic-grid corners take hundreds and almost never win on a replicate.
    """
    if k <= 0 or len(starts) == 0:
        return []
    return [starts[i] for i in range(min(k, len(starts) - len(starts) // 2))]


def chunk_weights(seed: int, k: int, size: int, n_rows: int, inverse, n_labels: int, hierarchy=None) -> np.ndarray:
    """The resampling weights (size, n_rows) of chunk k: rows drawn with replacement, or clusters drawn with
    replacement and each row weighted by its cluster's count, or a two-stage draw (`Hierarchy.weights`). Its
    own generator, seeded by (seed, k)."""
    rng = np.random.default_rng([seed, k])
    if hierarchy is not None:
        return hierarchy.weights(rng, size)
    if inverse is None:
        return np.array([np.bincount(rng.integers(0, n_rows, n_rows), minlength=n_rows) for _ in range(size)], float)
    counts = np.array([np.bincount(rng.integers(0, n_labels, n_labels), minlength=n_labels) for _ in range(size)])
    return counts[:, inverse].astype(float)


def solve_chunk(problem: tuple, task: tuple) -> tuple[np.ndarray, np.ndarray]:
    """(thetas, objectives) of one chunk's replicates: every replicate from every start in one batched LM
    pass, the best start kept per replicate, then polished by `newton` and L-BFGS-B (`refine`)."""
    law, data, loss, starts, inverse, n_labels, polish, hierarchy = problem
    law: Law
    data: LawData
    loss: Loss
    seed, k, size = task
    W = chunk_weights(seed, k, size, len(data), inverse, n_labels, hierarchy)
    S = len(starts)
    th, fv = lm_batch(law, data, loss, np.tile(starts, (size, 1)), np.repeat(W, S, axis=0))
    best = np.argmin(fv.reshape(size, S), axis=1)
    thetas, objectives = np.empty((size, law.n_params)), np.empty(size)
    for j, b in enumerate(best):
        # exact Newton first (quadratic convergence): L-BFGS-B alone crawls for hundreds of steps along a
        # replicate's flat valleys; from Newton's point it only confirms the tolerances
        theta = newton(law, data, loss, th[j * S + b], weights=W[j])[0] if polish and law.has_hessian else th[j * S + b]
        r = refine(theta, law, data, loss, W[j]) if polish else None
        thetas[j] = th[j * S + b] if r is None else r.theta
        objectives[j] = fv[j * S + b] if r is None else r.objective
    return thetas, objectives


def on_one_blas_thread(fn):
    """`fn` run inside `one_blas_thread` (`fit_table`, `fit_joint`: every solve of a fit is tiny)."""

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        with one_blas_thread():
            return fn(*args, **kwargs)

    return wrapped
