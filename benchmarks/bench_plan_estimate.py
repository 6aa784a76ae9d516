"""`loopscale plan`'s wall-time estimate for hydra/launcher=local_pool against the real wall time of the same
sweep, run right after the plan on the same machine (target: within +-30%, issue 41).

    .venv/bin/python benchmarks/bench_plan_estimate.py [--out runs/bench_plan] [--sweep tiny|demo ...]

Each sweep runs in a fresh folder with a fresh throughput cache (so the plan probes under the conditions of
the moment: the pool's other workers busy, the machine's own load) and, for `demo`, a fresh token cache (so
the first tokenizing is part of both the estimate and the run). For each: the plan's estimate, the measured
wall time of `loopscale-train -m ... hydra/launcher=local_pool` (process start to exit), their ratio, and the
1-minute load average before the plan and after the sweep. On a shared machine the load can change between
the plan and the end of the sweep; the load printed beside each number says how much.

Sweeps:
  tiny  model=tiny model.r=1,2,4 budget.compute_flops=1e12: 3 equal jobs on 2 workers (the old estimate
        divided the hours by the workers: 1.5 job-lengths where the pool takes 2)
  demo  the demo grid reduced to its d = 16 jobs, r = 1, 2, 4 (3 forked jobs, 2 branches each), BPE 512 on
        a token cache that does not have it yet
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

SWEEPS = {
    "tiny": ["model=tiny", "model.r=1,2,4", "budget.compute_flops=1e12", "sweep=bench_tiny"],
    "demo": ["experiment=isodepth_cpu_demo", "model.r=1,2,4", "point=C2.5e11_3.54e11-d16", "sweep=bench_demo"],
}


def _load() -> float:
    return os.getloadavg()[0]


def _run(args: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess, float]:
    started = time.perf_counter()
    proc = subprocess.run(args, capture_output=True, text=True, env=env)
    return proc, time.perf_counter() - started


def bench(name: str, out: Path, data_dir: Path | None) -> dict:
    folder = out / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    data = data_dir if data_dir is not None else folder / "data"
    env = {**os.environ, "LOOPSCALE_CACHE": str(folder / "cache"), "PYTHONUNBUFFERED": "1"}
    overrides = [*SWEEPS[name], f"data.data_dir={data}", f"runs_dir={folder / 'runs'}", "hydra/launcher=local_pool"]
    load_before = _load()
    plan, plan_s = _run([sys.executable, "-m", "loopscale", "plan", *overrides, "--json"], env)
    if plan.returncode != 0:
        raise SystemExit(f"plan failed: {plan.stderr[-2000:]}")
    total = json.loads(plan.stdout.splitlines()[-1])["total"]
    estimate_s = total["cpu_pool_wall_h"] * 3600
    load_mid = _load()
    train, wall_s = _run([sys.executable, "-m", "loopscale.train.entry", "-m", *overrides], env)
    if train.returncode != 0:
        raise SystemExit(f"sweep failed: {train.stderr[-2000:]}")
    result = {
        "sweep": name,
        "jobs": total["jobs"],
        "workers": total["cpu_pool_workers"],
        "estimate_s": estimate_s,
        "measured_s": wall_s,
        "ratio": estimate_s / wall_s,
        "plan_s": plan_s,
        "core_share": total["core_share"],
        "worker_start_s": total["worker_start_s"],
        "tokenize_s": total["tokenize_s"],
        "load_before": load_before,
        "load_at_launch": load_mid,
        "load_after": _load(),
    }
    print(
        f"{name:5s} {result['jobs']} jobs on {result['workers']} workers: estimate {estimate_s:6.0f} s, measured "
        f"{wall_s:6.0f} s, ratio {result['ratio']:.2f} (plan took {plan_s:.0f} s; core share "
        f"{result['core_share']:.2f}, worker start {result['worker_start_s']:.0f} s, tokenizing "
        f"{result['tokenize_s']:.0f} s; load "
        f"{load_before:.2f} -> {load_mid:.2f} -> {result['load_after']:.2f})",
        flush=True,
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/bench_plan"))
    parser.add_argument("--sweep", nargs="+", choices=sorted(SWEEPS), default=["tiny", "demo"])
    parser.add_argument("--data-dir", type=Path, default=None, help="a token cache to use (default: a fresh one)")
    args = parser.parse_args()
    results = [bench(name, args.out, args.data_dir) for name in args.sweep]
    worst = max(abs(r["ratio"] - 1) for r in results)
    print(f"worst |estimate / measured - 1| = {worst:.2f} (target <= 0.30)")
    (args.out / "bench_plan_estimate.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
