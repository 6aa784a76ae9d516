"""phi (and the law's own parameters) from a sweep's loss curves against from its final points (issue 55 item 3),
read off two fit records of one sweep:

    .venv/bin/python benchmarks/phi_curves_vs_finals.py FINALS.json CURVES.json [--points M]

FINALS.json: a final-point fit of the runs table (`loopscale fit runs.csv --law looped-entry --bootstrap 200`);
CURVES.json: its curve law's fit of the curves table (`loopscale fit runs_curves.csv --law looped-entry-curve
--loss-col val_loss --bootstrap 200`). Both bootstraps resample the same clusters (a forked sweep's parents).
Prints per parameter both estimates, phi's profile interval (the one the verdict reads) and the 95% bootstrap
percentile intervals, their widths and the ratio curves / finals (the issue's target: <= 0.7); the curve fit's
noise split (`curve_worth.curve_noise`: run-level offset, evaluation-level AR(1)) and n_eff, the final points a
run's curve is worth to phi at that noise on the finals' design (`curve_worth.curve_worth_parts`: as the two
intervals report it, what `power` uses, and by the estimators' variances; the design's runs evaluated at M points,
default the curves table's mean per run), which says whether curves can be narrower on this sweep at all.
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from loopscale.data.heldout import curve_steps
from loopscale.fit.curve_worth import CurveNoise, curve_worth_parts
from loopscale.fit.laws.registry import law_class
from loopscale.fit.result import load_fit


def interval_line(name: str, fit, lo_hi) -> str:
    lo, hi = lo_hi
    return f"{name:>9} {fit.params[name]:9.4f}  [{lo:8.4f}, {hi:8.4f}]  width {hi - lo:7.4f}"


def widths(fit, name: str) -> dict[str, tuple[float, float]]:
    """The intervals of parameter `name` a fit records: phi's profile (when it profiled phi) and the bootstrap's
    95% percentile interval."""
    out = {}
    if name == "phi" and fit.profile_phi and fit.profile_phi.get("interval"):
        out["profile"] = tuple(fit.profile_phi["interval"])
    if name in (fit.ci95 or {}):
        out["bootstrap"] = tuple(fit.ci95[name])
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("finals")
    p.add_argument("curves")
    p.add_argument("--points", type=int, default=None, help="evaluations per run for n_eff (default: the table's)")
    args = p.parse_args()
    finals, curves = load_fit(args.finals), load_fit(args.curves)
    shared = [n for n in ("phi", "kappa", "psi") if n in finals.params and n in curves.params]
    print(f"finals: {finals.law} on {finals.n_rows} rows ({args.finals}); curves: {curves.law} on {curves.n_rows} rows")
    for name in shared:
        f_int, c_int = widths(finals, name), widths(curves, name)
        for kind in ("profile", "bootstrap"):
            if kind in f_int and kind in c_int:
                wf, wc = (np.diff(i)[0] for i in (f_int[kind], c_int[kind]))
                print(f"{name} {kind}:")
                print("  finals " + interval_line(name, finals, f_int[kind]))
                print("  curves " + interval_line(name, curves, c_int[kind]))
                print(f"  width ratio curves / finals {wc / wf:.2f} ({100 * (1 - wc / wf):+.0f}% narrower)")
    block = (curves.noise or {}).get("curve")
    if not block:
        print("the curve fit records no curve noise: no n_eff")
        return
    noise = CurveNoise.from_json(block)
    print(
        f"curve noise: run-level offset {noise.sigma_run_log:.4g}, evaluation-level {noise.sigma_eval_log:.4g} "
        f"(AR(1) rho {noise.rho:.2f}; share independent between evaluations {noise.share:.2f}), "
        f"{noise.n_runs} runs x {noise.evaluations_per_run:.1f} evaluations"
    )
    design = pd.read_csv(finals.input["path"])
    points = args.points or int(round(noise.evaluations_per_run))
    worth = curve_worth_parts(
        design, curves.params, law_class(curves.law), noise, lambda n, w, c: curve_steps(n, points, (w, c), c)
    )
    print(
        f"n_eff: a run's curve is worth {worth.reported:.2f} final points to phi as the intervals report it "
        f"(width ratio ~ {worth.reported**-0.5:.2f} expected; F(1, {worth.curve_dof:.1f}) for the curves, "
        f"F(1, {worth.final_dof:.0f}) for the final points), {worth.variance:.2f} by the estimators' variances"
    )


if __name__ == "__main__":
    main()
