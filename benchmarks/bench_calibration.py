"""The calibration matrix (issue 53): are the fit's 95% intervals 95% intervals, is a null delta-phi called "real"
at most 5% of the time, and does `loopscale power`'s MDE give the power it promises, on designs x seeds x noise?

Cells: {published grid, the CPU demo's forked design} x {1, 2, 3 seeds a point} x {gauss: Gaussian seed noise;
t5: Student-t (5 dof) seed noise plus a point-level misfit shared by the point's seeds}, and two more on the
published grid: `unbalanced` (1-4 seeds a point, a third unrepeated, t5 + misfit) and `trend` (3 seeds, a
Gaussian sigma halving from the smallest budget to the largest). Seed noise: sigma of log L 0.005 (its standard
deviation; a t draw is scaled to it); the misfit's standard deviation is drawn per sweep in [0.001, 0.003]; in
the forked design half of a run's variance is its parent job's (shared by the job's branches). The generator is
this file's own (`draw_sweep`), not `loopscale.fit.synthetic`'s noise (only its grids and law are used).

Part `coverage`: each sweep is fitted as `loopscale fit` fits it (`fit_table`, and `fit_joint` on the sweep
plus a second recipe's looped runs with the same phi: delta-phi = 0; the forked design's bootstrap by parent
job), and per interval (the profile, the bootstrap percentile) we count coverage of phi and of delta-phi, the
false "real" (the delta-phi interval excludes 0), and the verdict's own answer; plus the recovered seed sigma.

Part `power`: sweep k of a cell draws its own fresh pilot k (one sweep of the design, fitted as `fit` fits it),
`loopscale power`'s MDE from that pilot (`simulate_design` on the pilot's `truth_from_fit`), then one sweep with
that delta-phi planted, fitted as a user would (`fit_joint` with the verdict). The share called "real" over the
sweeps is the realised power averaged over pilots, which is what the MDE promises (80%: it draws sigma from the
pilot's uncertainty, so one pilot's MDE is a draw, and a single pilot planted 25 times measures that pilot's
luck, not the method: docs/results.md, "before"). The share "no difference detected" at a true |delta-phi|
above its margin is the false "no difference".

`--law looped-entry` (issue 54): part power with the sweeps drawn from the looped-entry law (m_1 = 1, m_r = kappa
r^phi for r > 1, kappa = ENTRY_KAPPA), each pilot fitted with that law and a cluster bootstrap (`--pilot-bootstrap`:
`power` draws kappa per sweep from the pilot's interval of it), `power`'s MDE from the pilot under the same law, and
the planted sweep fitted as a user would (`fit --law looped-entry --joint recipe`); written to OUT/power-looped-entry.

Resumable: every sweep's numbers are appended to OUT/<part>/<cell>.jsonl as it finishes; a rerun skips the sweeps
already there and prints the table from all of them. Monte-Carlo standard errors are printed beside every share.

    nice -n 10 .venv/bin/python benchmarks/bench_calibration.py --part coverage --sweeps 100 --jobs 2 \\
        [--cells published-3-gauss demo-2-t5 ...] [--bootstrap 60] [--out runs/calibration]
    nice -n 10 .venv/bin/python benchmarks/bench_calibration.py --part power --sweeps 40 --sims 100 --jobs 2 \\
        --cells published-1-t5 published-2-t5 published-3-gauss demo-3-gauss
    nice -n 10 .venv/bin/python benchmarks/bench_calibration.py --part power --sweeps 40 --sims 64 --jobs 2 \\
        --cells demo-2-t5 published-unbalanced-t5 published-3-gauss-trend published-1-t5
    nice -n 10 .venv/bin/python benchmarks/bench_calibration.py --part power --law looped-entry --sweeps 30 \
        --sims 40 --jobs 2 --cells demo-3-gauss
    .venv/bin/python benchmarks/bench_calibration.py --table [--out runs/calibration]     # print only
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from loopscale.analysis.report import markdown_table
from loopscale.fit import synthetic as S
from loopscale.fit.fit_table import fit_table
from loopscale.fit.joint import fit_joint, joint_table
from loopscale.fit.laws.registry import law_class, law_data_from_table, make_law, per_recipe_form
from loopscale.fit.objective import Loss
from loopscale.fit.pilot import truth_from_fit
from loopscale.fit.power import screened_starts, simulate_design
from loopscale.fit.replicates import point_keys
from loopscale.fit.resample import resolve_jobs
from loopscale.fit.starts import screen_starts
from loopscale.fit.verdict import delta_answer

SIGMA = 0.005  # standard deviation of a run's seed noise in log L
MISFIT_RANGE = (0.001, 0.003)  # standard deviation of the point-level misfit in log L, drawn per sweep
T_DOF = 5
PARENT_SHARE = 0.5  # forked design: the share of a run's noise variance its parent job's branches share
PROBE = "probe"
ENTRY_KAPPA = (
    0.5  # --law looped-entry: the one-off price of looping the sweeps are drawn with (bench_logr_law's middle)
)
LAW_EXTRAS = {"looped": {}, "looped-entry": {"kappa": ENTRY_KAPPA}}  # the laws part power draws from: their own params
PILOT_BOOTSTRAP = 30  # --law looped-entry: a pilot's bootstrap replicates (kappa's interval, which power draws from)


@dataclass(frozen=True)
class Cell:
    design: str  # "published" or "demo"
    seeds: int | str  # seeds a point, or "1-4"
    noise: str  # "gauss" or "t5" (t5 noise plus point misfit)
    trend: bool = False

    @property
    def name(self) -> str:
        seeds = "unbalanced" if self.seeds == "1-4" else f"{self.seeds}"
        return f"{self.design}-{seeds}-{self.noise}" + ("-trend" if self.trend else "")


CELLS = {
    c.name: c
    for c in [Cell(d, k, n) for d in ("published", "demo") for k in (1, 2, 3) for n in ("gauss", "t5")]
    + [Cell("published", "1-4", "t5"), Cell("published", 3, "gauss", trend=True)]
}


def _trend(table: pd.DataFrame) -> np.ndarray:
    """sigma of log L from 1.4 x SIGMA at the smallest budget to 0.7 x SIGMA at the largest, log-linear in C."""
    logC = np.log(table["C_budget"].to_numpy(float))
    u = (logC - logC.min()) / max(logC.max() - logC.min(), 1e-12)
    return SIGMA * 1.4 * (0.5**u)


def _grid(cell: Cell, joint: bool, copy: bool = False) -> pd.DataFrame:
    """The cell's design (one row per point); joint: plus a second recipe's runs, its probe grid, or with `copy`
    a copy of the design's looped points (the comparison `loopscale power` simulates)."""
    if copy:
        base = _grid(cell, False)
        return pd.concat([base, base[base["r"] > 1].assign(recipe=PROBE)], ignore_index=True)
    if cell.design == "demo":
        # the second recipe: the demo's looped models again, labelled as the probe (its accounting is the baseline's)
        probe = S.demo_grid(S.PROBE_R, "baseline").assign(recipe=PROBE)
        parts = [S.demo_grid(S.BASELINE_R, "baseline")] + ([probe] if joint else [])
    else:
        parts = [S.isodepth_grid(S.BASELINE_SIZES, S.BASELINE_R, "baseline")]
        probe = S.isodepth_grid(S.TBPTT_SIZES, S.PROBE_R, "baseline").assign(recipe=PROBE)  # as the runs so far
        parts += [probe] if joint else []
    return pd.concat(parts, ignore_index=True)


