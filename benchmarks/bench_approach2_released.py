"""Approach 2 (`loopscale isoflop`, fit/validation/approach2.py) on released iso-FLOP data against the published
analyses of the same data: the 15 configurations of Porian et al. 2024, "Resolving Discrepancies in
Compute-Optimal Scaling of Language Models" (github.com/formll/resolving-scaling-law-discrepancies, MIT).

    .venv/bin/python benchmarks/bench_approach2_released.py --data DIR [--bootstrap 400] [--md out.md]

DIR holds the release's `data/summary_df*.pickle.xz` (not shipped here: clone the repository). Each row of those
frames is one configuration (dataset, hyper-parameters, warmup, decay, parameter count, train or val loss); its
`data` frame gives, per compute budget, the sizes trained and their losses (`orig_n`, `orig_loss`: the iso-FLOP
points the paper read from its curves), and `fit_results` the published exponent of N* ~ C^a (`bs_median_weighted`,
the paper's Table) with its bootstrap (`bootstrap_weighted`: the 2.5-97.5 percentiles are its 95% interval).
Printed per configuration: the published a and interval, loopscale's, the difference and its z against both
intervals' se combined; and the exponent by the paper's own per-budget rule (`a_interp`: an Akima spline's argmin);
then the mean |difference|, how many exceed 0.03, how many |z| > 2.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from loopscale.fit.validation.approach2 import N_BOOTSTRAP, iso_flop_exponent

Z_95 = 1.959963984540054


def configurations(folder: Path):
    """(name, iso-FLOP table with N, C, D, L per run, published a, its 95% interval) per released configuration."""
    files = sorted(folder.glob("summary_df*.pickle.xz"))
    if not files:
        raise SystemExit(f"no summary_df*.pickle.xz in {folder}")
    for path in files:
        for _, cfg in pd.read_pickle(path).iterrows():
            name = "-".join(str(cfg[k]) for k in ("dataset", "hparams", "warmup", "decay", "param_count", "val"))
            rows = []
            for _, budget in cfg["data"].iterrows():
                if not isinstance(budget["orig_n"], (list, np.ndarray, pd.Series)):
                    continue  # a budget the paper had no runs at
                for N, D, L in zip(budget["orig_n"], budget["orig_t"], budget["orig_loss"]):
                    rows.append({"N": N, "D": D, "C": budget["flops"], "C_budget": budget["flops"], "L": L})
            fits = cfg["fit_results"]
            draws = [d["n_exponent"] for d in fits["bootstrap_weighted"] if "n_exponent" in d]
            published = fits["bs_median_weighted"]["n_exponent"]
            yield name, pd.DataFrame(rows), published, np.percentile(draws, [2.5, 97.5])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, required=True, help="the release's data/ folder")
    p.add_argument("--bootstrap", type=int, default=N_BOOTSTRAP)
    p.add_argument("--md", type=Path, help="also write the table here")
    args = p.parse_args()
    lines = [
        "| configuration | budgets with N* | published a [95%] | loopscale a [95%] | tau | difference | z | interp |",
        "|---|---|---|---|---|---|---|---|",
    ]
    diffs, zs, interp = [], [], []
    for name, table, published, (lo, hi) in configurations(args.data):
        a2 = iso_flop_exponent(table, n_boot=args.bootstrap)
        n_star = sum(b["N_star"] is not None for b in a2["budgets"])
        ours_lo, ours_hi = a2["a_interval"]
        d = a2["a"] - published
        z = d / np.hypot(a2["a_se"], (hi - lo) / (2 * Z_95))
        diffs.append(d)
        zs.append(z)
        interp.append(a2["a_interp"] - published)
        lines.append(
            f"| {name} | {n_star} of {len(a2['budgets'])} | {published:.3f} [{lo:.3f}, {hi:.3f}] | "
            f"{a2['a']:.3f} [{ours_lo:.3f}, {ours_hi:.3f}] | {a2['tau_log']:.3f} | {d:+.3f} | {z:+.1f} | "
            f"{a2['a_interp']:.3f} |"
        )
    diffs, zs = np.abs(diffs), np.abs(zs)
    lines += [
        "",
        f"{len(diffs)} configurations: mean |difference| {diffs.mean():.4f}, largest {diffs.max():.3f}, "
        f"{int((diffs > 0.03).sum())} beyond 0.03; |z| > 2 in {int((zs > 2).sum())}. The interpolation rule (the "
        f"paper's own, `a_interp`): largest |difference| {np.max(np.abs(interp)):.4f}.",
    ]
    text = "\n".join(lines)
    print(text)
    if args.md:
        args.md.write_text(text + "\n")


if __name__ == "__main__":
    main()
