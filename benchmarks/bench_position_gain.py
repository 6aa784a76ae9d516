"""What `power` says `--curve-sigma position` may add (`position_sigma.position_gain`, issue 55) against simulated
fits: the CPU demo's forked design (16 jobs, 44 branches, 12 evaluations a run) at the tuned demo's
looped-entry-curve law, each row's log noise sd(s) z with sd 0.02 before 10% of its job's steps and 0.002 after, z a
run offset plus an AR(1) along the job's path (`curve_worth.job_noise_cov`, in units of z); each sweep fitted as
`fit` fits it, without and with `--curve-sigma position` (no profile), and phi_hat's variance over sweeps compared.

    nice -n 10 .venv/bin/python benchmarks/bench_position_gain.py --sweeps 100 [--sigma-run 0 --sigma-eval 1 --rho 0.74]

Prints the linearised promise (the sandwiches' variance ratio, unweighted over two-stage) and the simulated one
(var(phi_hat off) / var(phi_hat on) with a 95% bootstrap interval over sweeps)."""

from __future__ import annotations

import argparse
import time

import numpy as np

# the tuned demo's looped-entry-curve fit, as bench_curve_worth_forked.py (tests/support/position_curves.py's noise)
from bench_curve_worth_forked import LAW, TRUTH, evaluations  # the benchmarks' folder is on sys.path as a script

import loopscale.fit.curve_worth as cw
from loopscale.fit.fit_table import fit_table
from loopscale.fit.laws.registry import make_law
from loopscale.fit.position_sigma import SigmaModel, position_gain, position_share
from loopscale.fit.runs_table import canonical_table
from loopscale.fit.synthetic import demo_forked_design as demo_design

EARLY_SD, LATE_SD, SPLIT = 0.02, 0.002, 0.1  # sd of log L before / after 10% of a job's steps
TWELVE = evaluations(12)  # loopscale's `curve_steps`, 12 a run


BANDS = [0.0, 0.02, SPLIT, 0.5, 1.01]


def draw(curves, noise: cw.CurveNoise, rng: np.random.Generator) -> np.ndarray:
    """One sweep's log noise: per job sd_a sd_b times the job's z covariance (`job_noise_cov`), drawn whole."""
    sd = np.where(position_share(curves) < SPLIT, EARLY_SD, LATE_SD)
    out = np.zeros(len(curves))
    for job in np.unique(curves["job"]):
        on = (curves["job"] == job).to_numpy()
        cov = cw.job_noise_cov(curves.loc[on], noise) * np.outer(sd[on], sd[on])
        out[on] = np.linalg.cholesky(cov + 1e-14 * np.eye(on.sum())) @ rng.standard_normal(on.sum())
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sweeps", type=int, default=100)
    p.add_argument("--sigma-run", type=float, default=0.0)
    p.add_argument("--sigma-eval", type=float, default=1.0)
    p.add_argument("--rho", type=float, default=0.74)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    noise = cw.CurveNoise(args.sigma_run, args.sigma_eval, args.rho, 44, 12.0)
    design = demo_design()
    model = SigmaModel("per band", {"covariate": "share", "edges": BANDS, "sigma_band": [EARLY_SD, EARLY_SD, LATE_SD,
                       LATE_SD]}, 0, 0.0, 4)  # fmt: skip
    promise = position_gain(design, TRUTH, LAW, model, noise, TWELVE)
    print(f"{noise}: linearised variance ratio {promise.variance:.3f} (se ratio {promise.se_ratio:.3f})", flush=True)
    curves = cw.design_curves(design, TWELVE, TRUTH, make_law(LAW))
    rng, phi, started = np.random.default_rng(args.seed), [], time.time()
    for i in range(args.sweeps):
        noisy = curves.assign(L=curves["L"] * np.exp(draw(curves, noise, rng)))
        table = canonical_table(noisy.drop(columns=["job", "eval_depth", "fork_depth"]), LAW)
        off = fit_table(table, LAW, profile=False, n_refine=4).params["phi"]
        on = fit_table(table, LAW, curve_sigma="position", profile=False, n_refine=4).params["phi"]
        phi.append((off, on))
        if (i + 1) % 10 == 0:
            a = np.array(phi)
            print(f"  {i + 1} sweeps, {time.time() - started:.0f} s: var ratio {a[:, 0].var() / a[:, 1].var():.3f}",
                  flush=True)  # fmt: skip
    a = np.array(phi)
    ratio = a[:, 0].var(ddof=1) / a[:, 1].var(ddof=1)
    boot = [
        (lambda b: b[:, 0].var(ddof=1) / b[:, 1].var(ddof=1))(a[rng.integers(0, len(a), len(a))]) for _ in range(2000)
    ]
    lo, hi = np.quantile(boot, [0.025, 0.975])
    print(f"simulated: var(phi off) / var(phi on) {ratio:.3f} [{lo:.3f}, {hi:.3f}] over {len(a)} sweeps; sd off "
          f"{a[:, 0].std(ddof=1):.4f}, on {a[:, 1].std(ddof=1):.4f}; mean phi off {a[:, 0].mean():.4f}, on "
          f"{a[:, 1].mean():.4f} (truth {TRUTH['phi']})")  # fmt: skip


if __name__ == "__main__":
    main()
