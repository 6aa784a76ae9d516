"""Fitting a curve law to some runs' curves and predicting others: multi-start L-BFGS-B on the Huber loss of
log L (the published multi-power fits' objective, delta 1e-3: `loopscale.fit.objective.Loss`), with the
analytic gradient.

Starts: the law's grid (`law.CurveLaw.starts`, variable projection), screened by objective; the best
`n_starts` refined with tight tolerances (default L-BFGS-B tolerances stop early on these flat valleys, as
they do on the final-point law's: docs/design.md "Fitting"). The record says how many refined starts
reached the best basin (within 1e-6 of its objective, relative). Held-out curves are predicted from the
fitted parameters and scored by the relative error |L_hat - L| / L, mean and max per run (the published
multi-power law's PredE and WorstE). A curve with more than MAX_FIT_POINTS evaluations (a loss logged at every
step) is fitted on that many, evenly spread; every evaluation is predicted and scored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import minimize

from loopscale.atomic import atomic_path
from loopscale.errors import InputError
from loopscale.fit.curves.law import CurveLaw
from loopscale.fit.curves.table import Curve, CurveColumns, read_curves, trained_r_rows
from loopscale.fit.objective import Loss
from loopscale.fit.resample import on_one_blas_thread
from loopscale.fit.runs_table import read_table
from loopscale.provenance import git_commit

BASIN_RTOL = 1e-6
MAX_FIT_POINTS = 1000  # evaluations per curve a fit reads (evenly thinned beyond): the drop sum's cost bound
PREDICT_CHUNK = 1000  # evaluations predicted at once (memory: a chunk's drop pairs, ~3 sqrt(T) each)
PUBLISHED_LOSS = Loss("huber", 1e-3)  # the published multi-power fits' objective on ln L


@dataclass(frozen=True)
class RunError:
    """One run's prediction: mean and max relative error over its evaluations."""

    run: str
    role: str  # "fit" or "holdout"
    points: int
    mean_rel_error: float
    max_rel_error: float


@dataclass(frozen=True)
class CurveFit:
    law: str
    formula: str
    params: dict[str, float]
    objective: float
    loss: str
    delta: float
    starts_refined: int
    starts_in_best_basin: int
    fitted_runs: list[str]
    at_bounds: list[str] = field(default_factory=list)  # parameters on an edge of the box (not identified)
    errors: list[RunError] = field(default_factory=list)

    def to_json(self) -> dict:
        return asdict(self)

    def holdout_summary(self) -> dict[str, float] | None:
        """Mean over held-out runs of their mean relative error, and the worst point's error."""
        held = [e for e in self.errors if e.role == "holdout"]
        if not held:
            return None
        return {
            "mean_rel_error": float(np.mean([e.mean_rel_error for e in held])),
            "max_rel_error": float(max(e.max_rel_error for e in held)),
        }


def objective_and_grad(theta, law: CurveLaw, feats: list, curves: list[Curve], loss: Loss):
    """sum over curves and evaluations of rho(ln L_hat - ln L), with its gradient in internal coordinates."""
    total, grad = 0.0, np.zeros(len(theta))
    for f, c in zip(feats, curves):
        pred, J = law.predict_and_jac(theta, f)
        ok = pred > 0
        res = np.where(ok, np.log(np.where(ok, pred, 1.0)) - np.log(c.loss), 1.0)  # a loss <= 0: far outside
        total += float(loss.rho(res).sum())
        grad += (np.where(ok, loss.psi(res) / np.where(ok, pred, 1.0), 0.0)) @ J
    if not np.isfinite(total):
        return np.inf, np.zeros(len(theta))
    return total, grad


