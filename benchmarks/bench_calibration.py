"""Are the fit's 95% intervals 95% intervals? Coverage on simulated sweeps with known truth (issue 38 item 5).

For each scenario, --sweeps sweeps are drawn from a known law with seed noise (`synthetic.seeded_sweep`) and
each is fitted exactly as `loopscale fit` fits it (`fit_table`: multi-start, phi profile, bootstrap; the joint
fit `fit_joint` without its separate fits), with the noise model on (the default) and, for comparison, off
(today's fit, `noise="off"`). Printed per scenario and method: the share of sweeps whose 95% interval of phi
(single fit) and of delta-phi (joint fit, true delta-phi 0) covers the truth, the share of sweeps where the
delta-phi interval excludes 0 ("real" with no true difference: the false-"real" rate), and the recovered seed
sigma of log L (median ratio to the truth, share within +-20%). Target: coverage 92-98%, sigma within +-20%,
false "real" <= 5%. With --sweeps 200 the Monte-Carlo standard error of a coverage near 95% is 1.5 points.

Scenarios (designs from loopscale/fit/synthetic.py):
  published   the published grid (BASELINE_SIZES at r in {1, 2, 4, 8}; joint: plus the probe's TBPTT_SIZES at
              r in {2, 4, 8}), 3 seeds per point, independent runs (sigma of log L 0.005)
  mixed       the published grid with 1 to 4 seeds per point (unequal; a third of the points unrepeated) and a
              sigma falling with the budget (0.008 at the smallest, 0.004 at the largest: the rule must find it)
  demo        the CPU demo's forked design (44 points from 16 jobs; joint: plus a recipe's r in {2, 4, 8}),
              3 seeds = 3 parent jobs per (r, width); half of the variance a per-parent offset that all of a
              parent's branches share, half each branch's own; the bootstrap's outer clusters are the parents
Methods: "boot keep" (the default: two-stage bootstrap, outer clusters with replacement, a drawn point keeps
its seeds), "boot resample" (its seeds drawn again with replacement, --inner-resample), "profile" (the robust
likelihood-ratio interval on the seed-sigma scale), and "off boot" / "off profile" (noise model off).

    .venv/bin/python benchmarks/bench_calibration.py [--sweeps 200] [--bootstrap 100] [--jobs 0]
        [--scenarios published mixed demo] [--skip-off] [--inner-resample] [--fits phi dphi]

Runs one sweep per worker process (--jobs, 0 = every core); wall time and the load average are printed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pandas as pd

from loopscale.fit import synthetic as S
from loopscale.fit.fit_table import fit_table
from loopscale.fit.joint import fit_joint, joint_table
from loopscale.fit.resample import resolve_jobs

SIGMA = 0.005
DELTA_PHI_TRUE = 0.0
PROBE = "probe"


def _budget_trend(table: pd.DataFrame) -> np.ndarray:
    """sigma of log L from 0.008 at the smallest budget to 0.004 at the largest, log-linear in C."""
    logC = np.log(table["C_budget"].to_numpy(float))
    u = (logC - logC.min()) / (logC.max() - logC.min())
    return 0.008 * (0.5**u)


def scenario(name: str, k: int, joint: bool) -> tuple[pd.DataFrame, float, float | np.ndarray, str | None]:
    """(sweep k of a scenario, true phi of the reference, true sigma per row, --cluster)."""
    rng = np.random.default_rng([17, k])
    if name == "demo":
        parts = [S.demo_grid(S.BASELINE_R, "baseline")] + ([S.demo_grid(S.PROBE_R, PROBE)] if joint else [])
        grid = pd.concat(parts, ignore_index=True)
        phi = {"baseline": S.DEMO_PHI, PROBE: S.DEMO_PHI + DELTA_PHI_TRUE}
        table = S.seeded_sweep(grid, phi, 3, SIGMA, seed=k, dense=S.DEMO_DENSE, forked=True, parent_share=0.5)
        return table, S.DEMO_PHI, SIGMA, "parent"
    parts = [S.isodepth_grid(S.BASELINE_SIZES, S.BASELINE_R, "baseline")]
    if joint:
        parts.append(S.isodepth_grid(S.TBPTT_SIZES, S.PROBE_R, PROBE))
    grid = pd.concat(parts, ignore_index=True)
    phi = {"baseline": S.PUBLISHED_PHI["baseline"], PROBE: S.PUBLISHED_PHI["baseline"] + DELTA_PHI_TRUE}
    if name == "published":
        table = S.seeded_sweep(grid, phi, 3, SIGMA, seed=k)
        return table, phi["baseline"], SIGMA, None
    seeds = rng.choice([1, 1, 2, 3, 4], size=len(grid))
    table = S.seeded_sweep(grid, phi, seeds, _budget_trend, seed=k)
    return table, phi["baseline"], _budget_trend(table), None


def _covers(interval, truth: float) -> float:
    if interval is None or any(v is None for v in interval):
        return np.nan
    return float(interval[0] <= truth <= interval[1])


def _excludes_zero(interval) -> float:
    if interval is None or any(v is None for v in interval):
        return np.nan
    return float(interval[0] > 0 or interval[1] < 0)


def run_sweep(task: tuple) -> list[dict]:
    """Every method's numbers on sweep k of a scenario: one dict per (fit kind, method)."""
    name, k, n_boot, methods, fits = task
    out = []
    with np.errstate(all="ignore"):
        # single fit: phi
        table, phi_true, sigma_true, cluster = scenario(name, k, joint=False)
        for method in methods:
            noise, inner = ("off", "keep") if method.startswith("off") else ("auto", method)
            fit = fit_table(table, "looped", seed=k, n_bootstrap=n_boot, cluster=cluster, noise=noise, inner=inner)
            label = "off" if noise == "off" else f"boot {inner}"
            out.append({"scenario": name, "fit": "phi", "method": label, "covers": _covers(fit.ci95["phi"], phi_true)})
            if method == methods[0] or noise == "off":
                prof = "off profile" if noise == "off" else "profile"
                cover = _covers(fit.profile_phi["interval"], phi_true)
                out.append({"scenario": name, "fit": "phi", "method": prof, "covers": cover})
            if noise == "auto" and method == methods[0]:
                ratio = fit.noise["sigma_log"] / float(np.sqrt(np.mean(np.square(sigma_true))))
                out.append({"scenario": name, "fit": "sigma", "method": fit.noise["model"]["kind"], "ratio": ratio})
        if "dphi" not in fits:
            return out
        # joint fit: delta-phi, true value DELTA_PHI_TRUE
        table, _, _, cluster = scenario(name, k, joint=True)
        jt, recipes = joint_table([table], "recipe")
        for method in methods:
            noise, inner = ("off", "keep") if method.startswith("off") else ("auto", method)
            fit = fit_joint(
                jt,
                "recipe",
                recipes,
                seed=k,
                n_bootstrap=n_boot,
                cluster=cluster,
                separate=False,
                noise=noise,
                inner=inner,
            )
            d = fit.joint["delta_phi"][PROBE]
            label = "off" if noise == "off" else f"boot {inner}"
            cover = _covers(d["bootstrap_ci"], DELTA_PHI_TRUE)
            out.append(
                {
                    "scenario": name,
                    "fit": "dphi",
                    "method": label,
                    "covers": cover,
                    "real": _excludes_zero(d["bootstrap_ci"]),
                }
            )
            if method == methods[0] or noise == "off":
                prof = "off profile" if noise == "off" else "profile"
                iv = d["profile_interval"]
                out.append(
                    {
                        "scenario": name,
                        "fit": "dphi",
                        "method": prof,
                        "covers": _covers(iv, DELTA_PHI_TRUE),
                        "real": _excludes_zero(iv),
                    }
                )
    return out


