"""Curve laws against held-out schedules (issue 55): each curve law fitted to some runs' whole loss curves,
every other run predicted, mean / max relative error per run and over the held-out ones, and the fit's time.

    .venv/bin/python benchmarks/bench_curve_laws.py --synthetic                  # a known multi-power law
    .venv/bin/python benchmarks/bench_curve_laws.py --folder DIR --train cosine_24000 constant_24000 wsdcon_9

--folder: one CSV per run (the run is the file's name; columns step, lr, loss: the layout of the public
multi-power curves, thu-yao-01-luo/MultiPowerLaw loss_curve_repo/csv_25 | csv_100 | csv_400), read as one
curves table; --table: a curves table with a run column instead. --synthetic: constant, cosine, step and WSD
schedules (3,000 steps) drawn from the multi-power law with 2e-4 log-normal noise, fitted on three, WSD
predicted, the errors against the noise-free curve too. The same fit as `loopscale fit --curves`.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from loopscale.fit.curves.fit import fit_and_predict, read_curve_tables
from loopscale.fit.curves.registry import curve_law, curve_law_names
from loopscale.fit.curves.synthetic import draw_curves, schedule
from loopscale.fit.curves.table import CurveColumns, read_curves

SYNTHETIC_TRUTH = {"L0": 2.9, "A": 0.55, "alpha": 0.5, "B": 400.0, "C": 2.0, "beta": 0.6, "gamma": 0.6}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--folder", type=Path)
    src.add_argument("--table", type=Path)
    src.add_argument("--synthetic", action="store_true")
    p.add_argument("--train", nargs="+", help="the runs fitted (default: every run but --synthetic's wsd)")
    p.add_argument("--run-col", default="run")
    p.add_argument("--loss-col", default="loss")
    p.add_argument("--laws", nargs="+", default=list(curve_law_names()))
    p.add_argument("--warmup-drops", action="store_true", help="multipower: the authors' released code's sum")
    p.add_argument("--starts", type=int, default=8)
    args = p.parse_args()

    clean = None
    if args.synthetic:
        kinds = {k: schedule(k, 3000, 3e-4, 150) for k in ("constant", "cosine", "step", "wsd")}
        table = draw_curves(curve_law("multipower"), SYNTHETIC_TRUTH, kinds, every=40, noise=2e-4, seed=1)
        clean = {c.run: c for c in read_curves(draw_curves(curve_law("multipower"), SYNTHETIC_TRUTH, kinds, every=40))}
        columns, train = CurveColumns(), args.train or ["constant", "cosine", "step"]
    else:
        table = read_curve_tables([args.folder], args.run_col)[0] if args.folder else pd.read_csv(args.table)
        columns = CurveColumns(run=args.run_col, loss=args.loss_col)
        train = args.train
    curves = read_curves(table, columns)
    holdout = [c.run for c in curves if train and c.run not in train]
    print(f"{len(curves)} runs; fitted on {', '.join(c.run for c in curves if c.run not in holdout)}")
    for name in args.laws:
        law = curve_law(name)
        if args.warmup_drops and hasattr(law, "warmup_drops"):
            law.warmup_drops = True
        start = time.perf_counter()
        result, preds = fit_and_predict(law, curves, holdout, n_starts=args.starts)
        took = time.perf_counter() - start
        print(f"\n{name}: {took:.1f} s, {result.starts_in_best_basin}/{result.starts_refined} starts in the best basin")
        print("  " + ", ".join(f"{k} = {v:.4g}" for k, v in result.params.items()))
        for e in result.errors:
            line = f"  {e.run:<20} {e.role:<8} mean {100 * e.mean_rel_error:.3f}%  max {100 * e.max_rel_error:.3f}%"
            if clean is not None:
                rel = np.abs(preds[e.run] - clean[e.run].loss) / clean[e.run].loss
                line += f"   vs the noise-free curve: mean {100 * rel.mean():.4f}%  max {100 * rel.max():.4f}%"
            print(line)
        summary = result.holdout_summary()
        if summary:
            print(f"  held out: mean {100 * summary['mean_rel_error']:.3f}%, max {100 * summary['max_rel_error']:.3f}%")


if __name__ == "__main__":
    main()
