"""Fitting the test-time recurrence law (`loopscale.fit.laws.testtime`) to a test-time table: one row per
(model, r_eval) with the loss of that trained model scored at r_eval passes (docs/design.md, "Test-time depth").

Any such table: loopscale's own (`loopscale collect` writes `testtime.csv`) or published rows of another looped
model, e.g. (model, r_train, r_eval, bpb) with r_train a number for a model trained at one fixed r and a word
("sampled", "random", ...) for one trained with sampled r. `testtime_table` maps the columns; `fit_testtime`
fits the law per model and, over two models or more, jointly (one rate, in units of each model's r_scale), each
fit with

- the project's multi-start (`optimize.multistart`: batched LM, then L-BFGS-B at tight tolerances) from starts
  projected on a grid of the rate (for a fixed rate the law is linear in L_inf, A, delta);
- a noise scale from its own residuals, sigma = sqrt(SSR / (n - p)) x t_{n-p, 0.975} / z_0.975 (the Student
  factor widens the profile interval to a t-interval when few rows are left over, as they are here), the fit
  redone on residuals standardised by it (Huber at `noise.STANDARDISED_DELTA`, as a fit with a seed sigma is);
- profile intervals of every free parameter (`uncertainty.profile_param`, the robust LR interval);
- the conditioning checks and verdict (`verdict.verdict_of`): no residual degrees of freedom, a held parameter,
  the rate on its bound, an open interval block the measurement; a held-out largest r_eval predicted beyond the
  noise is a warning.

`compare_shapes` scores both saturating shapes (exp, power) by leave-one-row-out error per model: the record
says which predicts held-out rows better; `loopscale.fit.testtime_phi` turns a fitted curve into unique parameters.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from scipy.stats import norm
from scipy.stats import t as student_t

from loopscale.errors import InputError
from loopscale.fit.laws.testtime import SHAPES, TestTime, is_sampled, s_and_ds
from loopscale.fit.noise import STANDARDISED_DELTA
from loopscale.fit.objective import Loss, batch_objective
from loopscale.fit.optimize import FitState, multistart, same_basin
from loopscale.fit.resample import on_one_blas_thread
from loopscale.fit.testtime_checks import checks_record
from loopscale.fit.testtime_record import HeldOut, ModelSummary, ShapeComparison, TestTimeFit, TestTimeRecord
from loopscale.fit.uncertainty import profile_param

# Loss columns tried in order when none is named (nats, bits per byte, perplexity: any positive loss).
LOSS_CANDIDATES = ("L", "loss", "val_loss", "bpb", "val_bpb", "bits_per_byte", "perplexity", "ppl", "val_ppl")
DEFAULT_SHAPE = "exp"
PROFILE_POINTS = 11  # per profile: the interval's ends are root-found between them, so few points suffice
N_REFINE = 6  # starts refined per fit: a few parameters a model, one rate grid
PASSTHROUGH = (
    "N_once",
    "N_rec",
    "N_pass",
    "N",
    "D",
    "C",
    "recipe",
    "width",
    "run_dir",
    "seed",
    "r_sampling",
    "flops_per_token_eval",
)


@dataclass(frozen=True)
class TestTimeColumns:
    """Names in the input table: the model label, the r it was scored at, the r it was trained at (a number, or a
    word for sampled r; default: the `r` column of a loopscale table), the loss (None: the first of
    LOSS_CANDIDATES present), and an optional column naming the r-sampling scheme (loopscale's `r_sampling`)."""

    __test__ = False  # pytest: not a test class

    model: str = "model"
    r_eval: str = "r_eval"
    r_train: str = "r_train"
    L: str | None = None
    sampled: str = "r_sampling"


def _number(value) -> float:
    """A cell as a number: 8, "8", ">= 8", "~8" and "≥8" read as 8 (published tables write r >= 8); NaN if none."""
    if isinstance(value, (int, float, np.integer, np.floating)):
        return float(value)
    match = re.search(r"[-+]?\d*\.?\d+(?:[eE][-+]?\d+)?", str(value))
    return float(match.group()) if match else float("nan")


def loss_column(raw: pd.DataFrame, name: str | None) -> str:
    if name is not None:
        if name not in raw.columns:
            raise InputError(f"loss column {name!r} is not in the table {list(raw.columns)}")
        return name
    found = next((c for c in LOSS_CANDIDATES if c in raw.columns), None)
    if found is None:
        raise InputError(f"no loss column: name one with --loss-col (tried {', '.join(LOSS_CANDIDATES)})")
    return found


def testtime_table(raw: pd.DataFrame, columns: TestTimeColumns | None = None) -> pd.DataFrame:
    """The canonical test-time table: model (str), r_eval, r_train (NaN for a sampled-r model without a number),
    fixed (trained at one fixed r), r_scale (r_train; a sampled model's mean r, else 1), L, and N_once, N_rec,
    N, D, C, recipe, ... where present. One-line InputError naming the column and rows otherwise."""
    c = columns or TestTimeColumns()
    if c.r_eval not in raw.columns:
        raise InputError(f"no r_eval column {c.r_eval!r} (--r-eval-col): the table has {list(raw.columns)}")
    r_train_col = c.r_train if c.r_train in raw.columns else ("r" if "r" in raw.columns else None)
    if r_train_col is None:
        raise InputError(
            f"no r_train column {c.r_train!r} (--r-train-col): give each model's training r, a number for a fixed "
            "r or a word such as 'sampled' for sampled r"
        )
    L_col = loss_column(raw, c.L)
    out = pd.DataFrame(index=raw.index)
    if c.model in raw.columns:
        out["model"] = raw[c.model].astype(str)
    else:  # no model column: one model per training r
        out["model"] = "r_train=" + raw[r_train_col].astype(str)
    out["r_eval"] = [_number(v) for v in raw[c.r_eval]]
    cells = raw[r_train_col]
    scheme = raw[c.sampled] if c.sampled in raw.columns else pd.Series([None] * len(raw), index=raw.index)
    sampled = np.array([is_sampled(a) or is_sampled(b) for a, b in zip(cells, scheme)])
    numbers = np.array([_number(v) if not is_sampled(v) else np.nan for v in cells])
    out["r_train"] = numbers
    out["fixed"] = ~sampled
    out["r_scale"] = np.where(sampled, np.where(np.isfinite(numbers) & (numbers > 0), numbers, 1.0), numbers)
    out["L"] = pd.to_numeric(raw[L_col], errors="coerce").to_numpy(float)
    for name in PASSTHROUGH:
        if name in raw.columns and name not in out.columns:
            out[name] = raw[name]
    _check_testtime(out, c, L_col, r_train_col)
    out.attrs["columns_used"] = {
        "model": c.model if c.model in raw.columns else None,
        "r_eval": c.r_eval,
        "r_train": r_train_col,
        "L": L_col,
    }
    return out.reset_index(drop=True)


def _check_testtime(out: pd.DataFrame, c: TestTimeColumns, L_col: str, r_train_col: str) -> None:
    def rows(mask):
        return [int(i) for i in np.flatnonzero(np.asarray(mask))[:5]]

    bad = ~np.isfinite(out["r_eval"]) | (out["r_eval"] <= 0)
    if bad.any():
        raise InputError(f"column {c.r_eval!r} needs r_eval > 0 (a number) in every row; rows {rows(bad)}")
    bad = ~np.isfinite(out["L"]) | (out["L"] <= 0)
    if bad.any():
        raise InputError(f"loss column {L_col!r} needs a positive number in every row; rows {rows(bad)}")
    bad = out["fixed"] & ~(np.isfinite(out["r_train"]) & (out["r_train"] > 0))
    if bad.any():
        raise InputError(
            f"column {r_train_col!r} needs r_train > 0 for a fixed-r model, or a word such as 'sampled'; "
            f"rows {rows(bad)}"
        )
    for model, part in out.groupby("model"):
        if part["fixed"].nunique() > 1 or part["r_scale"].nunique() > 1:
            raise InputError(f"model {model!r} has more than one r_train ({r_train_col!r}): one trained model a label")


# ----------------------------------------------------------------------------------------------
# One fit
# ----------------------------------------------------------------------------------------------
def projected_starts(law: TestTime, data, loss: Loss, n_keep: int) -> np.ndarray:
    """Starts from the rate grid (`TestTime.start_grid`): for a fixed rate L_hat is linear in each model's
    (L_inf, A, delta), solved by least squares on relative errors (weights 1 / L^2, close to the log residual),
    clipped into the box; the `n_keep` with the lowest objective."""
    lo, hi = np.array(law.bounds()).T
    col_l, col_a, col_d, x_eff, d = law._columns(data)
    thetas = []
    for rate in law.start_grid():
        s, _ = s_and_ds(law.shape, np.array([[rate]]), x_eff[None, :])
        theta = np.clip((lo + hi) / 2, lo, hi)
        theta[0] = rate
        for g in np.unique(col_l):
            rows = col_l == g
            cols = [g, g + 1] + ([int(col_d[rows][0])] if col_d[rows][0] >= 0 else [])
            X = np.column_stack([np.ones(rows.sum()), s[0, rows], d[rows]][: len(cols)])
            free = np.array([lo[k] < hi[k] for k in cols])
            target = data.L[rows] - X[:, ~free] @ lo[np.array(cols)[~free]]
            w = 1.0 / data.L[rows]
            coef = np.linalg.lstsq(X[:, free] * w[:, None], target * w, rcond=None)[0] if free.any() else []
            theta[np.array(cols)[free]] = coef
        thetas.append(np.clip(theta, lo, hi))
    thetas = np.array(thetas)
    f = batch_objective(thetas, law, data, loss)
    return thetas[np.argsort(f, kind="stable")[:n_keep]]


def _free(law: TestTime) -> np.ndarray:
    lo, hi = np.array(law.bounds()).T
    return lo < hi


def _solve(law: TestTime, data, loss: Loss, n_refine: int, extra_starts=()):
    starts = projected_starts(law, data, loss, n_refine)
    if len(extra_starts):
        starts = np.vstack([np.asarray(extra_starts), starts])
    best, refined = multistart(law, data, loss, starts)
    return FitState(law, data, loss, best, starts, refined)


def noise_scale(law: TestTime, state: FitState) -> tuple[float | None, int]:
    """(sigma of log L from the fit's residuals, widened to a t-interval, residual degrees of freedom); sigma is
    None without degrees of freedom: the rows fix the free parameters exactly."""
    res = law.log_predict(state.best.theta, state.data) - state.data.log_L
    dof = len(res) - int(_free(law).sum())
    if dof < 1:
        return None, dof
    sigma = float(np.sqrt(np.sum(res**2) / dof))
    sigma = max(sigma, 1e-9) * float(student_t.ppf(0.975, dof) / norm.ppf(0.975))
    return sigma, dof


def fit_one(
    table: pd.DataFrame,
    shape: str = DEFAULT_SHAPE,
    loss: Loss | None = None,
    n_refine: int = N_REFINE,
    intervals: bool = True,
) -> TestTimeFit:
    """The law fitted to the rows of `table` (one model: a per-model fit; several: the joint fit, one rate):
    parameters, what is held, profile intervals, residuals, the noise scale and the conditioning record."""
    loss = loss or Loss()
    law = TestTime.bind_table(table, shape)
    data = law.data_from_table(table)
    state = _solve(law, data, loss, n_refine)
    sigma, dof = noise_scale(law, state)
    if sigma is not None and intervals:  # the fit redone on standardised residuals (the scale a profile interval reads)
        std_loss = Loss(loss.kind, STANDARDISED_DELTA) if loss.kind == "huber" else loss
        data = replace(data, sigma=np.full(len(data), sigma))
        state = _solve(law, data, std_loss, n_refine, [state.best.theta])
    theta = state.best.theta
    pred = np.exp(law.log_predict(theta, data))
    fit = TestTimeFit(
        shape=shape,
        models=list(law.groups),
        params=law.to_user(theta),
        held={n: float(v) for n, v in law.held},
        n_rows=len(data),
        n_free=int(_free(law).sum()),
        dof=int(dof),
        sigma_log=sigma,
        objective=float(state.best.objective),
        n_best_basin=int(sum(same_basin(r, state.best, law, len(data)) for r in state.refined)),
        n_refined=len(state.refined),
        residual_rms_log=float(np.sqrt(np.mean((np.log(pred) - data.log_L) ** 2))),
        predicted=pred.tolist(),
        intervals=_intervals(state) if intervals and sigma is not None else {},
        holdout=_holdout_largest(table, shape, loss, n_refine) if intervals else None,
    )
    return fit.replace(conditioning=checks_record(law, fit, theta))


def _intervals(state: FitState) -> dict[str, list]:
    """95% profile intervals in user units of the free rate, floors L_inf and drifts delta (None: open on that
    side); the amplitudes A are not profiled (no statement reads them)."""
    law = state.law
    lo, hi = np.array(law.bounds()).T
    out = {}
    for k, name in enumerate(law.internal_names):
        if not lo[k] < hi[k] or name.startswith("A["):
            continue
        half = 3.0 if k == 0 else max(0.5 * (hi[k] - lo[k]) / 10.0, 1e-3)
        prof = profile_param(state, name, half_width=half, n_points=PROFILE_POINTS)
        ends = list(prof["interval"])
        if k == 0 and law.shape == "exp":
            ends = [None if e is None else float(np.exp(e)) for e in ends]
        key = law.user_names[k]
        out[key] = [None if e is None else float(e) for e in ends]
    return out


def _holdout_largest(table: pd.DataFrame, shape: str, loss: Loss, n_refine: int) -> HeldOut | None:
    """Each model's largest r_eval left out, the law refitted on the rest (no intervals) and the left-out rows
    predicted: their mean |rel err|; None when no model keeps enough rows (the refit would hold more)."""
    largest = table.groupby("model")["r_eval"].transform("max")
    keep = table["r_eval"] < largest
    if keep.sum() == 0 or (~keep).sum() == 0:
        return None
    reduced = TestTime.bind_table(table[keep], shape)
    if set(reduced.held) - set(TestTime.bind_table(table, shape).held) or not (keep.sum() > _free(reduced).sum()):
        return None  # leaving the rows out would hold a parameter or leave no residual: not a fair test
    fit = fit_one(table[keep].reset_index(drop=True), shape, loss, n_refine, intervals=False)
    left = table[~keep].reset_index(drop=True)
    left = left[left["model"].isin(fit["models"])].reset_index(drop=True)
    pred = TestTime.predict_table(fit["params"], left)
    rel = np.abs(pred / left["L"].to_numpy(float) - 1)
    return {"n_rows": len(left), "mean_abs_rel_error": float(rel.mean()), "r_eval": left["r_eval"].tolist()}


# ----------------------------------------------------------------------------------------------
# Per model and joint; the two shapes on held-out rows
# ----------------------------------------------------------------------------------------------
@on_one_blas_thread
def fit_testtime(
    table: pd.DataFrame,
    shape: str = DEFAULT_SHAPE,
    loss: Loss | None = None,
    n_refine: int = N_REFINE,
    compare: bool = True,
) -> TestTimeRecord:
    """The test-time record of a canonical table: the law per model, jointly over the models (two or more:
    one rate in units of each model's r_scale), both shapes' leave-one-out errors (`compare_shapes`), and each
    model's curve and gain of one more pass (`model_summary`)."""
    if shape not in SHAPES:
        raise InputError(f"test-time shape must be one of {', '.join(SHAPES)}; got {shape!r}")
    loss = loss or Loss()
    models = sorted(table["model"].unique(), key=str)
    per_model = {}
    with np.errstate(all="ignore"):
        for m in models:
            part = table[table["model"] == m].reset_index(drop=True)
            per_model[str(m)] = fit_one(part, shape, loss, n_refine)
        joint = fit_one(table, shape, loss, n_refine) if len(models) > 1 else None
        shapes = compare_shapes(table, loss, n_refine) if compare else None
    summary = {str(m): model_summary(table[table["model"] == m], per_model[str(m)]) for m in models}
    loss_json = {"kind": loss.kind, "delta": loss.delta}
    return TestTimeRecord(TestTime.name, TestTime.formula, shape, per_model, joint, shapes, summary, loss_json)


def compare_shapes(table: pd.DataFrame, loss: Loss | None = None, n_refine: int = N_REFINE) -> ShapeComparison:
    """Leave-one-row-out per model for each shape: a row above the model's smallest r_eval is left out when the rest
    keeps every parameter the full model's fit frees and rows enough to fix them; its |rel err| from the refit
    (a row at the smallest r_eval is not: the rest would extrapolate backwards, to fewer passes, which is not what
    the law is used for, and both shapes fail there alike). Mean per shape over the same rows, and the
    better one (None when no row can be left out)."""
    loss = loss or Loss()
    errors = {s: [] for s in SHAPES}
    rows_used = []
    for m in sorted(table["model"].unique(), key=str):
        part = table[table["model"] == m].reset_index(drop=True)
        smallest = part["r_eval"].min()
        for i in range(len(part)):
            if part["r_eval"][i] == smallest:  # the law predicts more passes, not fewer: no backward extrapolation
                continue
            rest = part.drop(index=i).reset_index(drop=True)
            ok = True
            for s in SHAPES:
                full, red = TestTime.bind_table(part, s), TestTime.bind_table(rest, s)
                ok &= not (set(red.held) - set(full.held)) and len(rest) >= _free(red).sum()
            if not ok:
                continue
            rows_used.append((str(m), float(part["r_eval"][i])))
            for s in SHAPES:
                fit = fit_one(rest, s, loss, n_refine, intervals=False)
                pred = TestTime.predict_table(fit["params"], part.iloc[[i]].reset_index(drop=True))[0]
                errors[s].append(abs(pred / part["L"][i] - 1))
    mean = {s: (float(np.mean(e)) if e else None) for s, e in errors.items()}
    better = None if not rows_used else min(SHAPES, key=lambda s: mean[s])
    return {
        "method": "leave one row out per model (rows above its smallest r_eval)",
        "rows": rows_used,
        "mean_abs_rel_error": mean,
        "better": better,
        "abs_rel_error": {s: [float(x) for x in e] for s, e in errors.items()},
    }


def model_summary(rows: pd.DataFrame, fit: TestTimeFit) -> ModelSummary:
    """A model's trained r (or sampled), its fitted curve at every integer r from 1 to its largest r_eval (or
    r_scale) and the gain of one more pass there (L(r) - L(r + 1), in the loss's units)."""
    r_max = int(np.ceil(max(rows["r_eval"].max(), rows["r_scale"].iloc[0])))
    grid = pd.DataFrame({"r_eval": np.arange(1, r_max + 2, dtype=float)})
    first = rows.iloc[0]
    grid = grid.assign(model=str(first["model"]), r_scale=first["r_scale"], fixed=bool(first["fixed"]))
    curve = TestTime.predict_table(fit["params"], grid)
    # where one more pass is quoted: r_train, a sampled model's mean r, else its largest r_eval
    at = float(first["r_scale"]) if np.isfinite(first["r_train"]) else float(rows["r_eval"].max())
    return {
        "trained": "sampled r" if not first["fixed"] else f"fixed r = {first['r_train']:g}",
        "r_scale": float(first["r_scale"]),
        "quoted_r": at,
        "curve_r": grid["r_eval"].tolist()[:-1],
        "curve_L": curve[:-1].tolist(),
        "gain_next_pass": (curve[:-1] - curve[1:]).tolist(),
    }


def curve(params: dict[str, float], model: str, r_scale: float, fixed: bool, r_eval) -> np.ndarray:
    """L_hat at each r_eval for one model of a fit (its user parameters)."""
    r_eval = np.asarray(r_eval, dtype=float)
    grid = pd.DataFrame({"r_eval": r_eval, "model": model, "r_scale": r_scale, "fixed": fixed})
    return TestTime.predict_table(params, grid)