def true_law(cell: Cell, law: str = "looped") -> tuple[dict, float]:
    """(the law's parameters but phi: the dense law and the law's own, e.g. kappa; phi): a cell's sweeps' truth."""
    dense, phi = (
        (dict(S.DEMO_DENSE), S.DEMO_PHI) if cell.design == "demo" else (dict(S.TRUE_DENSE), S.PUBLISHED_PHI["baseline"])
    )
    return {**dense, **LAW_EXTRAS[law]}, phi


def law_log_L(table: pd.DataFrame, params: dict, phi: float, law: str) -> np.ndarray:
    """log L of `law` (its registered prediction) at phi per row: the looped law's is the synthetic module's."""
    if law == "looped":
        return np.log(S.law_loss(table, params, phi))
    return np.log(law_class(law).predict_table({**params, "phi": phi}, table))


def draw_sweep(
    cell: Cell,
    stream: int,
    k: int,
    joint: bool,
    delta_phi: float = 0.0,
    copy: bool = False,
    misfit=None,
    law: str = "looped",
) -> tuple[pd.DataFrame, dict]:
    """Sweep k of a cell (generator seeded by (stream, k)): the table with L and a `seed` column (and `parent` in
    the forked design), and its truth {"phi", "sigma_rms", "misfit"}. misfit: the t5 cells' point misfit held at
    this value instead of drawn per sweep (part power: the planted sweeps share their pilot's process)."""
    rng = np.random.default_rng([stream, k])
    grid = _grid(cell, joint, copy)
    seeds = rng.choice([1, 1, 2, 3, 4], size=len(grid)) if cell.seeds == "1-4" else np.full(len(grid), cell.seeds)
    table = grid.loc[grid.index.repeat(seeds)].reset_index(drop=True)
    table["seed"] = np.concatenate([np.arange(s) for s in seeds])
    dense, phi = true_law(cell, law)
    recipe = table["recipe"].astype(str).to_numpy()
    log_L = law_log_L(table, dense, phi, law)
    if delta_phi:
        probe = recipe == PROBE
        log_L[probe] = law_log_L(table[probe], dense, phi + delta_phi, law)
    sigma = _trend(table) if cell.trend else np.full(len(table), SIGMA)

    def unit(n):  # unit-variance draws: Gaussian, or Student-t scaled to sd 1
        if cell.noise == "t5":
            return rng.standard_t(T_DOF, n) / np.sqrt(T_DOF / (T_DOF - 2))
        return rng.standard_normal(n)

    eps = unit(len(table))
    if cell.design == "demo":  # forked: one job per (recipe, r, model, seed); its branches share half the variance
        job = table[["r", "N_once", "N_rec", "seed"]].astype(str).agg("-".join, axis=1) + "-" + recipe
        codes, inverse = np.unique(job.to_numpy(), return_inverse=True)
        table["parent"] = "parent-" + job
        eps = np.sqrt(PARENT_SHARE) * unit(len(codes))[inverse] + np.sqrt(1 - PARENT_SHARE) * eps
    log_L = log_L + sigma * eps
    misfit_given, misfit = misfit, 0.0
    if cell.noise == "t5":
        drawn = float(rng.uniform(*MISFIT_RANGE))
        misfit = drawn if misfit_given is None else float(misfit_given)
        keys = point_keys(table)
        point = keys.groupby(list(keys.columns), sort=False).ngroup().to_numpy()
        log_L = log_L + misfit * rng.standard_normal(point.max() + 1)[point]
    table["L"] = np.exp(log_L)
    return table, {"phi": phi, "sigma_rms": float(np.sqrt(np.mean(sigma**2))), "misfit": misfit}


