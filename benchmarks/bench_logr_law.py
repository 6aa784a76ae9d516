"""Calibration of the `looped-logr` law (m_r = r^(phi + psi ln(r/4))): how often `validate`'s AICc rule (the form
below -4 against r^phi) calls a drift of phi with r on data without one, how often it finds one that is there, and
how well psi comes back.

    .venv/bin/python benchmarks/bench_logr_law.py                       # 40 sweeps per (design, psi)
    .venv/bin/python benchmarks/bench_logr_law.py --sweeps 100 --tails 5

Designs: the published grid's baseline rows (r in {1, 2, 4, 8}, one run a point) and the CPU demo's grid, each
point's L from the law at psi in {0, 0.15, 0.3} times exp(sigma z), z Gaussian or Student-t (--tails dof, scaled to
sd 1). Each sweep is fitted by the looped law and by looped-logr as `fit` does (Huber, the profile off); AICc from
the log residuals as `validate` scores them (fit/validation/scores.py). Printed per cell: the share with dAICc < -4
(at psi = 0: false detections; else: power), with its Monte-Carlo error, psi's mean and sd.
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from loopscale.fit import synthetic as S
from loopscale.fit.fit_table import fit_table
from loopscale.fit.laws.registry import law_class, make_law
from loopscale.fit.validation.scores import free_params, information

PUBLISHED_DENSE = {"E": 1.6, "A": 30.0, "alpha": 0.21, "B": 900.0, "beta": 0.36}


def designs() -> dict[str, tuple[pd.DataFrame, dict[str, float]]]:
    sweep = S.recipe_sweep(seed=0, noise=0.0)
    published = sweep[sweep["recipe"] == "baseline"].reset_index(drop=True)
    return {
        "published grid": (published, {**PUBLISHED_DENSE, "phi": 0.45}),
        "CPU demo grid": (S.demo_grid(), {**S.DEMO_DENSE, "phi": S.DEMO_PHI}),
    }


def aicc_of(table: pd.DataFrame, law_name: str) -> tuple[float, dict[str, float]]:
    with np.errstate(all="ignore"):
        fit = fit_table(table, law_name, profile=False)
    law = make_law(law_name, r=table["r"].to_numpy())
    residuals = np.log(law_class(law_name).predict_table(fit.params, table)) - np.log(table["L"].to_numpy())
    return information(residuals, free_params(law))["aicc"], fit.params


def cell(grid: pd.DataFrame, truth: dict[str, float], psi: float, sigma: float, tails: float | None, sweeps: int):
    rng = np.random.default_rng(20261206)
    logr = law_class("looped-logr")
    clean = logr.predict_table({**truth, "psi": psi}, grid)
    found, psis = [], []
    for _ in range(sweeps):
        z = rng.standard_t(tails, len(grid)) / np.sqrt(tails / (tails - 2)) if tails else rng.standard_normal(len(grid))
        table = grid.assign(L=clean * np.exp(sigma * z))
        base, _ = aicc_of(table, "looped")
        aicc, params = aicc_of(table, "looped-logr")
        found.append(aicc - base < -4.0)
        psis.append(params["psi"])
    share = float(np.mean(found))
    return share, float(np.sqrt(share * (1 - share) / sweeps)), float(np.mean(psis)), float(np.std(psis))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sweeps", type=int, default=40)
    parser.add_argument("--sigma", type=float, default=0.004, help="noise sd in log L (default 0.004)")
    parser.add_argument("--tails", type=float, default=None, help="Student-t dof of the noise (default Gaussian)")
    args = parser.parse_args()
    noise = f"Student-t {args.tails:g} dof" if args.tails else "Gaussian"
    print(f"{args.sweeps} sweeps a cell, {noise} noise of sd {args.sigma} in log L")
    print("| design | psi | dAICc < -4 | +- | psi mean | psi sd |\n|---|---|---|---|---|---|")
    for name, (grid, truth) in designs().items():
        for psi in (0.0, 0.15, 0.3):
            share, err, mean, sd = cell(grid, truth, psi, args.sigma, args.tails, args.sweeps)
            print(f"| {name} | {psi:g} | {share:.1%} | {err:.1%} | {mean:+.3f} | {sd:.3f} |", flush=True)


if __name__ == "__main__":
    main()
