"""Coverage of phi's interval from whole loss curves against final points on the demo's forked design (issue 55 item 3)
and on the published-grid fixture's design.

    nice -n 10 .venv/bin/python benchmarks/bench_curve_calibration.py CURVES.csv|--grid published [--points 16] \\
        [--law looped-entry-curve] [--sweeps 100] [--bootstrap 100] [--noise flat|bands] \\
        [--sigma-run S --sigma-eval S --rho R] [--curve-start SHARE] [--bands S S S S] \\
        [--curve-sigma off|position|both] [--out runs/curve_calibration] [--cell NAME]
    .venv/bin/python benchmarks/bench_curve_calibration.py CURVES.csv [--noise bands] --summarise [--out ...]

(the numbers: docs/results.md, "Coverage of phi's interval from curves on the demo's forked design" and "The CLI's
interval from curves on the published grid").

The design is the curves table a forked demo wrote (`loopscale collect`'s runs_curves.csv: parents, their cooldown
branches, each evaluation's step, tokens and lr as the demo ran them), read at each run's trained r. The stated
curve law is `--law` (looped-entry-curve by default, or looped-curve) at the parameters `loopscale fit` finds on
that table (what the demo measured), and the noise is the fit's own curve noise split (`curve_worth.curve_noise`:
a run-level offset and an AR(1) along the curve), unless given; `--noise bands` scales the AR(1) per band of each
evaluation's share of its parent's steps (SHARE_BANDS) by the fit's residual RMS there (the demo's residuals are 10x
larger in the first 2% of steps than in the cooldowns), rho re-read from the residuals so scaled; `--bands` gives
those four sds instead (a synthetic design's truth fit has no residuals to read them from). Each sweep draws

    log L = log L_law(row) + s_run u_parent + s_eval w_row

u one standard normal per parent job (its branches share its weights up to their fork), w an AR(1) series of
lag-1 correlation rho along the parent's stable-phase evaluations, continued along each branch's own cooldown from
its fork's value (the stable phase is one curve, measured once, in every branch's rows).

`--grid published` (no CURVES.csv) takes instead the published-grid fixture's design as bench_curves_phi draws it:
its 108 runs (`fit.synthetic.published_grid`), each one parent, trained with loopscale's wsd schedule and evaluated at
`--points` curve points (`published_design`), the truth stated: `looped-curve` at the fixture's law (TRUE_PARAMS,
phi 0.46) with a full anneal worth K = 0.3 nats, at the lambda `fit` holds (0; bench_curves_phi drew with 0.9, a
variant `fit` cannot state), and the noise given (--sigma-run, --sigma-eval, --rho; --noise bands needs --bands).

Then, exactly as the CLI does (`analysis.fitting.group_tables` and `fit_groups` on the sweep written as a CSV):
  curves: `loopscale fit SWEEP.csv --law LAW --loss-col val_loss --bootstrap B` (the bootstrap by parent, the phi
          profile with its scale summed within each parent: the interval the verdict reads, `verdict.interval_of`);
  finals: `loopscale fit FINALS.csv --law FINAL_LAW --bootstrap B`, FINALS the last evaluation of every run (the
          runs table of the same sweep: equal FLOPs, the curves' evaluations aside), FINAL_LAW the curve law's own
          final-point law (`LoopedCurve.final_law`).
  --curve-sigma position fits the curves with `fit --curve-sigma position` (the residuals weighed by position along
          the run); both: the two curve fits of every sweep, off as "curves" and position as "curves_position".
Printed per fit: coverage of the true phi by the profile interval (the verdict's) and the bootstrap percentile
interval, with Monte-Carlo se and the Wilson 95% interval; the median widths and their ratio curves / finals;
phi_hat's bias and sd; open intervals. Resumable: each sweep appends one JSON line to OUT/CELL.jsonl.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from bench_curves_phi import evaluated  # the benchmarks' folder is on sys.path when run as a script

from loopscale.analysis.fitting import FitRequest, fit_groups, group_tables
from loopscale.fit.curve_worth import curve_noise
from loopscale.fit.curves.synthetic import looped_curves
from loopscale.fit.curves.table import trained_r_rows
from loopscale.fit.laws.registry import law_class, make_law
from loopscale.fit.runs_table import ColumnMap, read_table
from loopscale.fit.synthetic import BATCH_TOKENS, TRUE_PARAMS, published_grid
from loopscale.fit.verdict import interval_of

# the bands of an evaluation's step, as a share of its parent job's longest branch, in which `--noise bands` sets the
# noise's sd to the truth fit's residual RMS (the demo's curve fit misses its early steps by 10x its late ones)
SHARE_BANDS = np.array([0.0, 0.02, 0.1, 0.5, 1.0 + 1e-9])
FITS = ("curves", "curves_position", "finals")
FINAL_COLUMNS = ("run", "parent", "recipe", "width", "r", "N_once", "N_rec", "N", "seed", "steps", "C_budget", "C")
# the published grid's stated truth: the fixture's law with a full anneal worth K nats (bench_curves_phi's)
PUBLISHED_TRUTH = {**TRUE_PARAMS, "K": 0.3}


def published_design(points: int) -> pd.DataFrame:
    """The published-grid fixture's 108 runs as loopscale trains and evaluates them (bench_curves_phi's design):
    run, r, N_once, N_rec, C, width, D, step, tokens, lr_multiplier; no loss (each sweep draws it)."""
    law = make_law("looped-curve")  # the clean loss it draws is dropped: each sweep draws its own
    return looped_curves(published_grid(), law, PUBLISHED_TRUTH, BATCH_TOKENS, evaluated(points)).drop(
        columns=["val_loss", "L_clean"]
    )


def fit_as_the_cli(
    path: Path, law: str, loss_col: str, bootstrap: int, curve_start: float = 0.0, curve_sigma: str = "off"
):
    """(FitResult, canonical table) of `loopscale fit PATH --law LAW --loss-col LOSS_COL --bootstrap B`."""
    extra = {"curve_start": curve_start} if curve_start else {}
    if curve_sigma != "off":
        extra["curve_sigma"] = curve_sigma
    req = FitRequest([str(path)], law=law, columns=ColumnMap(L=loss_col), bootstrap=bootstrap, jobs=1, **extra)
    raw, tables = group_tables(req)
    (_, table, result) = fit_groups(req, raw, tables)[0]
    return result, table


def parent_share(table: pd.DataFrame) -> np.ndarray:
    """(rows,) each evaluation's step as a share of its parent job's longest branch (a shared stable-phase row has
    one share in every branch)."""
    parent = table["parent"].astype(str) if "parent" in table else table["run"].astype(str)
    return (table["step"] / table["step"].groupby(parent.to_numpy()).transform("max")).to_numpy(dtype=float)


def band_sd(residuals: np.ndarray, share: np.ndarray) -> np.ndarray:
    """(bands,) the residuals' RMS in each band of SHARE_BANDS."""
    band = np.searchsorted(SHARE_BANDS, share, side="right") - 1
    return np.array([np.sqrt(np.mean(residuals[band == b] ** 2)) for b in range(len(SHARE_BANDS) - 1)])