@on_one_blas_thread  # L-BFGS-B's tiny matrices: a threaded BLAS spent 6x the fit waking threads here
def fit_curves(law: CurveLaw, curves: list[Curve], loss: Loss = PUBLISHED_LOSS, n_starts: int = 8) -> CurveFit:
    """The law fitted to `curves` (all of them together: one model's runs)."""
    if not curves:
        raise InputError("no curves to fit")
    n_points = sum(len(c.steps) for c in curves)
    if n_points <= len(law.params):
        raise InputError(f"{n_points} evaluations cannot fit the {len(law.params)} parameters of {law.name}")
    law.bind(curves)
    curves = [thinned(c, MAX_FIT_POINTS) for c in curves]
    feats = [law.features(c) for c in curves]
    box = law.bounds(curves)
    lo, hi = np.array([b[0] for b in box]), np.array([b[1] for b in box])
    starts = np.clip(np.asarray(law.starts(curves, feats), dtype=float), lo, hi)
    screened = np.array([objective_and_grad(s, law, feats, curves, loss)[0] for s in starts])
    best_starts = starts[np.argsort(screened)[:n_starts]]
    results = []
    for x0 in best_starts:
        res = minimize(
            objective_and_grad,
            x0,
            args=(law, feats, curves, loss),
            jac=True,
            method="L-BFGS-B",
            bounds=box,
            options={"maxiter": 5000, "maxfun": 20000, "ftol": 1e-15, "gtol": 1e-12, "maxcor": 30},
        )
        results.append((float(res.fun), res.x))
    values = np.array([r[0] for r in results])
    best = int(np.argmin(values))
    in_basin = int(np.sum(values <= values[best] * (1 + BASIN_RTOL) + 1e-300))
    x = results[best][1]
    edge = 1e-6 * np.maximum(1.0, np.abs(x))
    on_edge = (np.abs(x - lo) <= edge) | (np.abs(x - hi) <= edge)
    return CurveFit(
        law=law.name,
        formula=law.formula,
        params=law.to_user(results[best][1]),
        objective=float(values[best]),
        loss=loss.kind,
        delta=loss.delta,
        starts_refined=len(results),
        starts_in_best_basin=in_basin,
        fitted_runs=[c.run for c in curves],
        at_bounds=[name for name, hit in zip(law.params, on_edge) if hit],
    )


def thinned(curve: Curve, most: int) -> Curve:
    """The curve with at most `most` evaluations, evenly spread over its rows (its last one kept): a loss
    logged at every step of a long run is fitted on a thousand of them, and predicted at all."""
    n = len(curve.steps)
    if n <= most:
        return curve
    keep = np.zeros(n, bool)
    keep[np.unique(np.round(np.linspace(0, n - 1, most)).astype(int))] = True
    return curve.restricted(keep)


def predict_curve(law: CurveLaw, params: dict[str, float], curve: Curve) -> np.ndarray:
    """The law's loss at every evaluation of the curve, PREDICT_CHUNK evaluations at a time."""
    out = np.empty(len(curve.steps))
    for lo in range(0, len(out), PREDICT_CHUNK):
        keep = np.zeros(len(out), bool)
        keep[lo : lo + PREDICT_CHUNK] = True
        out[keep] = law.predict(params, curve.restricted(keep))
    return out


def run_error(law: CurveLaw, params: dict[str, float], curve: Curve, role: str) -> tuple[RunError, np.ndarray]:
    """(the run's relative errors, its predicted losses at its evaluations)."""
    pred = predict_curve(law, params, curve)
    rel = np.abs(pred - curve.loss) / curve.loss
    return RunError(curve.run, role, len(rel), float(rel.mean()), float(rel.max())), pred


def fit_and_predict(
    law: CurveLaw, curves: list[Curve], holdout: list[str], loss: Loss = PUBLISHED_LOSS, n_starts: int = 8
) -> tuple[CurveFit, dict[str, np.ndarray]]:
    """Fit on every run not in `holdout`, then score every run (fitted and held out): (the fit with its
    errors, run -> predicted losses). An unknown held-out run, or none left to fit, is refused."""
    names = [c.run for c in curves]
    unknown = [h for h in holdout if h not in names]
    if unknown:
        raise InputError(f"--holdout {unknown}: no such run in the table (runs: {', '.join(names)})")
    fitted = [c for c in curves if c.run not in holdout]
    if not fitted:
        raise InputError("every run is held out: nothing left to fit")
    result = fit_curves(law, fitted, loss, n_starts)
    errors, preds = [], {}
    for c in curves:
        err, pred = run_error(law, result.params, c, "holdout" if c.run in holdout else "fit")
        errors.append(err)
        preds[c.run] = pred
    return CurveFit(**{**asdict(result), "errors": errors}), preds


TABLE_SUFFIXES = (".csv", ".parquet", ".pq", ".jsonl")  # what `read_table` reads
NOT_TABLES = {  # what public curves come as besides tables (read as CSV, a pickle "has no line ending")
    ".pkl": "a pickle, not read (loading one can run any code)",
    ".pickle": "a pickle, not read (loading one can run any code)",
    ".xlsx": "a spreadsheet",
    ".json": "one JSON document (a wandb export?), not JSON lines (.jsonl)",
}


def curve_files(paths) -> list[Path]:
    """The table files of `fit --curves`: each path a table, or a folder read as its tables (CSV, Parquet, JSON
    lines) in name order, the layout of the public multi-power curves (one CSV per schedule)."""
    files = []
    for path in map(Path, paths):
        if path.is_dir():
            inside = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in TABLE_SUFFIXES)
            if not inside:
                raise InputError(f"{path}: a folder with no table in it (CSV, .parquet or .jsonl)")
            files += inside
        else:
            files.append(path)
    twice = [p for i, p in enumerate(files) if p.resolve() in {q.resolve() for q in files[:i]}]
    if twice:
        raise InputError(f"{twice[0]} is given twice (by name or in a folder): each table is read once")
    return files


