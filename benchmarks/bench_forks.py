"""Forked WSD sweeps vs independent runs (issue 8): training FLOPs, CPU wall time, per-point loss fidelity and
the fitted phi, for the same (r, width, budget) points.

    .venv/bin/python benchmarks/bench_forks.py                     # accounting only (no training)
    .venv/bin/python benchmarks/bench_forks.py --runs RUNS_DIR     # + measured numbers from finished sweeps
    .venv/bin/python benchmarks/bench_forks.py --runs RUNS_DIR --train model.r=1,2 point=...  # train first
    .venv/bin/python benchmarks/bench_forks.py --runs runs/forks3 --train \
        'point=C6e11_8e11_1e12-d64,C6e11_8e11_1e12-d96,C6e11_8e11_1e12-d128' --fork-override optim.decay_frac=0.1
    .venv/bin/python benchmarks/bench_forks.py --fidelity OUT_DIR  # forked vs linear-decay loss by run length
    .venv/bin/python benchmarks/bench_forks.py --fidelity OUT_DIR --steps 2000 --max-rel-diff 0.01  # `make bench`
    .venv/bin/python benchmarks/bench_forks.py --runs RUNS_DIR --sweeps isodepth_cpu_long isodepth_cpu_long_wsd

RUNS_DIR holds the two sweeps `loopscale-train -m experiment=isodepth_cpu` (independent, the recipe's own
linear-decay schedule) and `experiment=isodepth_cpu_wsd` (forked, runs_dir=RUNS_DIR) write; --train runs
the independent sweep at every point of the forked grid (60, a superset of the independent grid's 32).
Only points present in both are compared. FLOPs are accounting (F x tokens); wall time is the sum of the
runs' own wall_time_s (a forked point's share of its parent is not split: the forked total is parents +
branches). phi is fitted on the forked points, on the same points trained independently, and on the
independent CPU grid itself (its 32 points, what `make demo` fits).
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
    from loopscale.launch.sweep import plan_rows

    for exp in (INDEPENDENT, FORKED):
        rows = plan_rows([f"experiment={exp}"])
        ci, cf = sum(r["C_independent"] for r in rows), sum(r["C_forked"] for r in rows)
        print(
            f"accounting, experiment={exp}: {len(rows)} jobs, {sum(r['points'] for r in rows)} points, "
            f"training FLOPs {cf:.4g} (as independent runs {ci:.4g}: {ci / cf:.2f}x)"
        )
    # the saving of one model with k points D_1 < ... < D_k and cooldown fraction c (eq. in forks.py):
    #   sum_i D_i / ((1 - c) D_k + c sum_i D_i)
    print("\nsaving per model = sum D_i / ((1 - c) max D_i + c sum D_i), by token counts and cooldown c:")
    cases = {
        "3 counts x2 apart (1,2,4)": [1, 2, 4],
        "3 counts (2,3,4)": [2, 3, 4],
        "3 counts (3,4,5)": [3, 4, 5],
        "4 counts x2 (1..8)": [1, 2, 4, 8],
        "5 counts x1.41 (1..4)": [2 ** (i / 2) for i in range(5)],
        "8 counts (1..8)": list(range(1, 9)),
    }
    print(f"  {'token counts':28s}" + "".join(f"  c={c:<5}" for c in (0.1, 0.2)))
    for name, ds in cases.items():
        print(f"  {name:28s}" + "".join(f"  {sum(ds) / ((1 - c) * max(ds) + c * sum(ds)):5.2f}x " for c in (0.1, 0.2)))


def forked_grid_points(overrides: list[str]) -> list[str]:
    """The forked grid's branch points as independent-grid points ('C3.5e11-d64'), from its jobs' configs."""
    from loopscale.config.naming import budget_tag
    from loopscale.launch.sweep import expand

    points = {
        f"{budget_tag('flops', C, None, None)}-d{job.cfg.model.d_model}"
        for job in expand([f"experiment={FORKED}", *overrides])
        for C in job.cfg.budget.fork_flops
    }
    return sorted(points)


def independent_grid_keys() -> set[str]:
    """Run names of the independent CPU grid's own 32 points (sweeps/grid/cpu.yaml)."""
    from loopscale.launch.sweep import expand

    return {job.cfg.run_name for job in expand([f"experiment={INDEPENDENT}"])}


