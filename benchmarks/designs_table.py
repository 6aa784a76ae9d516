"""The designs table of docs/results.md (issue 40) from one joint fit of `experiment=designs_cpu`:

    loopscale collect runs/designs_cpu --out designs.csv
    loopscale fit designs.csv --law looped-pass --joint recipe --bootstrap 200 --out designs.json
    .venv/bin/python benchmarks/designs_table.py designs.json designs.csv --wall baseline=731 --wall parcae=680 ...

One row per recipe: its runs, phi with the joint bootstrap's 95% interval, delta-phi against the reference recipe
with its interval and the verdict's answer, the design's minimum detectable delta-phi (MDE = 2.80 se) and the wall
time of its launch (`--wall NAME=SECONDS`, as measured by whoever launched it; a recipe's launch also trains the
r = 1 runs no earlier launch trained). Every number is read from the fit JSON; nothing is refitted.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd


def parse_walls(pairs: list[str]) -> dict[str, float]:
    walls = {}
    for pair in pairs:
        name, _, seconds = pair.partition("=")
        walls[name] = float(seconds)
    return walls


def table_rows(fit: dict, runs: pd.DataFrame, walls: dict[str, float]) -> list[str]:
    joint = fit["joint"]
    reference = joint["reference"]
    answers = fit["conditioning"]["delta_phi"]
    rows = []
    for recipe in joint["recipes"]:
        phi, (lo, hi) = fit["params"][f"phi[{recipe}]"], fit["ci95"][f"phi[{recipe}]"]
        n_runs = int((runs["recipe"] == recipe).sum())
        wall = f"{walls[recipe] / 60:.1f} min" if recipe in walls else "-"
        if recipe == reference:
            rows.append(f"| {recipe} (reference) | {n_runs} | {phi:.3f} [{lo:.3f}, {hi:.3f}] | - | - | - | {wall} |")
            continue
        d = answers[recipe]
        d_lo, d_hi = d["interval"]
        rows.append(
            f"| {recipe} | {n_runs} | {phi:.3f} [{lo:.3f}, {hi:.3f}] | {d['estimate']:+.3f} [{d_lo:+.3f}, {d_hi:+.3f}] "
            f"| {d['answer']} | {d['mde']:.3f} | {wall} |"
        )
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("fit", type=Path, help="the joint fit JSON (fit --law looped-pass --joint recipe --out)")
    p.add_argument("table", type=Path, help="the runs table the fit read")
    p.add_argument("--wall", action="append", default=[], metavar="RECIPE=SECONDS", help="a launch's wall time")
    args = p.parse_args()
    fit = json.loads(args.fit.read_text())
    runs = pd.read_csv(args.table)
    print("| recipe | runs | phi [95% CI] | Δφ vs baseline [95% CI] | verdict | MDE Δφ | launch wall |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(table_rows(fit, runs, parse_walls(args.wall))))
    print()
    print(f"Verdict: {fit['conditioning']['verdict']}")


if __name__ == "__main__":
    main()
