"""Benchmark the fitter: speed on sweep-sized tables, memory on logged-evaluation-sized tables.

Default run, three parts:
  1. single law: the full multi-start fit of a 107-point synthetic looped table, then a
     1000-replicate row bootstrap, and a naive baseline (scipy L-BFGS-B with numerical gradients
     and default tolerances from classic-grid starts, on a reduced start set, extrapolated to 729
     starts). Targets: fit < 2 s, fit + 1000 replicates < 20 s.
  2. joint law: the published-shaped baseline grid plus the truncated-backprop probe (218 runs,
     `loopscale.fit.synthetic.recipe_sweep`), the joint multi-start fit and 1000 bootstrap replicates.
     Target: <= 30 s. Also times the rest of `fit --joint` (delta-phi profile and LR test, the
     separate fits and the shared-parameter check) without bootstrap.
  2b. CPU-sized joint fit: `fit --joint --bootstrap 200` as the CLI runs it (joint fit and bootstrap, profile,
     LR test, separate fits with their bootstraps, shared-parameter check) on 30 runs
     (`synthetic.small_recipe_sweep`), with every core (--jobs, the default) and with --jobs 1 as the
     reference, which must give identical replicates. Target: <= 20 s on an idle 2-core machine.
  3. memory: `fit_table` (multi-start fit + phi profile, what `loopscale fit` runs by default) on
     tables of --rows rows (`synthetic.evaluation_log_table`), each in a fresh subprocess that
     reports its wall time, CPU time and peak RSS. Targets: 100k rows <= 60 s and <= 2 GB; 1M rows
     <= 4 GB.
Wall times count other jobs on a shared machine; CPU times do not (the load average is printed).

    .venv/bin/python benchmarks/bench_fit.py [--replicates 1000] [--naive-starts 6]
        [--rows 10000 100000 1000000] [--skip single joint cpu-joint memory] [--cpu-replicates 200] [--jobs N]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time

import numpy as np
from scipy.optimize import minimize

from loopscale.fit import synthetic as S
from loopscale.fit.bounds import bounds_for
from loopscale.fit.fit_table import fit_table
from loopscale.fit.joint import fit_joint, joint_data, joint_table
from loopscale.fit.laws.registry import law_data_from_table, make_law
from loopscale.fit.objective import objective
from loopscale.fit.optimize import fit_law
from loopscale.fit.resample import bootstrap
from loopscale.fit.runs_table import canonical_table
from loopscale.fit.starts import classic_grid
from loopscale.fit.uncertainty import percentile_ci


class Clock:
    """Wall and CPU seconds of a block."""

    def __enter__(self):
        self.t0, self.c0, self.k0 = time.perf_counter(), time.process_time(), _children_cpu()
        return self

    def __exit__(self, *exc):
        self.wall, self.cpu = time.perf_counter() - self.t0, time.process_time() - self.c0
        self.children_cpu = _children_cpu() - self.k0  # worker processes (--jobs), once they have ended


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def bench_single(replicates: int, naive_starts: int) -> None:
    table = canonical_table(S.published_grid_table(seed=0, n_rows=107), "looped")
    data = law_data_from_table(table, "looped")
    with Clock() as fit_t:
        result, state = fit_law(data, "looped")
    with Clock() as boot_t:
        boot = bootstrap(state, replicates, seed=1)
    ci = percentile_ci(boot["params"])["phi"]
    print(
        f"[single] rows {len(data)}; fit: {fit_t.wall:.2f} s (target < 2 s; CPU {fit_t.cpu:.2f} s); "
        f"objective {result.objective:.8g}, |grad| {result.grad_norm:.1e}, {result.n_best_basin}/"
        f"{result.n_refined} refined starts in the best basin, {result.n_starts} screened; "
        f"phi {result.params['phi']:.4f}"
    )
    print(
        f"[single] fit + {replicates} bootstrap replicates: {fit_t.wall + boot_t.wall:.2f} s (target < 20 s; "
        f"CPU {fit_t.cpu + boot_t.cpu:.2f} s; {1e3 * boot_t.wall / replicates:.1f} ms/replicate); "
        f"phi 95% CI [{ci[0]:.4f}, {ci[1]:.4f}]"
    )
    # Naive baseline: numerical gradients (2-point), default L-BFGS-B tolerances, classic grid.
    grid = classic_grid(state.law)
    picks = grid[np.linspace(0, len(grid) - 1, naive_starts).astype(int)]
    law, loss = state.law, state.loss
    with Clock() as naive_t:
        naive_best = min(
            minimize(objective, start, args=(law, data, loss), method="L-BFGS-B", bounds=bounds_for(law)).fun
            for start in picks
        )
    per_start = naive_t.wall / len(picks)
    same = naive_best <= result.objective * (1 + 1e-6)
    print(
        f"[single] naive scipy (numerical gradients, default tolerances): {per_start * 1e3:.0f} ms/start "
        f"-> {729 * per_start:.1f} s extrapolated to 729 starts; best objective over {len(picks)} starts "
        f"{naive_best:.8g} ({'same as' if same else 'WORSE than'} ours {result.objective:.8g})"
    )


def bench_joint(replicates: int) -> None:
    sweep = S.recipe_sweep(seed=0)
    tables = [canonical_table(t, "looped-joint") for t in S.recipe_tables(sweep).values()]
    table, recipes = joint_table(tables, "recipe")
    data = joint_data(table)
    law = make_law("looped-joint", recipes=recipes)
    with Clock() as fit_t:
        result, state = fit_law(data, law)
    with Clock() as boot_t:
        boot = bootstrap(state, replicates, seed=1)
    d = np.array(boot["params"]["phi[tbptt]"]) - np.array(boot["params"]["phi[baseline]"])
    print(
        f"[joint] rows {len(data)} ({len(recipes)} recipes); fit {fit_t.wall:.2f} s (CPU {fit_t.cpu:.2f} s), "
        f"{result.n_best_basin}/{result.n_refined} starts in the best basin; + {replicates} bootstrap "
        f"replicates: {fit_t.wall + boot_t.wall:.2f} s in all (target <= 30 s; CPU "
        f"{fit_t.cpu + boot_t.cpu:.2f} s); delta-phi 95% CI [{np.percentile(d, 2.5):+.4f}, "
        f"{np.percentile(d, 97.5):+.4f}]"
    )
    with Clock() as rest_t:
        fit_joint(table, "recipe", recipes)
    print(
        f"[joint] fit --joint without bootstrap (joint fit, delta-phi profile + LR test, separate fits, "
        f"shared-parameter check): {rest_t.wall:.2f} s (CPU {rest_t.cpu:.2f} s)"
    )


def bench_cpu_joint(replicates: int, jobs: int | None) -> None:
    """`fit --joint --bootstrap N` on a CPU-sized comparison (30 runs, `synthetic.small_recipe_sweep`): the
    joint fit, its bootstrap, the delta-phi profile and LR test, both separate fits with their bootstraps and
    the shared-parameter check. Timed with every core (`--jobs`, the CLI's default) and, as the reference in
    the same run, in one process (--jobs 1); the two must give the same numbers."""
    from loopscale.fit.resample import resolve_jobs

    sweep = S.small_recipe_sweep(seed=0)
    table, recipes = joint_table([canonical_table(sweep, "looped-joint")], "recipe")
    jobs = resolve_jobs(jobs)
    runs = {}
    for n_jobs in (1, jobs):
        with Clock() as t:
            result = fit_joint(table, "recipe", recipes, n_bootstrap=replicates, jobs=n_jobs)
        runs[n_jobs] = (t, result)
        d = result.joint["delta_phi"][recipes[1]]
        print(
            f"[cpu joint] rows {len(table)}; fit --joint --bootstrap {replicates} --jobs {n_jobs}: {t.wall:.2f} s "
            f"(target <= 20 s on an idle 2-core machine; CPU {t.cpu:.2f} s here + {t.children_cpu:.2f} s in "
            f"workers); delta-phi "
            f"{d['estimate']:+.4f}, 95% CI [{d['bootstrap_ci'][0]:+.4f}, {d['bootstrap_ci'][1]:+.4f}]; "
            f"{result.conditioning['verdict']}",
            flush=True,
        )
    (t1, r1), (tn, rn) = runs[1], runs[jobs]
    same = r1.bootstrap["params"] == rn.bootstrap["params"] and r1.joint["separate"] == rn.joint["separate"]
    print(
        f"[cpu joint] --jobs {jobs} vs --jobs 1: {t1.wall / tn.wall:.2f}x faster; replicates "
        f"{'identical' if same else 'DIFFERENT'}"
    )


def memory_child(n_rows: int) -> None:
    """One table size in this (fresh) process: time and peak RSS of `fit_table`."""
    table = canonical_table(S.evaluation_log_table(n_rows, seed=0), "looped")
    rss_table = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    with np.errstate(all="ignore"), Clock() as t:
        result = fit_table(table, "looped")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # ru_maxrss is in KiB on Linux
    print(
        f"[memory] rows {n_rows}: fit + phi profile {t.wall:.1f} s (CPU {t.cpu:.1f} s); peak RSS "
        f"{peak:.2f} GiB (after building the table {rss_table:.2f} GiB); phi {result.params['phi']:.4f}, "
        f"{result.n_best_basin}/{result.n_refined} starts in the best basin",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicates", type=int, default=1000)
    ap.add_argument("--naive-starts", type=int, default=6)
    ap.add_argument("--rows", type=int, nargs="*", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--skip", nargs="*", default=[], choices=["single", "joint", "cpu-joint", "memory"])
    ap.add_argument("--cpu-replicates", type=int, default=200, help="replicates of the CPU-sized joint fit")
    ap.add_argument("--jobs", type=int, default=None, help="worker processes (default: every core)")
    ap.add_argument("--memory-child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    np.seterr(all="ignore")
    if args.memory_child:
        memory_child(args.memory_child)
        return
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    if "single" not in args.skip:
        bench_single(args.replicates, args.naive_starts)
    if "cpu-joint" not in args.skip:
        bench_cpu_joint(args.cpu_replicates, args.jobs)
    if "joint" not in args.skip:
        bench_joint(args.replicates)
    if "memory" not in args.skip:
        for n in args.rows:
            subprocess.run([sys.executable, __file__, "--memory-child", str(n)], check=True)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