def _records(sweep_dir: Path, name: str) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(sweep_dir.glob(f"*/{name}"))]


def measured_summary(runs: Path, bootstrap: int, indep_sweep: str = INDEPENDENT, forked_sweep: str = FORKED) -> None:
    """Compare the points (r, width, D) finished in both sweeps; a point is (r, width, tokens), whatever
    budget mode named it."""

    def key(rec):
        return rec["r"], rec["width"], rec["D"]

    indep = {key(r): r for r in _records(runs / indep_sweep, "run.json") if r["status"] == "done"}
    branches = {key(r): r for r in _records(runs / forked_sweep, "run.json") if r["status"] == "done"}
    parents = {r["run_dir"]: r for r in _records(runs / forked_sweep, "fork_parent.json") if r["status"] == "done"}
    common = sorted(set(indep) & set(branches))
    # a parent counts once, and only when all of its branches are among the compared points
    children = {}
    for k, rec in branches.items():
        children.setdefault(rec["parent"], []).append(k)
    complete = [
        p
        for p, keys in children.items()
        if p in parents and all(k in common for k in keys) and len(keys) == len(parents[p]["fork_steps"])
    ]
    points = [k for k in common if branches[k]["parent"] in complete]
    if not points:
        print(f"\nno point finished in both {runs / indep_sweep} and {runs / forked_sweep}")
        return
    print(f"\nmeasured on {len(points)} points ({len(complete)} parents) in {runs}:")
    print(
        f"  {'r':>2} {'d':>4} {'D':>9} {'steps':>6} {'fork':>5} {'L independent':>14} {'L forked':>9} {'rel diff':>9}"
    )
    for k in points:
        a, b = indep[k], branches[k]
        print(
            f"  {k[0]:>2} {k[1]:>4} {k[2]:>9.3g} {a['steps']:>6} {b['fork_step']:>5} {a['L']:>14.4f} "
            f"{b['L']:>9.4f} {(b['L'] - a['L']) / a['L']:>+9.2%}"
        )
    rel = [abs(branches[k]["L"] - indep[k]["L"]) / indep[k]["L"] for k in points]
    print(
        f"  |rel diff|: mean {sum(rel) / len(rel):.2%}, max {max(rel):.2%}; "
        f"within 1%: {sum(x < 0.01 for x in rel)}/{len(rel)}"
    )
    flops_ind = sum(indep[k]["C"] for k in points)
    flops_fork = sum(parents[p]["C_forked"] for p in complete)  # parent + its cooldowns (forks.ForkPlan)
    wall_ind = sum(indep[k]["wall_time_s"] for k in points)
    wall_fork = sum(parents[p]["wall_time_s"] for p in complete) + sum(branches[k]["wall_time_s"] for k in points)
    print(
        f"  training FLOPs: independent {flops_ind:.4g}, forked {flops_fork:.4g} -> "
        f"{flops_ind / flops_fork:.2f}x cheaper"
    )
    print(
        f"  CPU wall time:  independent {wall_ind:.0f} s, forked {wall_fork:.0f} s -> "
        f"{wall_ind / wall_fork:.2f}x faster"
    )
    fit_both(runs, points, indep, branches, bootstrap, indep_sweep, forked_sweep)