def forked_noise(design: pd.DataFrame, s_run: float, s_eval, rho: float, rng) -> np.ndarray:
    """(rows,) log-noise of a curves table (module docstring): a parent offset plus an AR(1) along the parent's
    stable phase, continued along each branch's own rows from its fork. s_eval: one sd, or one per band of
    SHARE_BANDS (the AR(1) is drawn with unit variance and scaled by its row's band)."""
    if np.ndim(s_eval):
        band = np.searchsorted(SHARE_BANDS, parent_share(design), side="right") - 1
        s_eval = np.asarray(s_eval)[np.clip(band, 0, len(SHARE_BANDS) - 2)]
    s_eval = np.broadcast_to(np.asarray(s_eval, dtype=float), (len(design),))
    parent = design["parent"].astype(str) if "parent" in design else design["run"].astype(str)
    shared = design["from_parent"].astype(bool).to_numpy() if "from_parent" in design else np.zeros(len(design), bool)
    step = design["step"].to_numpy(dtype=np.int64)
    out = np.empty(len(design))
    innovation = np.sqrt(1 - rho * rho)
    for p in pd.unique(parent):
        in_p = (parent == p).to_numpy()
        stable_steps = np.unique(step[in_p & shared])
        z = np.empty(len(stable_steps))
        for j in range(len(z)):
            z[j] = rng.standard_normal() if j == 0 else rho * z[j - 1] + innovation * rng.standard_normal()
        at = dict(zip(stable_steps.tolist(), z))
        offset = s_run * rng.standard_normal()
        for run in pd.unique(design.loc[in_p, "run"]):
            rows = np.flatnonzero(in_p & (design["run"] == run).to_numpy())
            rows = rows[np.argsort(step[rows], kind="stable")]
            prev = None
            for i in rows:
                if shared[i]:
                    prev = at[int(step[i])]
                else:
                    prev = rng.standard_normal() if prev is None else rho * prev + innovation * rng.standard_normal()
                out[i] = offset + s_eval[i] * prev
    return out