def read_curve_tables(paths, run_col: str, needed: tuple[str, ...] = ()) -> tuple[pd.DataFrame, list[str]]:
    """(one curves table from every file of `curve_files(paths)` (`curve_frames`), a note per file read as one
    run)."""
    frames, notes = curve_frames(paths, run_col, needed)
    return pd.concat([table for _, table in frames], ignore_index=True), notes


def curve_frames(
    paths, run_col: str, needed: tuple[str, ...] = ()
) -> tuple[list[tuple[Path, pd.DataFrame]], list[str]]:
    """([(file, its table)] for every file of `curve_files(paths)`, a note per file read as one run). A file
    without the run column is one run named by its file's stem (a schedule's CSV of the public curves); a run
    found in two files is refused: two curves under one name would be read as one run's. A file without a
    `needed` column (step, lr, loss) is refused by its name: another CSV in a folder of curves would otherwise
    be read as one run of empty evaluations, refused later by row numbers of the merged table."""
    tables, notes, first_file = [], [], {}
    for path in curve_files(paths):
        if path.suffix.lower() in NOT_TABLES:
            raise InputError(f"cannot read {path}: {NOT_TABLES[path.suffix.lower()]}; write it as CSV (pandas: to_csv)")
        table = read_table(path)
        missing = [c for c in needed if c not in table.columns]
        if missing:
            raise InputError(
                f"{path} has no column(s) {missing} (it has {list(table.columns)}): not a curves table; name the "
                "columns with --step-col, --lr-col, --loss-col, or leave the file out"
            )
        if run_col not in table.columns:
            table = table.assign(**{run_col: path.stem})
            notes.append(f"{path}: no column {run_col!r}, read as one run named {path.stem!r}")
        for run in pd.unique(table[run_col].astype(str)):
            if first_file.setdefault(run, path) != path:
                raise InputError(f"run {run!r} is in both {first_file[run]} and {path}: name each run once")
        tables.append((path, table))
    return tables, notes


def read_trained_curves(
    paths, columns: CurveColumns, warmup_from_zero: bool, last_repeated: bool = False
) -> tuple[list[Curve], int, list[str]]:
    """(the curves of the tables at `paths` (`curve_frames`), each run's at its trained r (`read_curves`);
    how many rows of a table scored across r (an r_eval column, trainer.curve_r_eval) that leaves out; the
    notes on files read as one run each)."""
    frames, notes = curve_frames(paths, columns.run, (columns.step, columns.lr, columns.loss))
    curves, other_r = [], 0
    for path, table in frames:  # file by file: a bad row is named by its file and its row there
        try:
            curves += read_curves(table, columns, warmup_from_zero=warmup_from_zero, last_repeated=last_repeated)
        except InputError as err:
            raise (InputError(f"{path}: {err}") if len(frames) > 1 else err) from None
        other_r += len(table) - len(trained_r_rows(table))
    return curves, other_r, notes


# `fit --curves`' own options (their dests and defaults, cli/fit_curves.py): `fit` without --curves reads none of them
CURVES_ONLY = {
    **{"run_col": "run", "step_col": "step", "lr_col": "lr", "holdout": [], "fit_runs": [], "predictions": None},
    **{"warmup_drops": False, "repeated_steps": "refuse", "from_step": 0, "lr_before_first": "zero"},
}


def check_curves_options(options: Mapping) -> None:
    """InputError naming the options of `fit --curves` given to `fit` without --curves (`options`: its parsed
    arguments): ignored there, a `--from-step 1000` or `--holdout RUN` would fit every row unannounced."""
    given = [f"--{k.replace('_', '-')}" for k, default in CURVES_ONLY.items() if options.get(k, default) != default]
    if given:
        raise InputError(
            f"{', '.join(given)}: option(s) of --curves (a curve law's fit of whole loss curves), which `fit` without "
            "--curves does not read: add --curves, or leave them out"
        )


def evaluations_from(curves: list[Curve], share: float, step: int) -> list[Curve]:
    """Each run's evaluations from `share` of its own steps (--curve-start) and from `step` (--from-step, one step
    for runs of any length) on, its schedule still read from step 0; a run left with none, or a step < 0, refused."""
    if step < 0:
        raise InputError(f"--from-step {step}: a step >= 0")
    kept = [c.restricted((c.steps >= share * c.steps[-1]) & (c.steps >= step)) for c in curves]
    empty = [c.run for c in kept if not len(c.steps)]
    if empty:
        raise InputError(f"--from-step {step}: run(s) {', '.join(empty)} have no evaluation at or after it")
    return kept


