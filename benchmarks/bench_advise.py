"""Does `loopscale advise` advise well? Retrain the advised (r, width, D) of the demo's fit and one neighbour per
side (the valid widths just below and above, same r, D = C / F of each) with the demo's recipe, and compare.

    .venv/bin/python benchmarks/bench_advise.py [--fit runs/demo/fit.json] [--compute 5e11]
        [--max-unique-params M] [--seeds 0,1,2] [--out runs/bench_advise] [--workers 2]

The recipe is the demo's (experiment=isodepth_cpu_demo: its model preset, MuonH with the base lrs, batches of
16 x 64 tokens, the warmup-stable-decay schedule its forked branches end with); each point trains as an
ordinary run of that recipe at budget C (budget=cpu, budget.compute_flops=C), one run per seed, on the
demo's worker pool (two processes x one thread). Printed per point: the predicted loss with the interval of the
fit's bootstrap replicates (for that very model), the trained losses, their mean and standard deviation; then
whether the advised model's mean lies inside its predicted interval (the fit's, and that interval widened by
twice the standard error of a mean of the seeds: the law predicts the expected loss) and whether it is worse
than a neighbour by more than the noise (twice the standard error of the difference of two means, from the
pooled seed standard deviation). Needs the demo's fit: run `make demo` first. Numbers are wall-clock on this machine.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

EXPERIMENT = "isodepth_cpu_demo"


def advice_points(fit, compute: float, cap: float | None):
    """(the advice, [(label, r, width)] for the advised model and its neighbours) at budget `compute`."""
    from loopscale.analysis.advise.advice import advise
    from loopscale.analysis.advise.text import advice_table, summary_lines

    advice = advise(fit, compute_flops=compute, max_unique_params=cap, family="demo")
    print(advice_table(advice).drop(columns=["N_unique_interval", "D_interval"]).to_string(index=False))
    print("\n".join(summary_lines(advice)))
    best = advice.record["best"]["r"]
    step = advice.record["family"]["width_step"]
    d = int(next(rec for rec in advice.record["per_r"] if rec["r"] == best)["advised"]["d_model"])
    points = [("narrower", best, d - step), ("advised", best, d), ("wider", best, d + step)]
    return advice, [p for p in points if p[2] >= step and (cap is None or p[0] != "wider" or _fits(fit, p, cap))]


def _fits(fit, point, cap: float) -> bool:
    from loopscale.analysis.advise.family import named_family

    return float(named_family("demo", [point[1]]).value("N_unique", point[1], point[2])) <= cap


def predicted(fit, r: int, width: int, compute: float, level: float = 0.95):
    """(L at the point estimate, [lo, hi] over the bootstrap replicates) of the model (r, width) at C."""
    from loopscale.analysis.advise.family import named_family
    from loopscale.analysis.advise.law_sets import fit_law_sets
    from loopscale.analysis.advise.optimum import Constraints, loss

    family = named_family("demo", [r])
    point, reps, _ = fit_law_sets(fit, [r])
    cons = Constraints(compute)
    L = float(loss(point, family, r, [[width]], cons)[0, 0])
    if reps is None:
        return L, None
    tail = 100 * (1 - level) / 2
    return L, list(np.percentile(loss(reps, family, r, [[width]], cons)[:, 0], [tail, 100 - tail]))


def run_configs(points, seeds, compute: float, out: Path):
    """One ordinary run of the demo's recipe per (point, seed) at budget C."""
    from loopscale.config.dirs import train_config

    cfgs = []
    for label, r, width in points:
        for seed in seeds:
            overrides = [
                f"experiment={EXPERIMENT}",
                "budget=cpu",
                f"budget.compute_flops={compute}",
                f"model.r={r}",
                f"model.d_model={width}",
                f"seed={seed}",
                f"runs_dir={out}",
                "sweep=bench_advise",
                f"run_name=advise-r{r}-d{width}-C{compute:g}-s{seed}",
                "trainer.progress=false",
                "trainer.num_threads=1",
            ]
            cfgs.append(((label, r, width, seed), train_config(overrides)))
    return cfgs


