"""power's curve discount checked against simulated curve fits (issue 55 item 3): what a run's curve is worth in
final points by the fast rule (`loopscale.fit.curve_worth`: the l2 fits' variances of phi linearised at the law)
against what fitting simulated curves gives (benchmarks/bench_curves_phi.py's rows).

    .venv/bin/python benchmarks/bench_curve_worth.py [--pilots 3] [--rows seed.csv eval.csv]

Per noise regime of bench_curves_phi (the published-grid design, 16 curve points a run, the looped-curve law with
lambda 0.9): n_eff by the share alone (Kish: 1 / ((1 - s) + s / m)), by the linearised rule at the true noise, and
at the noise `curve_noise` reads off --pilots simulated pilots' residuals (mean and range); with --rows (one
bench_curves_phi --csv file per regime, in this order) the simulated n_eff: var(phi_hat from finals) /
var(phi_hat from curves) over its simulations, with a 95% bootstrap interval, and the mean cluster-robust
variance ratio beside it.
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd
from bench_curves_phi import CurveLaw09, evaluated  # the benchmarks' folder is on sys.path when run as a script

from loopscale.fit.curve_worth import CurveNoise, curve_noise, curve_worth
from loopscale.fit.curves.synthetic import looped_curves
from loopscale.fit.objective import Loss
from loopscale.fit.optimize import fit_law
from loopscale.fit.runs_table import canonical_table
from loopscale.fit.synthetic import BATCH_TOKENS, TRUE_PARAMS, published_grid

REGIMES = {"seed offset dominates": (0.003, 0.002, 0.5), "evaluation noise dominates": (0.0005, 0.003, 0.3)}
TRUTH = {**TRUE_PARAMS, "K": 0.3}


def pilot_noise(s_run: float, s_eval: float, rho: float, seed: int) -> CurveNoise:
    """The noise `curve_noise` reads off one simulated pilot's l2 curve fit."""
    curves = looped_curves(published_grid(), CurveLaw09(), TRUTH, BATCH_TOKENS, evaluated(16), s_run, s_eval, rho, seed)
    table = canonical_table(curves.rename(columns={"val_loss": "L"}), "looped-curve")
    law = CurveLaw09.bind(r=table["r"].to_numpy(float))
    data = law.data_from_table(table)
    _, state = fit_law(data, law, Loss("l2"), seed, n_refine=4)
    res = law.log_predict(state.best.theta, data) - data.log_L
    return curve_noise(res, table["run"], table["step"], law.n_params)


def simulated(path: str, rng: np.random.Generator) -> str:
    rows = pd.read_csv(path)
    ratio = rows["phi_finals"].var() / rows["phi_curves"].var()
    boot = []
    for _ in range(2000):
        b = rows.iloc[rng.integers(0, len(rows), len(rows))]
        boot.append(b["phi_finals"].var() / b["phi_curves"].var())
    lo, hi = np.quantile(boot, [0.025, 0.975])
    sandwich = (rows["se_finals"] ** 2).mean() / (rows["se_curves"] ** 2).mean()
    return f"{ratio:.2f} [{lo:.2f}, {hi:.2f}] over {len(rows)} sims (cluster-robust se^2 ratio {sandwich:.2f})"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pilots", type=int, default=3)
    p.add_argument("--rows", nargs="*", default=[])
    args = p.parse_args()
    design = published_grid().assign(steps=lambda t: np.maximum(10, np.round(t["D"] / BATCH_TOKENS)).astype(int))
    rng = np.random.default_rng(0)
    for k, (name, (s_run, s_eval, rho)) in enumerate(REGIMES.items()):
        true = CurveNoise(s_run, s_eval, rho, len(design), 0.0)
        fitted = canonical_table(
            looped_curves(published_grid(), CurveLaw09(), TRUTH, BATCH_TOKENS, evaluated(16)).rename(
                columns={"val_loss": "L"}
            ),
            "looped-curve",
        )
        m = len(fitted) / fitted["run"].nunique()
        kish = 1 / ((1 - true.share) + true.share / m)
        rule = curve_worth(design, TRUTH, CurveLaw09, true, evaluated(16))
        read = [pilot_noise(s_run, s_eval, rho, seed=100 + i) for i in range(args.pilots)]
        worth = [curve_worth(design, TRUTH, CurveLaw09, n, evaluated(16)) for n in read]
        print(f"{name} (s_run {s_run}, s_eval {s_eval}, rho {rho}; share {true.share:.2f}, m {m:.1f}):")
        print(f"  n_eff by the share alone (Kish) {kish:.2f}; the linearised rule at the true noise {rule:.2f}")
        print(
            f"  at the noise read off {len(read)} pilots: n_eff {np.mean(worth):.2f} [{min(worth):.2f}, "
            f"{max(worth):.2f}]; share {np.mean([n.share for n in read]):.2f}, rho "
            f"{np.mean([n.rho for n in read]):.2f}, s_run {np.mean([n.sigma_run_log for n in read]):.4f}, s_eval "
            f"{np.mean([n.sigma_eval_log for n in read]):.4f}",
            flush=True,
        )
        if k < len(args.rows):
            print(f"  simulated curve fits: n_eff = var(phi finals) / var(phi curves) {simulated(args.rows[k], rng)}")


if __name__ == "__main__":
    main()