def no_warmup_note(curves: list[Curve]) -> str | None:
    """A note when runs have no warmup in their lr (it starts at its peak) and are fitted from their first 1% of
    steps: the curve laws describe the loss after warmup, and such a run's first evaluations are a barely trained
    model's (the public 100M-20B curves log step 0 at loss 10.4), so the user is told how to leave them out."""
    early = [c.run for c in curves if c.warmup_end == 0 and len(c.steps) and c.steps[0] < 0.01 * c.steps[-1]]
    if not early:
        return None
    names = ", ".join(early[:5]) + (f" and {len(early) - 5} more" if len(early) > 5 else "")
    return (
        f"run(s) {names}: the lr has no warmup (it starts at its peak) and the fit starts within the first 1% of "
        "the steps; the laws describe the loss after warmup: leave the first evaluations out with --from-step STEP "
        "or --curve-start SHARE"
    )


def held_out_runs(curves: list[Curve], holdout: list[str], fit_runs: list[str]) -> list[str]:
    """The runs predicted, not fitted: --holdout's, or every run but --fit-runs' (one of the two, not both)."""
    if not fit_runs:
        return list(holdout)
    if holdout:
        raise InputError("--holdout and --fit-runs name the same split twice: give one of them")
    names = [c.run for c in curves]
    unknown = [r for r in fit_runs if r not in names]
    if unknown:
        raise InputError(f"--fit-runs {unknown}: no such run in the table (runs: {', '.join(names)})")
    return [r for r in names if r not in fit_runs]


def curve_fit_record(result: CurveFit, table, columns, warmup_drops: bool, lr_before_first: str) -> dict:
    """The fit record `fit --curves --out` writes: the fit, the table and its columns, the schedule's reading, the
    held-out summary, the code's commit."""
    return {
        **result.to_json(),
        "table": [str(t) for t in table] if isinstance(table, list | tuple) else str(table),
        "columns": vars(columns),
        "warmup_drops": bool(warmup_drops),
        "lr_before_first": lr_before_first,
        "holdout_summary": result.holdout_summary(),
        "git_commit": git_commit(),
    }


def write_predictions(path, curves: list[Curve], predictions: dict[str, np.ndarray], holdout: list[str]) -> None:
    """`fit --curves --predictions PATH`: a CSV of one row per (run, evaluation), its role, step, measured and
    predicted loss and relative error, written atomically."""
    rows = [
        {
            "run": c.run,
            "role": "holdout" if c.run in holdout else "fit",
            "step": int(s),
            "loss": float(y),
            "predicted": float(p),
            "rel_error": float(abs(p - y) / y),
        }
        for c in curves
        for s, y, p in zip(c.steps, c.loss, predictions[c.run])
    ]
    with atomic_path(path, follow_symlinks=True) as tmp:
        pd.DataFrame(rows).to_csv(tmp, index=False)


def result_lines(result: CurveFit) -> list[str]:
    """The fit as text: law and parameters, one line per run, the held-out summary."""
    n_fit = sum(e.points for e in result.errors if e.role == "fit")
    lines = [
        f"{result.law} law fitted to {len(result.fitted_runs)} run(s), {n_fit} evaluations ({result.loss} loss of "
        f"ln L, delta {result.delta:g}, L-BFGS-B); {result.starts_in_best_basin} of {result.starts_refined} "
        "refined starts in the best basin",
        f"  {result.formula}",
        "  " + "  ".join(f"{k} = {v:.6g}" for k, v in result.params.items()),
    ]
    if result.at_bounds:
        lines.append(f"  on the edge of its box (not identified by these curves): {', '.join(result.at_bounds)}")
    w = max([28, *(len(e.run) for e in result.errors)])  # a public run's name can be long (wandb's run names)
    lines.append(f"  {'run':<{w}} {'role':<8} {'points':>6} {'mean rel. err':>14} {'max rel. err':>13}")
    for e in result.errors:
        lines.append(
            f"  {e.run:<{w}} {e.role:<8} {e.points:>6} {100 * e.mean_rel_error:>13.3f}% {100 * e.max_rel_error:>12.3f}%"
        )
    summary = result.holdout_summary()
    if summary:
        lines.append(
            f"held out: mean relative error {100 * summary['mean_rel_error']:.3f}% (mean over runs), "
            f"max {100 * summary['max_rel_error']:.3f}%"
        )
    return lines
