"""Benchmark `loopscale validate` on the published grid: the looped law drawn on the published sweep's 107 points
(`synthetic.published_grid_table(seed=0, n_rows=107)`, the committed looped_synthetic_107 fixture). Every fold
(6 budgets, 3 r) and every form (the law, k_r per r, E pinned, N x D, MSE), Approach 2 and the counting
conventions, with --jobs 1 and --jobs 2, against the reference measured in the same process: one `loopscale fit`
(multi-start fit + phi profile, `fit_table`). Target: <= 60 s with every fold and form on 2 cores. Wall times
count other jobs on a shared machine; CPU times do not (the load average is printed). The two --jobs runs must
give the same fits.

    .venv/bin/python benchmarks/bench_validate.py
"""

from __future__ import annotations

import os
import time

import numpy as np

from loopscale.fit.fit_table import fit_table
from loopscale.fit.runs_table import canonical_table
from loopscale.fit.synthetic import published_grid_table
from loopscale.fit.validation.run import validate

FILL = {"vocab_size": 32001, "seq_len": 2048, "injection": "concat", "n_prelude": 2, "n_coda": 2, "depth": 20}


def timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    table = canonical_table(published_grid_table(seed=0, n_rows=107), "looped")  # the 107-row fixture's table
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    with np.errstate(all="ignore"):
        fit, wall, cpu = timed(lambda: fit_table(table, "looped"))
    print(f"reference: fit_table (multi-start + phi profile), {len(table)} rows: {wall:.1f} s wall, {cpu:.1f} s CPU")
    records = {}
    for jobs in (1, 2):
        rec, wall, cpu = timed(lambda jobs=jobs: validate(table, fit, jobs=jobs, fill=FILL))
        records[jobs] = rec
        n_fits = sum(r["ok"] for r in rec["results"])
        print(
            f"validate --jobs {jobs}: {wall:.1f} s wall ({cpu:.1f} s CPU in this process), {n_fits} fits, "
            f"{len(rec['forms'])} forms x {len(rec['folds'])} folds; {rec['verdict']['line']}"
        )
    same = [r["params"] for r in records[1]["results"] if r["ok"]] == [
        r["params"] for r in records[2]["results"] if r["ok"]
    ]
    print(f"--jobs 1 and --jobs 2 give the same fits: {same}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