def train(cfgs, workers: int) -> dict:
    from loopscale.launch.local_workers import train_in_workers

    by_name = {cfg.run_name: key for key, cfg in cfgs}
    losses = {}
    for cfg, record, wall_s in train_in_workers([cfg for _, cfg in cfgs], workers, 1):
        key = by_name[cfg.run_name]
        if record.get("status") != "done":
            raise SystemExit(f"{cfg.run_name}: {record.get('status')}: {record.get('reason')}")
        losses[key] = float(record["L"])
        print(f"  {cfg.run_name:<32} L = {record['L']:.4f}  D = {record.get('D')}  ({wall_s:.0f} s)", flush=True)
    return losses


def verdict(rows: list[dict], n_seeds: int) -> dict:
    """Inside the predicted interval? Worse than a neighbour beyond twice the SE of a difference of means?"""
    pooled_sd = float(np.sqrt(np.mean([row["sd"] ** 2 for row in rows]))) if n_seeds > 1 else float("nan")
    se_diff = pooled_sd * np.sqrt(2 / n_seeds)
    advised = next(row for row in rows if row["label"] == "advised")
    lo, hi = advised["interval"] or (np.nan, np.nan)
    out = {"pooled_seed_sd": pooled_sd, "se_difference": se_diff, "inside_interval": bool(lo <= advised["mean"] <= hi)}
    # the law predicts the expected loss; a mean of n seeds scatters around it by sd / sqrt(n) on top
    se_mean = pooled_sd / np.sqrt(n_seeds)
    out["inside_interval_widened_by_2_se_of_the_mean"] = bool(lo - 2 * se_mean <= advised["mean"] <= hi + 2 * se_mean)
    for row in rows:
        if row["label"] != "advised":
            diff = advised["mean"] - row["mean"]
            out[f"advised_minus_{row['label']}"] = diff
            out[f"worse_than_{row['label']}_beyond_noise"] = bool(diff > 2 * se_diff)
    return out


def main() -> None:
    from loopscale.fit.result import load_fit

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fit", default="runs/demo/fit.json")
    parser.add_argument("--compute", type=float, default=5e11, help="budget C in FLOPs (default: the demo's largest)")
    parser.add_argument("--max-unique-params", type=float, default=None)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--out", default="runs/bench_advise")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    if not Path(args.fit).exists():
        raise SystemExit(f"{args.fit} does not exist: run `make demo` first (or pass --fit)")
    started = time.perf_counter()
    fit = load_fit(args.fit)
    seeds = [int(s) for s in args.seeds.split(",")]
    advice, points = advice_points(fit, args.compute, args.max_unique_params)
    print(f"\ntraining {len(points)} points x {len(seeds)} seeds with the demo's recipe at C = {args.compute:g}:")
    losses = train(run_configs(points, seeds, args.compute, Path(args.out)), args.workers)
    rows = []
    for label, r, width in points:
        trained = [losses[(label, r, width, s)] for s in seeds]
        L_pred, interval = predicted(fit, r, width, args.compute)
        rows.append(dict(label=label, r=r, d_model=width, L_pred=L_pred, interval=interval, losses=trained))
        rows[-1].update(mean=float(np.mean(trained)), sd=float(np.std(trained, ddof=1)) if len(seeds) > 1 else 0.0)
    print(
        f"\n{'point':<9} {'r':>2} {'d':>4} {'L predicted':>11} {'interval':>18} {'L trained (mean +- sd)':>24}  seeds"
    )
    for row in rows:
        span = "-" if not row["interval"] else f"[{row['interval'][0]:.4f}, {row['interval'][1]:.4f}]"
        trained = " ".join(f"{x:.4f}" for x in row["losses"])
        print(
            f"{row['label']:<9} {row['r']:>2} {row['d_model']:>4} {row['L_pred']:>11.4f} {span:>18} "
            f"{row['mean']:>15.4f} +- {row['sd']:.4f}  {trained}"
        )
    result = verdict(rows, len(seeds))
    result["wall_time_s"] = time.perf_counter() - started
    print("\n" + "\n".join(f"{k}: {v:.4g}" if isinstance(v, float) else f"{k}: {v}" for k, v in result.items()))
    out = Path(args.out) / "bench_advise.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps({"rows": rows, "verdict": result, "advice": advice.record}, indent=2, default=float) + "\n"
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
