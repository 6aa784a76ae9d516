"""Forked WSD sweeps vs independent runs (issue 8): training FLOPs, CPU wall time, per-point loss fidelity and
the fitted phi, for the same (r, width, budget) points.

    .venv/bin/python benchmarks/bench_forks.py                     # accounting only (no training)
    .venv/bin/python benchmarks/bench_forks.py --runs RUNS_DIR     # + measured numbers from finished sweeps
    .venv/bin/python benchmarks/bench_forks.py --runs RUNS_DIR --train model.r=1,2 point=...  # train first

RUNS_DIR holds the two sweeps `loopscale-train -m experiment=isodepth_cpu` (independent, the recipe's own
linear-decay schedule) and `experiment=isodepth_cpu_wsd` (forked, runs_dir=RUNS_DIR) write. Only points
present in both are compared. FLOPs are accounting (F x tokens); wall time is the sum of the runs' own
wall_time_s (a forked point's share of its parent is not split: the forked total is parents + branches).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
INDEPENDENT, FORKED = "isodepth_cpu", "isodepth_cpu_wsd"


def accounting_summary() -> None:
    from loopscale.cli.plan import plan_rows

    for exp in (INDEPENDENT, FORKED):
        rows = plan_rows([f"experiment={exp}"])
        ci, cf = sum(r["C_independent"] for r in rows), sum(r["C_forked"] for r in rows)
        print(f"accounting, experiment={exp}: {len(rows)} jobs, {sum(r['points'] for r in rows)} points, "
              f"training FLOPs {cf:.4g} (as independent runs {ci:.4g}: {ci / cf:.2f}x)")
    # the saving of one model with k points D_1 < ... < D_k and cooldown fraction c (eq. in forks.py):
    #   sum_i D_i / ((1 - c) D_k + c sum_i D_i)
    print("\nsaving per model = sum D_i / ((1 - c) max D_i + c sum D_i), by token counts and cooldown c:")
    cases = {"3 counts x2 apart (1,2,4)": [1, 2, 4], "3 counts (2,3,4)": [2, 3, 4], "4 counts x2 (1..8)": [1, 2, 4, 8],
             "5 counts (1,1.5,2,3,4)": [1, 1.5, 2, 3, 4], "8 counts (1..8)": list(range(1, 9))}
    print(f"  {'token counts':28s}" + "".join(f"  c={c:<5}" for c in (0.1, 0.2)))
    for name, ds in cases.items():
        print(f"  {name:28s}" + "".join(f"  {sum(ds) / ((1 - c) * max(ds) + c * sum(ds)):5.2f}x " for c in (0.1, 0.2)))


def _records(sweep_dir: Path, name: str) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(sweep_dir.glob(f"*/{name}"))]


def measured_summary(runs: Path, bootstrap: int) -> None:
    indep = {(r["r"], r["width"], r["C_budget"]): r for r in _records(runs / INDEPENDENT, "run.json")
             if r["status"] == "done"}
    branches = {(r["r"], r["width"], r["C_budget"]): r for r in _records(runs / FORKED, "run.json")
                if r["status"] == "done"}
    parents = {r["run_dir"]: r for r in _records(runs / FORKED, "fork_parent.json") if r["status"] == "done"}
    common = sorted(set(indep) & set(branches))
    # a parent counts once, and only when all of its branches are among the compared points
    used_parents = {branches[k]["parent"] for k in common}
    complete = [p for p in used_parents if p in parents and all(
        (parents[p]["r"], parents[p]["width"], c) in common for c in parents[p]["config"]["budget"]["fork_flops"])]
    points = [k for k in common if branches[k]["parent"] in complete]
    if not points:
        print(f"\nno point finished in both {runs / INDEPENDENT} and {runs / FORKED}")
        return
    print(f"\nmeasured on {len(points)} points ({len(complete)} parents) in {runs}:")
    print(f"  {'r':>2} {'d':>4} {'C_budget':>9} {'steps':>6} {'fork':>5} {'L independent':>14} {'L forked':>9} {'rel diff':>9}")
    for k in points:
        a, b = indep[k], branches[k]
        assert a["D"] == b["D"], (k, a["D"], b["D"])  # same points: same tokens
        print(f"  {k[0]:>2} {k[1]:>4} {k[2]:>9.3g} {a['steps']:>6} {b['fork_step']:>5} {a['L']:>14.4f} "
              f"{b['L']:>9.4f} {(b['L'] - a['L']) / a['L']:>+9.2%}")
    rel = [abs(branches[k]["L"] - indep[k]["L"]) / indep[k]["L"] for k in points]
    print(f"  |rel diff|: mean {sum(rel) / len(rel):.2%}, max {max(rel):.2%}; within 1%: {sum(x < 0.01 for x in rel)}/{len(rel)}")
    flops_ind = sum(indep[k]["C"] for k in points)
    flops_fork = sum(parents[p]["C"] for p in complete) + sum(
        branches[k]["F"] * (branches[k]["steps"] - branches[k]["fork_step"]) * branches[k]["batch_tokens"] for k in points)
    wall_ind = sum(indep[k]["wall_time_s"] for k in points)
    wall_fork = sum(parents[p]["wall_time_s"] for p in complete) + sum(branches[k]["wall_time_s"] for k in points)
    print(f"  training FLOPs: independent {flops_ind:.4g}, forked {flops_fork:.4g} -> {flops_ind / flops_fork:.2f}x cheaper")
    print(f"  CPU wall time:  independent {wall_ind:.0f} s, forked {wall_fork:.0f} s -> {wall_ind / wall_fork:.2f}x faster")
    fit_both(runs, points, indep, branches, bootstrap)


def _cli(argv: list[str]) -> None:
    """Run a `loopscale` subcommand in this process, its console output discarded (results go to files)."""
    import contextlib
    import io

    from loopscale.cli import main as cli_main

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        if cli_main(argv) != 0:
            raise RuntimeError(f"loopscale {' '.join(argv)} failed")


def fit_both(runs: Path, points, indep, branches, bootstrap: int) -> None:
    """`loopscale collect` + `loopscale fit --bootstrap N` on each sweep's compared points."""
    import pandas as pd

    out = {}
    for name, recs, sweep in (("independent", indep, INDEPENDENT), ("forked", branches, FORKED)):
        table_path = runs / f"bench_forks_{name}.csv"
        _cli(["collect", str(runs / sweep), "--out", str(table_path)])
        table = pd.read_csv(table_path)
        keep = {recs[k]["run_dir"] for k in points}
        table[table["run_dir"].isin(keep)].to_csv(table_path, index=False)
        fit_path = runs / f"bench_forks_{name}_fit.json"
        _cli(["fit", str(table_path), "--bootstrap", str(bootstrap), "--out", str(fit_path)])
        out[name] = json.loads(fit_path.read_text())
    print(f"  fits (looped law, {len(points)} points each, bootstrap {bootstrap}); fit JSON: {runs}/bench_forks_*_fit.json")
    for name, fit in out.items():
        print(f"    {name:11s} {_phi_line(fit)}")


