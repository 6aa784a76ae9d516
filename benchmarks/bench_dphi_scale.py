"""Why delta-phi's interval (and `power`'s MDE) hardly moved when the profile got one scale per parameter
(docs/results.md, "Why delta-phi's MDE did not move").

1. From the known noise covariance (a forked job's branches share half a run's variance) on the design `power`
   simulates for delta-phi (a calibration cell's forked demo design plus a copy of its looped runs as a second
   recipe, `bench_calibration.draw_sweep(copy=True)`) and on the looped fit of the design alone (phi): each
   parameter's design effect w' V w / w' w (w = e_k^T (J^T J)^-1 J^T, its rows' pull), the share of w^2 that is
   constant within a job, and the pooled S^2's expectation under that covariance (`scatter_about_law`'s divisor
   n (G - p) / G, and the exact one tr(C P)).
2. `--draws` sweeps of that comparison per cell fitted as `power.fit_simulated` fits them (fast path, then
   `scale_to_scatter`): delta-phi's own S_k^2 and nu_k (`noise_scale.parameter_scale`), its threshold over the
   pooled one, and its profile interval's width over the width at the pooled threshold (the code before the
   per-parameter scale: `uncertainty._adjusted` bypassed).

    nice -n 15 .venv/bin/python benchmarks/bench_dphi_scale.py [--draws 30] [--cells demo-3-gauss demo-2-t5]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_calibration as calibration  # noqa: E402

from loopscale.fit import uncertainty  # noqa: E402
from loopscale.fit.joint import joint_table  # noqa: E402
from loopscale.fit.laws.registry import law_data_from_table, make_law, per_recipe_form  # noqa: E402
from loopscale.fit.noise import noise_setup  # noqa: E402
from loopscale.fit.noise_scale import scale_to_scatter  # noqa: E402
from loopscale.fit.objective import Loss  # noqa: E402
from loopscale.fit.optimize import FitState, lm_batch, newton, refine  # noqa: E402

DPHI = f"dphi[{calibration.PROBE}]"


def comparison(cell, k: int, delta_phi: float = 0.0):
    """Sweep k (stream 37) of the cell's design plus its looped copy, as a joint table, its law and its LawData."""
    misfit = 0.002 if cell.noise == "t5" else None  # the t5 cells' misfit held (part power's planted sweeps)
    table, _ = calibration.draw_sweep(cell, 37, k, joint=True, delta_phi=delta_phi, copy=True, misfit=misfit)
    jt, recipes = joint_table([table], "recipe")
    law = make_law(per_recipe_form("looped").name, recipes=recipes)
    _, data, loss = noise_setup(jt, law_data_from_table(jt, law), Loss())
    return jt, law, data, loss


def design_effects(table, law, data, truth: dict) -> None:
    """Part 1 for one design: each parameter's design effect and the pooled S^2's expectation."""
    _, J = law.log_predict_and_jac(law.from_user(truth), data)
    job = np.unique(table["parent"].to_numpy(), return_inverse=True)[1]
    share = calibration.PARENT_SHARE
    V = (1 - share) * np.eye(len(job)) + share * (job[:, None] == job[None, :])
    bread = np.linalg.inv(J.T @ J)
    groups = data.noise_group
    G, n, p = int(groups.max()) + 1, len(job), J.shape[1]
    C = (groups[:, None] == groups[None, :]).astype(float)
    P = np.eye(n) - J @ bread @ J.T
    numerator = np.trace(C @ P @ V @ P)
    print(
        f"  {n} rows, {G} groups, {p} parameters: pooled S^2 expected {numerator / (n * (G - p) / G):.3f} "
        f"(divisor n (G - p) / G), {numerator / np.trace(C @ P):.3f} (exact divisor tr(C P))"
    )
    for k, name in enumerate(law.internal_names):
        w = (bread @ J.T)[k]
        within_job_mean = np.bincount(job, w) / np.bincount(job)
        effect = w @ V @ w / (w @ w)
        between = np.sum(within_job_mean[job] ** 2) / np.sum(w**2)
        print(f"    {name:12s} design effect {effect:.3f}   share of w^2 constant within a job {between:.3f}")


def pooled_interval(state, name: str):
    """The profile interval at the pooled threshold (before the per-parameter scale)."""
    own = uncertainty._adjusted
    uncertainty._adjusted = lambda state, name, thr, stats: (thr, stats)
    try:
        return uncertainty.profile_interval(state, name)
    finally:
        uncertainty._adjusted = own


def one_draw(cell, k: int, starts: np.ndarray) -> list[float]:
    """Part 2 for sweep k: [pooled S^2, its reference dof, S_k^2, nu_k, threshold ratio, width ratio]."""
    _, law, data, loss = comparison(cell, k, delta_phi=0.07)
    with np.errstate(all="ignore"):
        th, fv = lm_batch(law, data, loss, starts)
        theta = newton(law, data, loss, th[int(np.nanargmin(fv))])[0]
        state, scale = scale_to_scatter(FitState(law, data, loss, refine(theta, law, data, loss), starts))
        thr, stats = uncertainty.profile_threshold(state, DPHI)
        lo, hi = uncertainty.profile_interval(state, DPHI)
        plo, phi = pooled_interval(state, DPHI)
    return [
        scale["lack_of_fit"],
        scale["reference_dof"],
        stats["param_scale_sq"],
        stats["reference_dof"],
        thr / stats["pooled_threshold"],
        (hi - lo) / (phi - plo),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cells", nargs="+", default=["demo-3-gauss", "demo-2-t5"], choices=sorted(calibration.CELLS))
    ap.add_argument("--draws", type=int, default=30)
    args = ap.parse_args()
    t0 = time.time()
    cell = calibration.CELLS[args.cells[0]]
    dense, phi = calibration.true_law(cell)
    print("design effects from the known covariance (in the true sigma^2):")
    print(" the comparison power simulates for delta-phi (the joint law):")
    jt, law, data, _ = comparison(cell, 0)
    design_effects(jt, law, data, {**dense, "phi[baseline]": phi, f"phi[{calibration.PROBE}]": phi})
    print(" the design alone (the looped law, phi):")
    table, _ = calibration.draw_sweep(cell, 31, 0, joint=False)
    law = make_law("looped", table["r"].to_numpy(float))
    _, data, _ = noise_setup(table, law_data_from_table(table, law), Loss())
    design_effects(table, law, data, {**dense, "phi": phi})
    for name in args.cells:
        starts = calibration.fast_starts(name, True, 3, True)
        rows = np.array([one_draw(calibration.CELLS[name], k, starts) for k in range(args.draws)])
        s2, _, s2_k, nu_k, thr, width = rows.T
        se = s2_k.std(ddof=1) / np.sqrt(len(s2_k))
        print(
            f"{name}, {len(rows)} sweeps: pooled S^2 mean {s2.mean():.2f} on F(1, {int(np.median(rows[:, 1]))}); "
            f"delta-phi's S_k^2 mean {s2_k.mean():.3f} +- {se:.3f} (in the scaled sigma^2), nu_k {nu_k.min():.1f}-"
            f"{nu_k.max():.1f} (median {np.median(nu_k):.1f}); threshold / pooled mean {thr.mean():.3f}; "
            f"width / pooled width median {np.median(width):.3f} (range {width.min():.3f}-{width.max():.3f})",
            flush=True,
        )
    print(f"{time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
