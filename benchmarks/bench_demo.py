"""The demo's wall time by stage, its training FLOP/s against this machine's matmul peak, and whether its
phi is a measurement (the conditioning numbers of loopscale/analysis/conditioning.py against the demo's targets).

    .venv/bin/python benchmarks/bench_demo.py [--out runs/bench_demo] [--reuse] [--skip-workers]
        [--data-dir DIR] [-- extra demo overrides]

1. the demo itself (`loopscale demo --out OUT`) in a fresh OUT with a fresh token cache OUT/data (so the
   data stage is what a new machine pays; --reuse keeps both, --data-dir points at a cache), then its
   demo.json: the wall time of each stage, training FLOPs / training wall time, its ratio to the peak of
   (2), and the conditioning numbers with the targets it misses.
2. peak: fp32 matmuls (1024^3, one thread per process) in as many processes as the demo has workers, side
   by side for a few seconds: the aggregate GFLOP/s this machine sustains on the demo's own layout.
3. workers: the demo's d = 32 model (d = 32, r = 1), 30 optimizer steps, trained (a) in one process
   with 2 threads and (b) as 2 processes x 1 thread at once: tokens/s each way (why the demo uses (b)).
Run it on an idle machine: every number here is wall-clock.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
MATMUL_N = 1024


def _matmul_gflops(seconds: float) -> float:
    import torch

    torch.set_num_threads(1)
    a, b = torch.randn(MATMUL_N, MATMUL_N), torch.randn(MATMUL_N, MATMUL_N)
    a @ b
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        a @ b
        n += 1
    return 2 * MATMUL_N**3 * n / (time.perf_counter() - t0) / 1e9


def matmul_peak(processes: int, seconds: float = 4.0) -> float:
    """Aggregate fp32 matmul GFLOP/s of `processes` single-thread processes running at once."""
    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        return sum(pool.map(_matmul_gflops, [seconds] * processes))


def _train_steps(args: tuple[int, int, str]) -> float:
    """Tokens/s of `steps` optimizer steps of the demo's d = 32, r = 1 model with `threads` torch threads."""
    threads, steps, data_dir = args
    import torch

    torch.set_num_threads(threads)
    from step_timing import step_times

    from loopscale.config.dirs import train_config

    overrides = ["model.d_model=32", "model.r=1", "budget.mode=tokens", "budget.tokens=1024000"]
    cfg = train_config(["experiment=isodepth_cpu_demo", *overrides, f"data.data_dir={data_dir}"])
    fwd_bwd_s, opt_s, batch_tokens = step_times(cfg, steps)
    return batch_tokens / (fwd_bwd_s + opt_s)


def workers_vs_threads(data_dir: str, steps: int = 30) -> tuple[float, float]:
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        threads2 = pool.map(_train_steps, [(2, steps, data_dir)])[0]
    with ctx.Pool(2) as pool:
        procs2 = sum(pool.map(_train_steps, [(1, steps, data_dir)] * 2))
    return threads2, procs2


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=REPO_ROOT / "runs" / "bench_demo")
    ap.add_argument("--reuse", action="store_true", help="keep OUT's finished runs (default: start fresh)")
    ap.add_argument("--skip-workers", action="store_true", help="skip the threads-vs-processes comparison")
    ap.add_argument("--data-dir", default=None, help="token cache (default: OUT/data, built by the demo)")
    ap.add_argument("--bootstrap", type=int, default=200)
    ap.add_argument("overrides", nargs="*", help="extra demo overrides (after --)")
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}; CPUs: {os.cpu_count()}")
    if args.out.exists() and not args.reuse:
        shutil.rmtree(args.out)
    data_dir = args.data_dir or str(args.out / "data")
    cmd = [
        str(Path(sys.executable).with_name("loopscale")),
        "demo",
        "--out",
        str(args.out),
        "--bootstrap",
        str(args.bootstrap),
        "--data-dir",
        data_dir,
        *args.overrides,
    ]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO_ROOT)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        print(f"demo failed (rc {proc.returncode})")
        return proc.returncode
    workers = min(os.cpu_count() or 1, 2)
    peak = matmul_peak(workers)
    print(f"[peak] fp32 matmul {MATMUL_N}^3, {workers} processes x 1 thread: {peak:.1f} GFLOP/s")
    if not args.skip_workers:
        threads2, procs2 = workers_vs_threads(data_dir)
        print(
            f"[workers] d = 32, r = 1 training: 1 process x 2 threads {threads2:,.0f} tokens/s; "
            f"2 processes x 1 thread {procs2:,.0f} tokens/s ({procs2 / threads2:.2f}x)"
        )
    summary = json.loads((args.out / "demo.json").read_text())
    stages = ", ".join(f"{k} {v:.1f} s" for k, v in summary["stage_s"].items())
    print(f"[demo] {wall:.1f} s wall in all (process start included; target <= 900 s); stages: {stages}")
    fps = summary["train_flops_per_s"]
    if fps:
        print(
            f"[demo] training: {summary['train_flops']:.3g} FLOPs in {summary['stage_s']['train']:.1f} s = "
            f"{fps / 1e9:.1f} GFLOP/s on {summary['workers']} workers = {fps / 1e9 / peak:.2f} of the matmul peak"
        )
    cond = summary["conditioning"]
    ci = cond["phi_ci"]
    print(
        f"[fit] phi {cond['phi']:.3f}, 95% CI [{ci[0]:.3f}, {ci[1]:.3f}] (width {cond['phi_ci_width']:.3f}, "
        f"{cond['n_bootstrap']} replicates); E {cond['E']:.4g} (inside bounds: {cond['E_inside']}); "
        f"{cond['n_best_basin']}/{cond['n_refined']} starts in the best basin"
    )
    if cond["holdout_mre"] is not None:
        print(f"[fit] held-out largest budget: mean |relative error| {100 * cond['holdout_mre']:.2f}%")
    for m in cond["isoflop_r1"]:
        print(
            f"[iso-FLOP r=1] C {m['budget']:.3g}: best width {m['best_width']:g} of {m['widths']} "
            f"({'inside' if m['inside'] else 'EDGE'})"
        )
    rms = cond["collapse_rms"]
    print(
        f"[collapse] RMS {100 * rms['phi_fit']:.2f}% at the fitted phi, {100 * rms['phi_0']:.2f}% at phi = 0, "
        f"{100 * rms['phi_1']:.2f}% at phi = 1 (ratio {cond['collapse_ratio']:.2f}, target <= 0.5)"
    )
    misses = summary["conditioning_misses"]
    print("[verdict] " + ("every conditioning target met" if not misses else "misses: " + "; ".join(misses)))
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
