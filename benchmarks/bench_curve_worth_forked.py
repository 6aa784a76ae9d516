"""What `curve_worth` promises on the CPU demo's forked design against what simulated curve fits report (issue 55
item 3; the numbers: docs/results.md, "power's curve discount on a forked design").

    .venv/bin/python benchmarks/bench_curve_worth_forked.py --write-table demo_curves.csv [--points 24]
    nice -n 15 .venv/bin/python benchmarks/bench_curve_calibration.py demo_curves.csv --bootstrap 0 \\
        --sigma-run S --sigma-eval S --rho R --sweeps N --out runs/cworth --cell CELL
    .venv/bin/python benchmarks/bench_curve_worth_forked.py --summarise runs/cworth/CELL.jsonl \\
        --sigma-run S --sigma-eval S --rho R [--points 24]

--write-table: the demo's 44 points (`synthetic.demo_grid`) as 16 forked jobs, one per (r, width), evaluated as
`curve_worth` evaluates a design (`curve_worth.design_curves`: the parent's stable evaluations once in every branch,
`from_parent`; loopscale's `curve_steps` at --points a run) with the tuned demo's looped-entry-curve fit as the loss,
no noise: a curves table `bench_curve_calibration.py` reads as the design and, by its fit, the truth.
--summarise: the promise at that noise (`curve_worth_parts`: the final points a curve is worth as the two intervals
report it, the width ratio it implies, each fit's expected width, the estimators' variance ratio; and the rule before
this change, each branch a run of its own) against the sweeps: the ratio of the mean widths where both intervals
close and of the median widths (an open interval infinitely wide), each with its bootstrap Monte-Carlo se over the
sweeps, and the estimators' variance ratio.
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import pandas as pd

import loopscale.fit.curve_worth as cw
from loopscale.data.heldout import curve_steps
from loopscale.fit.laws.registry import make_law
from loopscale.fit.synthetic import demo_grid

# the tuned demo's looped-entry-curve fit (docs/results.md, "A curve's schedule terms from its whole run")
TRUTH = {"phi": 0.7066, "kappa": 0.4515, "E": 3.047, "A": 4.203, "alpha": 0.212, "B": 62.6, "beta": 0.4156, "K": 0.0946}
LAW = "looped-entry-curve"


def forked_demo() -> pd.DataFrame:
    """The CPU demo's 44 points as 16 forked jobs, one per (r, width), one seed (its runs table)."""
    grid = demo_grid().assign(seed=0)
    return grid.assign(parent="baseline-r" + grid["r"].astype(str) + "-d" + grid["width"].astype(str))


def write_table(path: str, points: int) -> None:
    design = forked_demo()
    table = cw.design_curves(design, evaluations(points), TRUTH, make_law(LAW))
    by_run = dict(zip([f"run{i}" for i in range(len(design))], design.to_dict("records")))
    for c in ("seed", "width", "recipe", "steps", "C_budget", "N", "C"):
        table[c] = table["run"].map(lambda run, c=c: by_run[run][c])
    table = table.rename(columns={"L": "val_loss"}).drop(columns=["job", "eval_depth", "fork_depth"])
    table.to_csv(path, index=False)
    print(f"{path}: {table['run'].nunique()} branches, {len(table)} evaluations ({int(table['from_parent'].sum())} "
          "the parents')")  # fmt: skip


def evaluations(points: int):
    return lambda steps, warmup, cooldown: curve_steps(steps, points, (warmup, cooldown), cooldown)


def width(row: dict, kind: str) -> float:
    ci = row[kind]["profile"]
    return np.inf if ci is None or ci[0] is None or ci[1] is None else ci[1] - ci[0]


def bootstrap_se(n: int, statistic, n_boot: int = 2000) -> float:
    rng = np.random.default_rng(0)
    draws = np.array([statistic(rng.integers(0, n, n)) for _ in range(n_boot)])
    return float(np.std(draws[np.isfinite(draws)], ddof=1))


