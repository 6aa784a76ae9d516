"""Benchmark the fitter on a 107-point synthetic looped table.

Times (1) the full multi-start fit, (2) the fit plus a 1000-replicate row bootstrap, and, in the
same run, (3) a naive baseline: scipy L-BFGS-B with numerical gradients and default tolerances
from classic-grid starts, on a reduced start set, extrapolated to 729 starts.
Targets on the 2-core development machine: fit < 2 s, fit + 1000 replicates < 20 s.

    .venv/bin/python benchmarks/bench_fit.py [--replicates 1000] [--naive-starts 6]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scipy.optimize import minimize

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from fixtures.make_fixtures import published_grid_table  # noqa: E402

from loopscale import fit as F  # noqa: E402
from loopscale.laws import law_data_from_table  # noqa: E402
from loopscale.tables import canonical_table  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicates", type=int, default=1000)
    ap.add_argument("--naive-starts", type=int, default=6)
    args = ap.parse_args()
    np.seterr(all="ignore")
    table = canonical_table(published_grid_table(seed=0, n_rows=107), "looped")
    data = law_data_from_table(table, "looped")

    t0, c0 = time.perf_counter(), time.process_time()
    result, state = F.fit_law(data, "looped")
    t_fit, c_fit = time.perf_counter() - t0, time.process_time() - c0
    t0, c0 = time.perf_counter(), time.process_time()
    boot = F.bootstrap(state, args.replicates, seed=1)
    t_boot, c_boot = time.perf_counter() - t0, time.process_time() - c0
    # CPU time as well as wall time: other jobs on a shared machine inflate the wall clock.
    ci = F.percentile_ci(boot["params"])["phi"]
    print(f"rows {len(data)}; fit: {t_fit:.2f} s (target < 2 s); objective {result.objective:.8g}, "
          f"CPU {c_fit:.2f} s; |grad| {result.grad_norm:.1e}, {result.n_best_basin}/{result.n_refined} refined starts in "
          f"the best basin, {result.n_starts} screened; phi {result.params['phi']:.4f}")
    print(f"fit + {args.replicates} bootstrap replicates: {t_fit + t_boot:.2f} s (target < 20 s; "
          f"CPU {c_fit + c_boot:.2f} s; bootstrap alone {t_boot:.2f} s, {1e3 * t_boot / args.replicates:.1f} ms/replicate); "
          f"phi 95% CI [{ci[0]:.4f}, {ci[1]:.4f}]")

    # Naive baseline: numerical gradients (2-point), default L-BFGS-B tolerances, classic grid.
    grid = F.classic_grid(state.law)
    picks = grid[np.linspace(0, len(grid) - 1, args.naive_starts).astype(int)]
    law, loss = state.law, state.loss
    t0 = time.perf_counter()
    naive_best = np.inf
    for start in picks:
        res = minimize(F.objective, start, args=(law, data, loss), method="L-BFGS-B",
                       bounds=F.bounds_for(law))
        naive_best = min(naive_best, res.fun)
    per_start = (time.perf_counter() - t0) / len(picks)
    same = naive_best <= result.objective * (1 + 1e-6)
    print(f"naive scipy (numerical gradients, default tolerances): {per_start * 1e3:.0f} ms/start "
          f"-> {729 * per_start:.1f} s extrapolated to 729 starts; best objective over "
          f"{len(picks)} starts {naive_best:.8g} ({'same as' if same else 'WORSE than'} ours "
          f"{result.objective:.8g})")
    print(f"ours per refined start: {1e3 * t_fit / result.n_refined:.0f} ms (including screening)")


if __name__ == "__main__":
    main()