def coverage_table(rows: list[dict]) -> pd.DataFrame:
    """Per scenario and method: phi coverage, delta-phi coverage, false "real" rate (percent) and sweeps."""
    df = pd.DataFrame(rows)
    cov = df[df["fit"].isin(["phi", "dphi"])]
    table = cov.pivot_table(index=["scenario", "method"], columns="fit", values="covers", aggfunc="mean") * 100
    real = cov[cov["fit"] == "dphi"].groupby(["scenario", "method"])["real"].mean() * 100
    n = cov[cov["fit"] == "phi"].groupby(["scenario", "method"])["covers"].count()
    out = table.reindex(columns=["phi", "dphi"]).rename(columns={"phi": "phi cover %", "dphi": "dphi cover %"})
    out["false real %"] = real.reindex(out.index)
    out["sweeps"] = n
    return out.round(1)


def sigma_table(rows: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame([r for r in rows if r["fit"] == "sigma"])
    g = df.groupby("scenario")
    return pd.DataFrame(
        {
            "median sigma ratio": g["ratio"].median().round(3),
            "within +-20% %": g["ratio"].apply(lambda x: 100 * float(np.mean(np.abs(x - 1) <= 0.2))).round(1),
            "models chosen": g["method"].agg(lambda x: ", ".join(f"{k} {v}" for k, v in x.value_counts().items())),
        }
    )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sweeps", type=int, default=200)
    p.add_argument("--bootstrap", type=int, default=100, help="replicates per bootstrap")
    p.add_argument("--jobs", type=int, default=0, help="worker processes (0: every core)")
    p.add_argument("--scenarios", nargs="+", default=["published", "mixed", "demo"])
    p.add_argument("--skip-off", action="store_true", help="leave out the noise-off comparison")
    p.add_argument("--inner-resample", action="store_true", help="also the bootstrap that resamples seeds")
    p.add_argument("--fits", nargs="+", default=["phi", "dphi"], help="phi (single fits) and/or dphi (joint fits)")
    args = p.parse_args(argv)
    methods = ["keep"] + (["resample"] if args.inner_resample else []) + ([] if args.skip_off else ["off"])
    jobs = resolve_jobs(args.jobs)
    tasks = [(name, k, args.bootstrap, methods, args.fits) for name in args.scenarios for k in range(args.sweeps)]
    t0 = time.perf_counter()
    rows: list[dict] = []
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for i, part in enumerate(pool.map(run_sweep, tasks, chunksize=1)):
            rows.extend(part)
            if (i + 1) % 20 == 0:
                print(f"  {i + 1}/{len(tasks)} sweeps, {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    wall = time.perf_counter() - t0
    pd.set_option("display.width", 160)
    print(
        f"coverage of nominal 95% intervals ({args.sweeps} sweeps per scenario, {args.bootstrap} bootstrap "
        f"replicates; true delta-phi {DELTA_PHI_TRUE}: 'false real' = the delta-phi interval excludes 0):"
    )
    print(coverage_table(rows).to_string())
    print("\nseed sigma of log L recovered (noise model on):")
    print(sigma_table(rows).to_string())
    print(f"\n{len(tasks)} sweeps in {wall:.0f} s on {jobs} worker processes; load average {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