def summarise(path: str, noise: cw.CurveNoise, points: int) -> None:
    design = forked_demo()
    worth = cw.curve_worth_parts(design, TRUTH, LAW, noise, evaluations(points))
    before = cw.curve_worth_parts(design.drop(columns="parent"), TRUTH, LAW, noise, evaluations(points)).variance
    spread = {}
    real = cw._phi_spread

    def spy(J, rows, noise, i, curves):
        out = real(J, rows, noise, i, curves)
        spread["curves" if curves else "finals"] = (np.sqrt(out[0]), 2 * np.sqrt(out[1]))
        return out

    cw._phi_spread = spy  # read each fit's expected sd and width off the same computation
    cw.curve_worth_parts(design, TRUTH, LAW, noise, evaluations(points))
    cw._phi_spread = real
    rows = [json.loads(line) for line in open(path)]
    n = len(rows)
    c, f = (np.array([width(r, k) for r in rows]) for k in ("curves", "finals"))
    phi_c, phi_f = (np.array([r[k]["phi"] for r in rows]) for k in ("curves", "finals"))
    both = np.flatnonzero(np.isfinite(c) & np.isfinite(f))
    print(f"{path}: {n} sweeps; {noise}; {points} points a run")
    print(f"promise: n_eff {worth.reported:.3f} as reported (width ratio {worth.reported**-0.5:.3f}; curves F(1, "
          f"{worth.curve_dof:.1f}), finals F(1, {worth.final_dof:.0f})), variance ratio {worth.variance:.3f}; before "
          f"(each branch a run): {before:.3f} (width ratio {before**-0.5:.3f})")  # fmt: skip
    for kind, w, est in (("curves", c, phi_c), ("finals", f, phi_f)):
        sd, wid = spread[kind]
        closed = w[np.isfinite(w)]
        print(f"  {kind}: expected sd {sd:.4f}, width {wid:.4f}; realised sd {est.std(ddof=1):.4f}, mean width of the "
              f"{len(closed)} closed {closed.mean():.4f} +- {closed.std(ddof=1) / np.sqrt(len(closed)):.4f}, median "
              f"(open infinite) {np.median(w):.4f}, open {np.mean(~np.isfinite(w)):.3f}")  # fmt: skip
    mean_ratio = c[both].mean() / f[both].mean()
    mean_se = bootstrap_se(len(both), lambda i: c[both][i].mean() / f[both][i].mean())
    median_ratio = np.median(c) / np.median(f)
    median_se = bootstrap_se(n, lambda i: np.median(c[i]) / np.median(f[i]))
    var_ratio = phi_f.var(ddof=1) / phi_c.var(ddof=1)
    var_se = bootstrap_se(n, lambda i: phi_f[i].var(ddof=1) / phi_c[i].var(ddof=1))
    print(f"realised: width ratio curves / finals {mean_ratio:.3f} +- {mean_se:.3f} (means, {len(both)} with both "
          f"closed; n_eff {mean_ratio**-2:.2f} +- {2 * mean_se * mean_ratio**-3:.2f}), {median_ratio:.3f} +- "
          f"{median_se:.3f} (medians, all); phi_hat variance ratio {var_ratio:.2f} +- {var_se:.2f}")  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--write-table", metavar="CSV")
    p.add_argument("--summarise", metavar="JSONL")
    p.add_argument("--points", type=int, default=24, help="curve evaluations a run (trainer.curve_points)")
    p.add_argument("--sigma-run", type=float, default=0.0)
    p.add_argument("--sigma-eval", type=float, default=0.0025)
    p.add_argument("--rho", type=float, default=0.74)
    args = p.parse_args()
    if args.write_table:
        write_table(args.write_table, args.points)
    if args.summarise:
        noise = cw.CurveNoise(args.sigma_run, args.sigma_eval, args.rho, 44, float(args.points))
        summarise(args.summarise, noise, args.points)


if __name__ == "__main__":
    main()
