"""Does `power`'s residual-pool path (`pilot.unit_draws` with a pool: a smoothed bootstrap of the pilot's standardised
residuals) give a wider simulated delta-phi than Gaussian draws of the same distribution? (docs/results.md, "power
on designs it was not tuned on": the trend cell, where one generator seed had shown +25%.)

The same design (a sweep of a calibration cell, `bench_calibration.draw_sweep`, stream 41) and the same known truth
(sigma 0.005 of log L, no pilot), `simulate_design`'s delta-phi se from standard_normal draws and from a pool of 400
Gaussian quantiles (whose smoothed draws are N(0, 1)), over independent generator seeds: the ratio's mean and its
standard error say whether the pool path is biased or one seed was lucky.

    .venv/bin/python benchmarks/bench_power_pool.py [--cell published-3-gauss-trend] [--sims 64] [--seeds 12]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scipy.stats import norm

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_calibration as calibration  # noqa: E402

from loopscale.fit.pilot import Truth  # noqa: E402
from loopscale.fit.power import simulate_design  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cell", default="published-3-gauss-trend", choices=sorted(calibration.CELLS))
    ap.add_argument("--sims", type=int, default=64)
    ap.add_argument("--seeds", type=int, default=12)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    cell = calibration.CELLS[args.cell]
    table, _ = calibration.draw_sweep(cell, 41, 0, joint=False)
    dense, phi = calibration.true_law(cell)
    pool = tuple(norm.ppf((np.arange(400) + 0.5) / 400))
    se = {}
    t0 = time.time()
    for label, units in (("standard_normal", None), ("pool", pool)):
        truth = Truth({**dense, "phi": phi}, 0.005, seed_units=units)
        se[label] = np.array(
            [
                simulate_design(
                    table.drop(columns=["L"]), truth, args.sims, seed=s, what=("delta_phi",), jobs=args.jobs
                ).delta_phi.se
                for s in range(5, 5 + args.seeds)
            ]
        )
        print(f"{label:16s} delta-phi se by seed: {np.round(se[label], 5)}  mean {se[label].mean():.5f}", flush=True)
    ratio = se["pool"] / se["standard_normal"]
    print(f"pool / standard_normal per seed: {np.round(ratio, 3)}")
    print(
        f"mean ratio {ratio.mean():.3f} +- {ratio.std(ddof=1) / np.sqrt(len(ratio)):.3f} over {args.seeds} seeds of "
        f"{args.sims} sweeps ({time.time() - t0:.0f} s)"
    )


if __name__ == "__main__":
    main()