def fidelity_by_length(
    out: Path, widths: list[int], steps: list[int], r: int, fork_overrides: list[str]
) -> list[tuple[int, int, float]]:
    """Fidelity against run length: per width, ONE forked parent with a branch at each of `steps` (the CPU
    grid's configs, 20% linear cooldowns) vs an independent run of the recipe's own schedule (warmup 5%,
    linear decay to 10%) at the same token count. The CPU grid's runs are 29-452 steps long. fork_overrides
    change the forked runs only (e.g. optim.final_lr_frac=0.1); each set trains into its own folder.
    Returns (width, steps, relative loss difference forked vs linear) per comparison."""
    from loopscale.config.dirs import train_config
    from loopscale.train.entry import run_training

    def cfg(overrides):
        return train_config([*overrides, "trainer.progress=false", f"model.r={r}"])

    grid = cfg(["experiment=isodepth_cpu"])
    batch_tokens = grid.budget.batch_size * grid.model.seq_len  # the CPU grid's batch

    forked_dir = out / "_".join(["forked", *fork_overrides]).replace("=", "-")
    print(
        f"\nfidelity by run length (r={r}; forked branch {' '.join(fork_overrides)} vs independent linear-decay "
        f"run, same tokens), in {out}:"
    )
    print(f"  {'d':>4} {'steps':>6} {'L linear':>9} {'L forked':>9} {'rel diff':>9} {'wall linear':>12}")
    rows = []
    for width in widths:
        fork = cfg(
            [
                "experiment=isodepth_cpu_wsd",
                f"point=C1e12-d{width}",
                "budget.fork_flops=null",
                f"budget.fork_tokens=[{','.join(str(s * batch_tokens) for s in steps)}]",
                f"runs_dir={forked_dir}",
                *fork_overrides,
            ]
        )
        branches = run_training(fork)["branches"]
        for s, branch in zip(steps, branches):
            linear = run_training(
                cfg(
                    [
                        "experiment=isodepth_cpu",
                        f"point=C1e12-d{width}",
                        "budget.mode=tokens",
                        f"budget.tokens={s * batch_tokens}",
                        f"run_name=linear-r{r}-d{width}-s{s}",
                        f"runs_dir={out / 'linear'}",
                    ]
                )
            )
            assert linear["D"] == branch["D"] and linear["steps"] == branch["steps"] == s
            rel = (branch["L"] - linear["L"]) / linear["L"]
            rows.append((width, s, rel))
            print(
                f"  {width:>4} {s:>6} {linear['L']:>9.4f} {branch['L']:>9.4f} {rel:>+9.2%} "
                f"{linear['wall_time_s']:>11.0f}s",
                flush=True,
            )
    return rows


def fit_both(runs: Path, points, indep, branches, bootstrap: int, indep_sweep: str, forked_sweep: str) -> None:
    """The runs table of `loopscale collect` + `loopscale fit --bootstrap N` on each sweep's compared points,
    and for the CPU
    grid on the independent grid's own 32 points (what `make demo` fits)."""
    from loopscale.fit.fit_table import fit_table
    from loopscale.fit.runs_table import canonical_table, read_table
    from loopscale.train.collect import collect, runs_table

    out, tables = {}, {}
    fits = [("independent", indep, indep_sweep, points), ("forked", branches, forked_sweep, points)]
    grid = independent_grid_keys() if indep_sweep == INDEPENDENT else set()
    in_grid = [k for k in points if indep[k]["run_name"] in grid]
    if grid and len(in_grid) == len(grid):  # the whole independent CPU grid is among the compared points
        fits.insert(0, ("independent_grid", indep, INDEPENDENT, in_grid))
    reference = fits[0][0]
    for name, recs, sweep, keys in fits:
        if sweep not in tables:  # what `loopscale collect` writes, once per sweep
            tables[sweep] = runs_table(collect(runs / sweep)[0])
        table = tables[sweep]
        keep = {recs[k]["run_dir"] for k in keys}
        table_path = runs / f"bench_forks_{forked_sweep}_{name}.csv"
        table[table["run_dir"].isin(keep)].to_csv(table_path, index=False)
        fit_path = runs / f"bench_forks_{forked_sweep}_{name}_fit.json"
        # what `loopscale fit TABLE --bootstrap N --out FIT` does: the looped law, bootstrap seed 1, profile
        fit_table(canonical_table(read_table(table_path), "looped"), n_bootstrap=bootstrap).write_json(fit_path)
        out[name] = json.loads(fit_path.read_text())
    print(f"  fits (looped law, bootstrap {bootstrap}); fit JSON: {runs}/bench_forks_{forked_sweep}_*_fit.json")
    for name, fit in out.items():
        print(f"    {name:16s} {_phi_line(fit)}")
    lo, hi = out[reference]["ci95"]["phi"]
    phi = out["forked"]["params"]["phi"]
    if lo is None or hi is None:
        print(f"  no bootstrap CI for phi from the {reference} fit: nothing to compare the forked phi with")
        return
    print(
        f"  forked phi {phi:.3f} is {'INSIDE' if lo <= phi <= hi else 'OUTSIDE'} the bootstrap 95% CI of the "
        f"{reference} fit [{lo:.3f}, {hi:.3f}]"
    )