def summarise(rows: list[dict], phi: float) -> None:
    """Per fit: phi_hat's bias, sd and robust sd (IQR / 1.349: a few sweeps at phi's bound inflate the sd); per
    interval: coverage (MC se, Wilson 95%), median width (an open interval infinitely wide) and of the closed ones,
    the share open; then curves against finals sweep by sweep: the median width ratio and the share of sweeps whose
    curves' interval is the narrower (an open one infinite; both open: a tie, counted half)."""
    n = len(rows)
    print(f"{n} sweeps; true phi {phi:.4f}")
    width = {}
    kinds = [k for k in ("curves", "curves_position", "finals") if k in rows[0]]
    for kind in kinds:
        est = np.array([r[kind]["phi"] for r in rows])
        sd, (q1, q3) = est.std(ddof=1), np.quantile(est, [0.25, 0.75])
        print(f"  {kind}: phi_hat bias {est.mean() - phi:+.4f} +- {sd / np.sqrt(n):.4f}, median {np.median(est):.4f}, "
              f"sd {sd:.4f}, robust sd {(q3 - q1) / 1.349:.4f}")  # fmt: skip
        for iv in ("profile", "bootstrap"):
            cis = [r[kind][iv] for r in rows]
            if iv == "bootstrap" and all(c is None for c in cis):
                continue  # --bootstrap 0
            lo = np.array([-np.inf if c is None or c[0] is None else c[0] for c in cis])
            hi = np.array([np.inf if c is None or c[1] is None else c[1] for c in cis])
            k = int(((lo <= phi) & (phi <= hi)).sum())
            closed = np.isfinite(lo) & np.isfinite(hi)
            width[(kind, iv)] = hi - lo  # an open interval is infinitely wide
            a, b = wilson(k, n)
            se = np.sqrt(k / n * (1 - k / n) / n)
            of_closed = float(np.median((hi - lo)[closed])) if closed.any() else float("nan")
            print(f"    {iv:>9}: coverage {k}/{n} = {k / n:.3f} +- {se:.3f} [{a:.2f}, {b:.2f}]; median width "
                  f"{np.median(hi - lo):.4f}, of the {int(closed.sum())} closed {of_closed:.4f}; open "
                  f"{(~closed).mean():.2f} +- {np.sqrt((~closed).mean() * closed.mean() / n):.2f}")  # fmt: skip
    pairs = [(k, "finals") for k in kinds if k != "finals"] + [("curves_position", "curves")] * ("curves" in kinds)
    for (num, den), iv in ((pair, iv) for pair in pairs for iv in ("profile", "bootstrap")):
        if (num, iv) not in width or (den, iv) not in width:
            continue
        c, f = width[(num, iv)], width[(den, iv)]
        narrower = (c < f) + 0.5 * ((c == f) | (np.isinf(c) & np.isinf(f)))
        with np.errstate(invalid="ignore"):
            ratio = np.where(np.isinf(c) & np.isinf(f), np.nan, c / f)
        ratio = ratio[~np.isnan(ratio)]
        q = np.quantile(ratio, [0.25, 0.5, 0.75], method="nearest") if len(ratio) else [np.nan] * 3
        both = np.isfinite(c) & np.isfinite(f)  # the ratio above reads 0 where only the finals' interval is open
        closed = f"{np.median(c[both] / f[both]):.3f}" if both.any() else "-"
        print(f"  {iv} {num} / {den}, sweep by sweep: width ratio median {q[1]:.3f} (IQR {q[0]:.3f}-{q[2]:.3f}, "
              f"{len(ratio)} sweeps with one closed; {closed} over the {int(both.sum())} with both closed); {num} "
              f"the narrower in {narrower.mean():.2f} +- {narrower.std() / np.sqrt(n):.2f} of sweeps")  # fmt: skip
        if both.sum() > 1:  # the mean widths' ratio over sweeps where both close, with its bootstrap MC se
            rng = np.random.default_rng(0)
            cb, fb = c[both], f[both]
            draws = rng.integers(0, len(cb), (2000, len(cb)))
            boot = cb[draws].mean(axis=1) / fb[draws].mean(axis=1)
            print(f"    mean widths where both close: {cb.mean():.4f} / {fb.mean():.4f} = {cb.mean() / fb.mean():.3f} "
                  f"+- {boot.std():.3f}")  # fmt: skip
    noise = np.array([[r["noise"]["sigma_run_log"], r["noise"]["sigma_eval_log"], r["noise"]["rho"]] for r in rows])
    print(f"  curve noise read back (mean): run {noise[:, 0].mean():.4f}, eval {noise[:, 1].mean():.4f}, "
          f"rho {noise[:, 2].mean():.3f}")  # fmt: skip


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def interval_record(result) -> dict:
    """phi, the verdict's interval (the profile) and the bootstrap percentile interval of a fit."""
    ci, _, _ = interval_of(result, "phi", result.profile_phi)
    boot = (result.ci95 or {}).get("phi")
    closed = ci is not None and ci[0] is not None and ci[1] is not None
    prof = result.profile_phi
    keys = ("phi", "objective", "threshold", "groups", "reference_dof", "independent_sum", "mean_psi_prime")
    walk = {k: prof.get(k) for k in keys} if prof else None
    return {
        "phi": float(result.params["phi"]),
        "profile": ci,
        "bootstrap": boot,
        "width_profile": float(ci[1] - ci[0]) if closed else None,
        "profile_walk": walk,
    }  # fmt: skip  (the profile's grid, objective and threshold: other thresholds offline)