@functools.cache
def fast_starts(name: str, joint: bool, n_refine: int, copy: bool = False, law_name: str = "looped") -> np.ndarray:
    """The fast path's starts for a cell's fits (as `loopscale power` fits its simulated sweeps): the truth and the
    best n_refine - 1 starts screened once on the design's noise-free table, refined on every sweep instead of
    screening each sweep's own (half of a fit's time); a law that starts from another's optimum (looped-entry)
    the warm starts of that law's best (`power.screened_starts`)."""
    cell = CELLS[name]
    dense, phi = true_law(cell, law_name)
    grid = _grid(cell, joint, copy)
    grid = grid.assign(L=np.exp(law_log_L(grid, dense, phi, law_name)))
    if joint:
        grid, recipes = joint_table([grid], "recipe")
        law = make_law(per_recipe_form(law_name).name, recipes=recipes)
        truth = {**dense, "phi[baseline]": phi, f"phi[{PROBE}]": phi}
    else:
        law, truth = make_law(law_name, grid["r"].to_numpy(float)), {**dense, "phi": phi}
    data = law_data_from_table(grid, law)
    if law.warm_start is None:
        screened, _ = screen_starts(law, data, Loss(), n_refine, np.random.default_rng(0))
        screened = screened[: n_refine - 1]
    else:
        screened = screened_starts(law, data, Loss(), max(1, (n_refine - 1) // 3))
    return np.vstack([law.from_user(truth), screened])


def _covers(interval, truth: float):
    if interval is None or any(v is None for v in interval):
        return None
    return bool(interval[0] <= truth <= interval[1])


def _excludes_zero(interval):
    if interval is None or any(v is None for v in interval):
        return None
    return bool(interval[0] > 0 or interval[1] < 0)


def coverage_sweep(task: tuple) -> dict:
    """One sweep's numbers for part `coverage`: phi and delta-phi (truth 0) per interval, the verdicts, sigma."""
    name, k, n_boot, n_refine = task
    cell = CELLS[name]
    cluster = "parent" if cell.design == "demo" else None
    out: dict = {"k": k}
    with np.errstate(all="ignore"):
        table, truth = draw_sweep(cell, 17, k, joint=False)
        starts = fast_starts(name, False, n_refine)
        fit = fit_table(table, "looped", seed=k, n_bootstrap=n_boot, cluster=cluster, starts=starts)
        out["phi"] = {
            "estimate": fit.params["phi"],
            "true": truth["phi"],
            "interval": fit.profile_phi["interval"],
            "bootstrap_ci": (fit.ci95 or {}).get("phi"),
            "profile": _covers(fit.profile_phi["interval"], truth["phi"]),
            "bootstrap": _covers((fit.ci95 or {}).get("phi"), truth["phi"]),
            "measured": fit.conditioning["measured"],
            "covered_when_measured": _covers(fit.profile_phi["interval"], truth["phi"])
            if fit.conditioning["measured"]
            else None,
        }
        noise = fit.noise or {}
        out["sigma_ratio"] = noise["sigma_log"] / truth["sigma_rms"] if noise.get("model") else None
        out["sigma_model"] = (noise.get("model") or {}).get("kind")
        out["lack_of_fit"] = noise.get("lack_of_fit")
        table, _ = draw_sweep(cell, 23, k, joint=True)
        jt, recipes = joint_table([table], "recipe")
        fit = fit_joint(
            jt,
            "recipe",
            recipes,
            seed=k,
            n_bootstrap=n_boot,
            cluster=cluster,
            separate=False,
            starts=fast_starts(name, True, n_refine),
        )
        d = fit.joint["delta_phi"][PROBE]
        checks = fit.conditioning["checks"]
        out["dphi"] = {
            "estimate": d["estimate"],
            "profile_interval": d.get("profile_interval"),
            "bootstrap_ci": d.get("bootstrap_ci"),
            "bootstrap_se": d.get("se"),
            "profile_reference_dof": (d.get("profile") or {}).get("reference_dof"),
            # failed blocking checks other than the interval's own (bounds): they gate any interval's answer
            "blocking": [
                c["name"]
                for c in checks
                if not c["ok"] and c["protects"] != "N*/D* extrapolation" and not c["name"].endswith("interval")
            ],
            "verdict": fit.conditioning["delta_phi"][PROBE]["answer"],
            "verdict_source": fit.conditioning["delta_phi"][PROBE]["source"],
        }
    return out


def _answer(d: dict, source: str) -> str | None:
    """The verdict's answer on a null delta-phi had it read this interval (its other blocking checks kept); None
    for a sweep fitted without that interval (no bootstrap)."""
    interval = d["profile_interval"] if source == "profile" else d["bootstrap_ci"]
    if interval is None:
        return None
    return delta_answer(d["estimate"], interval, None, source, blocking=d["blocking"])["answer"]


POWER_CELLS = ("published-2-t5", "published-3-gauss", "demo-3-gauss", "published-1-t5")


def pilot_mde(cell: Cell, stream: int, k: int, n_sims: int, n_refine: int, law: str = "looped") -> tuple[dict, dict]:
    """Pilot k of a cell (one sweep of its design, generator (stream, k)), fitted as `fit` does, and `loopscale
    power`'s delta-phi numbers from it (`simulate_design` on the same design with the pilot's `truth_from_fit`);
    and the pilot sweep's truth. A law with parameters of its own (looped-entry's kappa): the pilot fitted with it
    and a bootstrap (by parent job in the forked design), whose interval of kappa `power` draws from."""
    table, truth = draw_sweep(cell, stream, k, joint=False, law=law)
    starts = fast_starts(cell.name, False, n_refine, law_name=law)
    boot = {} if not LAW_EXTRAS[law] else {"n_bootstrap": PILOT_BOOTSTRAP, "seed": k}
    if boot and cell.design == "demo":
        boot["cluster"] = "parent"
    fit = fit_table(table, law, profile=False, starts=starts, **boot)
    pilot = truth_from_fit(fit)
    sim = simulate_design(table.drop(columns=["L"]), pilot, n_sims, seed=5, what=("delta_phi",))["delta_phi"]
    keys = ("mde", "mde_point", "mde_upper", "mde_mc_se", "se", "width95")
    noise = {
        "sigma_log": pilot.sigma_log,
        "sigma_dof": pilot.sigma_dof,
        "misfit_log": pilot.misfit_log,
        "tail_dof": pilot.tail_dof,
        "parent_share": pilot.parent_share,
        "parent_share_se": pilot.parent_share_se,
        "pools": [None if u is None else len(u) for u in (pilot.seed_units, pilot.point_units)],
        "params": {key: fit.params[key] for key in LAW_EXTRAS[law]},
        "params_se": dict(pilot.params_se),
    }
    return {**{key: sim[key] for key in keys}, "pilot": noise}, truth


def pilot_spread(task: tuple) -> dict:
    """Part `pilots`: pilot k of a cell (stream 41) and `power`'s MDE from it, with the MDE at sigma's estimate and
    at the upper end of its 95% interval: how far one pilot's MDE is from another's, and whether its stated upper
    end covers that."""
    name, k, n_sims, n_refine = task
    with np.errstate(all="ignore"):
        d, _ = pilot_mde(CELLS[name], 41, k, n_sims, n_refine)
    return {"k": k, **{key: d[key] for key in ("mde", "mde_point", "mde_upper", "mde_mc_se")}}


def power_sweep(task: tuple) -> dict:
    """Sweep k of part `power`: its own pilot k (stream 31) and `power`'s MDE from it, then the cell's design plus
    a copy of its looped points with that MDE planted (stream 37, the pilot's misfit process: its misfit held),
    fitted as a user would (`fit_joint`, no bootstrap: the verdict reads the profile), and the verdict's answer."""
    name, k, n_sims, n_refine, law = (*task, "looped")[:5]
    cell = CELLS[name]
    cluster = "parent" if cell.design == "demo" else None
    joint_law = per_recipe_form(law).name
    with np.errstate(all="ignore"):
        pilot, truth = pilot_mde(cell, 31, k, n_sims, n_refine, law)
        mde = pilot["mde"]
        table, _ = draw_sweep(cell, 37, k, joint=True, delta_phi=mde, copy=True, misfit=truth["misfit"], law=law)
        jt, recipes = joint_table([table], "recipe")
        starts = fast_starts(name, True, n_refine, True, law)
        fit = fit_joint(
            jt, "recipe", recipes, seed=k, cluster=cluster, separate=False, starts=starts, law_name=joint_law
        )
    answer = fit.conditioning["delta_phi"][PROBE]
    pilot["pilot"].update(true_sigma=truth["sigma_rms"], true_misfit=truth["misfit"])
    return {"k": k, **pilot, "answer": answer["answer"], "interval": answer["interval"], "line": answer["line"]}


def pilots_table(out: Path) -> pd.DataFrame:
    rows = []
    for name in CELLS:
        path = out / "pilots" / f"{name}.jsonl"
        if not path.exists():
            continue
        recs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        mde = np.array([r["mde"] for r in recs])
        rows.append(
            {
                "cell": name,
                "pilots": len(recs),
                "MDE median (range)": f"{np.median(mde):.4f} ({mde.min():.4f}-{mde.max():.4f})",
                "pilot-to-pilot sd / median": f"{np.std(mde, ddof=1) / np.median(mde):.2f}",
                "upper end / MDE (median)": f"{np.median([r['mde_upper'] / r['mde'] for r in recs]):.2f}",
                "pilots whose upper end >= the median MDE %": _pm(r["mde_upper"] >= np.median(mde) for r in recs),
            }
        )
    return pd.DataFrame(rows).set_index("cell") if rows else pd.DataFrame()


def _false_no_difference(rec: dict) -> bool:
    """The verdict said "no difference detected: |delta-phi| < x" with x below the planted delta-phi."""
    if rec["answer"] != "no difference":
        return False
    lo, hi = rec["interval"]
    return math.ceil(max(-lo, hi) * 100 - 1e-9) / 100 < rec["mde"]


def power_table(out: Path, law: str = "looped") -> pd.DataFrame:
    rows = []
    for name in CELLS:
        path = out / part_folder("power", law) / f"{name}.jsonl"
        if not path.exists():
            continue
        recs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        recs = [r for r in recs if "pilot" in r]  # one pilot a sweep (records of the one-pilot part have none)
        if not recs:
            continue
        mde = np.array([r["mde"] for r in recs])
        sigma = np.array([r["pilot"]["sigma_log"] / r["pilot"]["true_sigma"] for r in recs])
        rows.append(
            {
                "cell": name if law == "looped" else f"{name} ({law})",
                "sweeps (one pilot each)": len(recs),
                "MDE median (range)": f"{np.median(mde):.4f} ({mde.min():.4f}-{mde.max():.4f})",
                "MDE's MC se (median)": f"{np.median([r['mde_mc_se'] for r in recs]):.4f}",
                "pilot sigma / true (median)": f"{np.median(sigma):.3f}",
                "realised power %": _pm(r["answer"] == "real" for r in recs),
                "false 'no difference' %": _pm(_false_no_difference(r) for r in recs),
            }
        )
    return pd.DataFrame(rows).set_index("cell") if rows else pd.DataFrame()


def _is_real(answer: str | None) -> bool | None:
    return None if answer is None else answer == "real"


def _share(values) -> tuple[float, float, int]:
    """(percent, its Monte-Carlo standard error in points, n) of the True among the non-None values (the error of
    a share p of n as sqrt(q (1 - q) / n), q = (k + 1) / (n + 2): a share of 0 or n of n is not exact)."""
    v = np.array([bool(x) for x in values if x is not None], dtype=float)
    if not len(v):
        return float("nan"), float("nan"), 0
    p = float(v.mean())
    q = (v.sum() + 1) / (
        len(v) + 2
    )  # the share's standard error with one success and one failure added: not 0 at 0% or 100%
    return 100 * p, 100 * float(np.sqrt(q * (1 - q) / len(v))), len(v)


def _pm(values) -> str:
    p, se, n = _share(values)
    return "n/a" if n == 0 else f"{p:.1f} ± {se:.1f}"


def coverage_table(out: Path) -> pd.DataFrame:
    rows = []
    for name in CELLS:
        path = out / "coverage" / f"{name}.jsonl"
        if not path.exists():
            continue
        recs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        ratios = np.array([r["sigma_ratio"] for r in recs if r.get("sigma_ratio") is not None])
        rows.append(
            {
                "cell": name,
                "sweeps (with a bootstrap)": f"{len(recs)} ({sum(r['phi']['bootstrap'] is not None for r in recs)})",
                "phi profile %": _pm(r["phi"]["profile"] for r in recs),
                "phi bootstrap %": _pm(r["phi"]["bootstrap"] for r in recs),
                "dphi profile %": _pm(_covers(r["dphi"]["profile_interval"], 0.0) for r in recs),
                "dphi bootstrap %": _pm(_covers(r["dphi"]["bootstrap_ci"], 0.0) for r in recs),
                "false real: profile %": _pm(_is_real(_answer(r["dphi"], "profile")) for r in recs),
                "false real: bootstrap %": _pm(_is_real(_answer(r["dphi"], "bootstrap")) for r in recs),
                "phi measured %": _pm(r["phi"]["measured"] for r in recs),
                "sigma within ±20% %": "n/a" if not len(ratios) else _pm(np.abs(ratios - 1) <= 0.2),
                "sigma median ratio": "n/a" if not len(ratios) else f"{np.median(ratios):.3f}",
            }
        )
    return pd.DataFrame(rows).set_index("cell") if rows else pd.DataFrame()


def _done(path: Path) -> set[int]:
    if not path.exists():
        return set()
    return {json.loads(line)["k"] for line in path.read_text().splitlines() if line.strip()}


def part_folder(part: str, law: str) -> str:
    """Where a part's sweeps are written: OUT/<part>, or OUT/<part>-<law> for another law than r^phi."""
    return part if law == "looped" else f"{part}-{law}"


def run_part(
    part: str,
    cells: list[str],
    sweeps: int,
    jobs: int,
    out: Path,
    n_boot: int,
    n_refine: int,
    n_sims: int = 100,
    law: str = "looped",
) -> None:
    if law != "looped" and part != "power":
        raise SystemExit(f"--law {law}: part power only")
    folder = out / part_folder(part, law)
    folder.mkdir(parents=True, exist_ok=True)
    todo = {name: [k for k in range(sweeps) if k not in _done(folder / f"{name}.jsonl")] for name in cells}
    if part == "pilots":
        worker, extra = pilot_spread, {name: (n_sims, n_refine) for name in cells}
    elif part == "power":
        worker, extra = power_sweep, {name: (n_sims, n_refine, law) for name in cells}
    else:
        worker, extra = coverage_sweep, {name: (n_boot, n_refine) for name in cells}
    tasks = []
    for i in range(sweeps):  # interleaved, so every cell grows together and a stop leaves each with some sweeps
        tasks += [(name, todo[name][i], *extra[name]) for name in cells if i < len(todo[name])]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(worker, t): t for t in tasks}
        for n, fut in enumerate(as_completed(futures), 1):
            name = futures[fut][0]
            rec = fut.result()
            with open(folder / f"{name}.jsonl", "a") as fh:
                fh.write(json.dumps(rec) + "\n")
            if n % 10 == 0 or n == len(tasks):
                load = os.getloadavg()[0]
                print(f"  {n}/{len(tasks)} sweeps, {time.perf_counter() - t0:.0f} s, load {load:.1f}", file=sys.stderr)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--part", choices=["coverage", "power", "pilots"], default="coverage")
    p.add_argument(
        "--law", choices=list(LAW_EXTRAS), default="looped", help="part power: the law sweeps are drawn from"
    )
    p.add_argument("--sims", type=int, default=100, help="part power: simulated sweeps of `power` per pilot")
    p.add_argument("--cells", nargs="+", default=list(CELLS), choices=list(CELLS))
    p.add_argument("--sweeps", type=int, default=100, help="sweeps a cell (the ones already written are kept)")
    p.add_argument("--bootstrap", type=int, default=60, help="bootstrap replicates per fit")
    p.add_argument("--refine", type=int, default=4, help="starts refined per fit: the truth and the best screened")
    p.add_argument("--jobs", type=int, default=1, help="worker processes (0: every core)")
    p.add_argument("--out", type=Path, default=Path("runs/calibration"))
    p.add_argument("--table", action="store_true", help="print the table of what is written, run nothing")
    p.add_argument("--md", action="store_true", help="the tables as Markdown (docs/results.md)")
    args = p.parse_args(argv)
    if not args.table:
        t0 = time.perf_counter()
        jobs = resolve_jobs(args.jobs)
        run_part(args.part, args.cells, args.sweeps, jobs, args.out, args.bootstrap, args.refine, args.sims, args.law)
        print(f"wall {time.perf_counter() - t0:.0f} s, load average {os.getloadavg()}", file=sys.stderr)
    tables = [coverage_table(args.out), power_table(args.out), power_table(args.out, "looped-entry")]
    tables.append(pilots_table(args.out))
    if args.md:
        for t in tables:
            if not t.empty:
                rows = [[name, *map(str, row)] for name, row in zip(t.index, t.to_numpy())]
                print(markdown_table(["cell", *t.columns], rows) + "\n")
        return 0
    pd.set_option("display.width", 250)
    pd.set_option("display.max_columns", 30)
    for t in tables:
        print(t.to_string())
    return 0


if __name__ == "__main__":
    sys.exit(main())