def _phi_line(fit: dict) -> str:
    params, ci = fit["params"], fit.get("ci95") or {}
    others = ", ".join(f"{k} {params[k]:.4g}" for k in ("E", "A", "alpha", "B", "beta"))
    profile = (fit.get("profile_phi") or {}).get("interval")
    return (f"phi = {params['phi']:.3f}, bootstrap 95% CI {_interval(ci.get('phi'))}, profile interval "
            f"{_interval(profile)}; {others}; {fit['n_rows']} rows, {fit['n_best_basin']}/{fit['n_refined']} starts in best basin")


def _interval(pair) -> str:
    return "n/a" if not pair else f"[{pair[0]:.3f}, {pair[1]:.3f}]"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=Path, default=None, help="runs_dir holding both sweeps")
    parser.add_argument("--train", action="store_true", help="run both sweeps into --runs first (basic launcher)")
    parser.add_argument("--bootstrap", type=int, default=200)
    parser.add_argument("overrides", nargs="*", help="Hydra overrides for --train, e.g. model.r=1,2")
    args = parser.parse_args()
    accounting_summary()
    if args.runs is None:
        return 0
    if args.train:
        for exp in (INDEPENDENT, FORKED):
            subprocess.run([sys.executable, "-m", "loopscale.train", "-m", f"experiment={exp}", "hydra/launcher=basic",
                            f"runs_dir={args.runs}", "trainer.progress=false", *args.overrides], cwd=REPO, check=True)
    measured_summary(args.runs, args.bootstrap)
    return 0


if __name__ == "__main__":
    sys.exit(main())