def plain(block) -> dict:
    """A record block as a plain dict (what json writes)."""
    return block.to_json() if hasattr(block, "to_json") else dict(block)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("curves", nargs="?", help="a forked demo's runs_curves.csv (the design and, by its fit, the truth)")
    p.add_argument("--grid", choices=["published"], help="the published-grid fixture's design instead (no CURVES.csv)")
    p.add_argument("--points", type=int, default=16, help="--grid published: curve points a run (trainer.curve_points)")
    p.add_argument("--law", default="looped-entry-curve", choices=["looped-entry-curve", "looped-curve"])
    p.add_argument("--loss-col", default="val_loss")
    p.add_argument("--sweeps", type=int, default=100)
    p.add_argument("--first-seed", type=int, default=0)
    p.add_argument("--bootstrap", type=int, default=100, help="replicates per fit (by parent, as `fit` resamples)")
    p.add_argument("--sigma-run", type=float, help="run offset sd of log L (default: the fit's curve noise)")
    p.add_argument("--sigma-eval", type=float, help="AR(1) sd of log L (default: the fit's)")
    p.add_argument("--rho", type=float, help="AR(1) lag-1 correlation (default: the fit's)")
    p.add_argument(
        "--noise",
        choices=["flat", "bands"],
        default="flat",
        help="flat: one AR(1) sd along the curve (the fit's curve noise); bands: its sd per band of the step's share "
        "of the run (the truth fit's residual RMS there), rho of the residuals so scaled",
    )
    p.add_argument("--curve-start", type=float, default=0.0, help="fit --curve-start for the curve fits")
    p.add_argument("--bands", type=float, nargs=4, metavar="S", help="--noise bands with these sds per band")
    p.add_argument(
        "--curve-sigma",
        default="off",
        choices=["off", "position", "both"],
        help="fit --curve-sigma for the curve fits (both: each sweep's curves fitted off and position)",
    )
    p.add_argument("--out", default="runs/curve_calibration")
    p.add_argument("--cell", default=None, help="name of the jsonl (default: the law and the noise)")
    p.add_argument("--summarise", action="store_true", help="print the summary of the sweeps in the jsonl only")
    args = p.parse_args()

    cls = law_class(args.law)
    start = time.perf_counter()
    if args.grid == "published":  # the truth stated, not fitted: the noise must be too
        if args.curves or args.law != "looped-curve" or None in (args.sigma_run, args.sigma_eval, args.rho):
            p.error("--grid published takes no CURVES.csv, --law looped-curve and --sigma-run, --sigma-eval, --rho")
        if args.noise == "bands" and args.bands is None:
            p.error("--grid published has no truth fit to read bands from: give --bands")
        design, truth, found, source = published_design(args.points), PUBLISHED_TRUTH, {}, "the published grid"
        canon = cls.rows_to_fit(design)
    elif args.curves:
        design = trained_r_rows(read_table(args.curves)).reset_index(drop=True)
        truth_fit, canon = fit_as_the_cli(Path(args.curves), args.law, args.loss_col, 0, args.curve_start)
        truth, found, source = dict(truth_fit.params), plain(truth_fit.noise["curve"]), args.curves
    else:
        p.error("give a CURVES.csv or --grid published")
    s_run = found["sigma_run_log"] if args.sigma_run is None else args.sigma_run
    s_eval = found["sigma_eval_log"] if args.sigma_eval is None else args.sigma_eval
    rho = found["rho"] if args.rho is None else args.rho
    label = f"eval{s_eval:.4f}"
    if args.bands is not None:
        s_eval = np.array(args.bands)
        label = "bands" + "-".join(f"{v:.4f}" for v in s_eval)
    elif args.noise == "bands":  # the sd by band of the residuals, rho of the residuals scaled by it
        residuals = np.log(cls.predict_table(truth, canon)) - np.log(canon["L"].to_numpy())
        share = parent_share(canon)
        s_eval = band_sd(residuals, share)
        scaled = residuals / s_eval[np.searchsorted(SHARE_BANDS, share, side="right") - 1]
        split = curve_noise(scaled, canon["run"], canon["step"], make_law(args.law).n_params)
        rho = split.rho if args.rho is None else args.rho
        label = "bands" + "-".join(f"{v:.4f}" for v in s_eval)
    cell = args.cell or f"{args.grid or ''}{args.law}-run{s_run:.4f}-{label}-rho{rho:.2f}" + (
        f"-start{args.curve_start:g}" if args.curve_start else ""
    ) + (f"-sigma{args.curve_sigma}" if args.curve_sigma != "off" else "")
    out = Path(args.out) / f"{cell}.jsonl"
    done = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    print(f"{args.law} on {source}: {design['run'].nunique()} runs, {len(design)} evaluations ({len(canon)} fitted)")
    print(f"truth: {', '.join(f'{k} {v:.4g}' for k, v in truth.items())}")
    print(f"noise (log L): run offset {s_run:.4f}, AR(1) sd {np.round(s_eval, 4)} (bands {SHARE_BANDS[:-1]} of a "
          f"parent's steps), rho {rho:.3f}; cell {out}")  # fmt: skip
    if args.summarise:
        return summarise(done, truth["phi"])
    clean = cls.predict_table(truth, design)  # the law on every row, the schedule read from all of them
    seen = {r["seed"] for r in done}
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(args.first_seed, args.first_seed + args.sweeps):
            if seed in seen:
                continue
            rng = np.random.default_rng(seed)
            sweep = design.assign(**{args.loss_col: clean * np.exp(forked_noise(design, s_run, s_eval, rho, rng))})
            sweep.to_csv(Path(tmp) / "curves.csv", index=False)
            finals = sweep.loc[sweep.groupby("run")["step"].idxmax()]
            finals = finals[[c for c in FINAL_COLUMNS if c in finals]].assign(
                D=finals["tokens"].to_numpy(), L=finals[args.loss_col].to_numpy()
            )
            finals.drop(columns="run").to_csv(Path(tmp) / "finals.csv", index=False)
            modes = ["off", "position"] if args.curve_sigma == "both" else [args.curve_sigma]
            row = {"seed": seed}
            for mode in modes:
                c_fit, c_table = fit_as_the_cli(Path(tmp) / "curves.csv", args.law, args.loss_col, args.bootstrap,
                                                args.curve_start, mode)  # fmt: skip
                key = "curves_position" if args.curve_sigma == "both" and mode == "position" else "curves"
                row[key] = interval_record(c_fit)
                if mode == "position" and c_fit.noise.get("position_sigma"):
                    row[key]["position_sigma"] = c_fit.noise["position_sigma"]["model"]
                if key == "curves":
                    row.update(noise=plain(c_fit.noise["curve"]), rows=len(c_table))
            f_fit, _ = fit_as_the_cli(Path(tmp) / "finals.csv", cls.final_law, "L", args.bootstrap)
            row["finals"] = interval_record(f_fit)
            with out.open("a") as fh:
                fh.write(json.dumps(row) + "\n")
            done.append(row)
            fits = "  ".join(f"{k} phi {row[k]['phi']:.3f} {row[k]['profile']}" for k in row if k in FITS)
            print(f"  sweep {seed}: {fits}  ({time.perf_counter() - start:.0f} s)", flush=True)
    summarise(done, truth["phi"])


if __name__ == "__main__":
    main()