def _phi_line(fit: dict) -> str:
    params, ci = fit["params"], fit.get("ci95") or {}
    others = ", ".join(f"{k} {params[k]:.4g}" for k in ("E", "A", "alpha", "B", "beta"))
    profile = (fit.get("profile_phi") or {}).get("interval")
    return (
        f"phi = {params['phi']:.3f}, bootstrap 95% CI {_interval(ci.get('phi'))}, profile interval "
        f"{_interval(profile)}; {others}; {fit['n_rows']} rows, "
        f"{fit['n_best_basin']}/{fit['n_refined']} starts in best basin"
    )


def _interval(pair) -> str:
    return "n/a" if not pair or None in pair else f"[{pair[0]:.3f}, {pair[1]:.3f}]"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=Path, default=None, help="runs_dir holding both sweeps")
    parser.add_argument("--train", action="store_true", help="run both sweeps into --runs first (basic launcher)")
    parser.add_argument("--bootstrap", type=int, default=200)
    parser.add_argument(
        "--sweeps",
        nargs=2,
        default=[INDEPENDENT, FORKED],
        metavar=("INDEPENDENT", "FORKED"),
        help="the two sweep folders under --runs to compare (default: %(default)s)",
    )
    parser.add_argument(
        "--fidelity",
        type=Path,
        default=None,
        metavar="OUT_DIR",
        help="train the fidelity-by-run-length comparison into OUT_DIR",
    )
    parser.add_argument("--widths", type=int, nargs="+", default=[64, 96])
    parser.add_argument("--steps", type=int, nargs="+", default=[250, 500, 1000, 2000])
    parser.add_argument("--r", type=int, default=1)
    parser.add_argument(
        "--fork-override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an override for the forked runs only (--train, --fidelity), e.g. optim.decay_frac=0.1",
    )
    parser.add_argument(
        "--max-rel-diff",
        type=float,
        default=None,
        help="with --fidelity: exit 1 if a branch of the longest run length is further than this from the "
        "linear-decay run (relative loss; `make bench` asks 0.01 at 2000 steps)",
    )
    parser.add_argument("overrides", nargs="*", help="Hydra overrides for --train, e.g. model.r=1,2")
    args = parser.parse_args()
    accounting_summary()
    if args.fidelity is not None:
        rows = fidelity_by_length(args.fidelity, args.widths, args.steps, args.r, args.fork_override)
        longest = [(w, s, rel) for w, s, rel in rows if s == max(args.steps)]
        if args.max_rel_diff is not None and any(abs(rel) >= args.max_rel_diff for _, _, rel in longest):
            print(f"  FAILED: a forked branch at {max(args.steps)} steps is {args.max_rel_diff:.0%} or more off")
            return 1
    if args.runs is None:
        return 0
    if args.train:
        # a point= override picks the forked grid; the independent runs are its branch points
        points = forked_grid_points([*args.overrides, *args.fork_override])
        shared = [o for o in args.overrides if not o.startswith("point=")]
        for exp, extra in (
            (INDEPENDENT, [f"point={','.join(points)}", *shared]),
            (FORKED, [*args.overrides, *args.fork_override]),
        ):
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "loopscale.train.entry",
                    "-m",
                    f"experiment={exp}",
                    "hydra/launcher=basic",
                    f"runs_dir={args.runs}",
                    "trainer.progress=false",
                    *extra,
                ],
                cwd=REPO,
                check=True,
            )
    measured_summary(args.runs, args.bootstrap, *args.sweeps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
