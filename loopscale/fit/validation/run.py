"""`validate`: every form (`forms.py`) fitted on every fold (`folds.py`) of one table, each refit predicting
its held-out rows, over worker processes with a progress bar; then Approach 2 (`approach2.py`), the lr grid
(`lr_confound.py`), the counting conventions (`conventions.py`) and the verdict (`verdict.py`).

Each form is first fitted to the whole table by the multi-start fitter (`optimize.fit_law`, no profile or
bootstrap); then each (form, fold) is one task: the form's law is rebuilt for the fold's training rows
(`Law.rival_law`: a per-r form gets the r it sees), refitted from the whole table's best optima (the fast path,
as the bootstrap's replicates are) and asked for its held-out rows. A task that cannot be done (the form
refuses the fold's rows, or has no prediction at an r it was not fitted at) says why. Results are the same
whatever `jobs` (every task is deterministic wherever it runs). A curve fit weighed by position (`fit --curve-sigma
position`) is refitted in its two stages everywhere, each fold's weights chosen from its own training rows
(`position_sigma.refit_fold_by_position`).
"""

from __future__ import annotations

import time
from typing import Any, TextIO

import numpy as np

from loopscale.errors import InputError
from loopscale.fit.bounds import clip_to_bounds
from loopscale.fit.laws.registry import law_class
from loopscale.fit.objective import Loss
from loopscale.fit.optimize import fit_law, multistart
from loopscale.fit.position_sigma import position_share, refit_by_position, refit_fold_by_position, stage1_loss_of
from loopscale.fit.record_blocks import ABSENT
from loopscale.fit.result import FitResult, versions
from loopscale.fit.task_pool import run_tasks
from loopscale.fit.uncertainty import profile_param
from loopscale.fit.validation.approach2 import iso_flop_exponent
from loopscale.fit.validation.conventions import Fill, convention_table
from loopscale.fit.validation.flags import verdict
from loopscale.fit.validation.folds import Fold, R, folds_for
from loopscale.fit.validation.forms import Form, forms_for
from loopscale.fit.validation.lr_confound import lr_section
from loopscale.fit.validation.once import once_section
from loopscale.fit.validation.record import FoldResult, ValidationRecord
from loopscale.fit.validation.scores import free_params, held_out_errors, information


def validate(
    table,
    fit: FitResult,
    jobs: int = 1,
    progress: TextIO | None = None,
    n_refine: int = 16,
    pin_E: float | None = None,
    lr_table=None,
    conventions: bool = True,
    fill: Fill | None = None,
) -> ValidationRecord:
    """The validation record of `fit` (a FitResult of a single-table law) on its canonical `table` (the rows
    of the law, lr-grid rows removed: they go in `lr_table`). pin_E: the pinned-E form's E (default the fit's);
    fill: constant columns the counting conventions read where the table lacks them. InputError when the fit
    is a joint fit or the table cannot be fitted at all."""
    started = time.perf_counter()
    cls = law_class(fit.law)
    if cls.per_recipe:
        raise InputError(
            f"{fit.law} is a joint fit over recipes: validate each recipe's own fit (loopscale fit --group recipe)"
        )
    loss = Loss(fit.settings.get("loss", "huber"), fit.settings.get("delta") or 1e-3)
    by_position = fit.settings.get("curve_sigma", "off") == "position"
    if by_position:  # every refit runs both stages (`position_sigma`): stage 1 at the fit's first loss
        loss = stage1_loss_of((fit.noise or {}).get("position_sigma"))
    seed = int(fit.seed or 0)
    data = cls.data_from_table(table)
    reference = {**fit.params, **({} if pin_E is None else {"E": float(pin_E)})}
    forms = forms_for(table, data, fit.law, reference, loss, by_position)
    n_params = forms[0].law.n_params
    folds = folds_for(table, n_params, cls.dense, cls.reads_curves, fit.settings.get("curve_start") or 0.0)
    conventions = conventions and not cls.reads_curves  # they recount a runs table's sizes and FLOPs per run
    problem = (table, data, forms, folds, reference, seed, n_refine)
    fitted = [i for i, form in enumerate(forms) if form.law is not None]
    fulls = run_tasks(solve_full, problem, fitted, jobs, progress, "validate: whole table", "fit")
    full = fulls[0]
    if not full["ok"]:
        raise InputError(f"cannot validate: the fit's law cannot be fitted to the whole table: {full['reason']}")
    tasks = [(r["form"], j, r["starts"]) for r in fulls if r["ok"] for j, f in enumerate(folds) if j and not f.reason]
    starts = full["starts"]  # the fit's law's best optima: where the conventions and the lr refits start
    fulls = [r.replace(starts=ABSENT) for r in fulls]
    results = fulls + run_tasks(solve_fold, problem, tasks, jobs, progress, "validate: folds", "fit")
    results.sort(key=lambda r: (r["form"], r["fold"]))
    interval = _phi_interval(fit, table, forms[0], seed, n_refine)
    record = ValidationRecord(
        fit={"law": fit.law, "params": fit.params, "path": fit.input.get("path"), **interval},
        n_rows=len(table),
        forms=[_form_entry(form) for form in forms],
        folds=[{"kind": f.kind, "label": f.label, "n_test": int(f.test.sum()), "reason": f.reason} for f in folds],
        results=results,
        approach2=None if cls.reads_curves else iso_flop_exponent(table, full["params"]),
        lr_confound=None if lr_table is None else lr_section(lr_table, table, forms[0], full["params"], starts),
        once=None if cls.reads_curves else once_section(table),
        conventions=convention_table(table, forms[0], full["params"], interval, starts, fill) if conventions else None,
    )
    elapsed_s = time.perf_counter() - started
    return record.replace(verdict=verdict(record), jobs=jobs, elapsed_s=elapsed_s, versions=versions())


def _form_entry(form: Form) -> dict[str, Any]:
    return {
        "label": form.label,
        "law": None if form.law is None else form.law.name,
        "loss": form.loss.kind,
        "reference": form.reference,
        "k": None if form.law is None else free_params(form.law),
        "reason": form.reason,
    }


def _phi_interval(fit: FitResult, table, form: Form, seed: int, n_refine: int) -> dict[str, Any]:
    """The 95% interval of phi the shifts are measured against: the fit record's profile interval, else its
    bootstrap interval, else a profile of a refit here; none for a law without a profiled phi."""
    profile = (fit.profile_phi or {}).get("interval")
    if profile and None not in profile:
        return {"phi_interval": list(profile), "interval_source": "the fit's phi profile"}
    if "phi" in fit.ci95:
        return {"phi_interval": list(fit.ci95["phi"]), "interval_source": "the fit's bootstrap"}
    if form.law.profile_param is None:
        return {"phi_interval": None, "interval_source": None}
    _, state = fit_law(form.law.data_from_table(table), form.law, form.loss, seed, n_refine)
    refit = refit_by_position(table, state, seed, n_refine) if form.by_position else None
    out = profile_param(state if refit is None else refit[1], form.law.profile_param)
    return {"phi_interval": list(out["interval"]), "interval_source": "a phi profile of the refit"}


WARM_STARTS = 3  # a fold's refit starts: the whole table's optimum and its next best refined starts


def solve_full(problem: tuple, i: int) -> FoldResult:
    """Form i fitted to the whole table by the multi-start fitter: the AICc row, and the starts its folds use."""
    table, data, forms, _folds, _reference, seed, n_refine = problem
    form: Form = forms[i]
    try:
        type(form.law).check_table(table)
        with np.errstate(all="ignore"):
            result, state = fit_law(data, form.law, form.loss, seed, n_refine)
            # the folds start both stages from stage 1's optima: the whole table's stage 2 was weighed by all rows
            ranked = sorted(state.refined, key=lambda x: x.objective)
            refit = refit_by_position(table, state, seed, n_refine) if form.by_position else None
    except InputError as err:
        return FoldResult(i, 0, False, str(err))
    starts = [state.best.theta] + [x.theta for x in ranked if not np.array_equal(x.theta, state.best.theta)]
    position = ABSENT
    if refit is not None:
        result, state, entry = refit
        position = entry["model"]
    res = state.law.log_predict(state.best.theta, state.data) - data.log_L
    rms, info = float(np.sqrt(np.mean(res**2))), information(res, free_params(state.law))
    starts = np.array(starts[:WARM_STARTS]).tolist()
    out = FoldResult(i, 0, True, None, result.params, result.objective, len(data), rms, info, starts=starts)
    return out.replace(position_sigma=position)


def solve_fold(problem: tuple, task: tuple) -> FoldResult:
    """Form i refitted on fold j's training rows from the whole table's optima (the fast path: `multistart`
    from WARM_STARTS starts, no screening), scored on the held-out rows. A per-r form rebound to the r it sees
    starts from the coordinates it keeps."""
    table, data, forms, folds, reference, _seed, _n_refine = problem
    i, j, starts = task
    form: Form = forms[i]
    fold: Fold = folds[j]
    out = FoldResult(i, j, False, None)
    cls = type(form.law)
    train, test = data.subset(fold.train), data.subset(fold.test)
    try:
        cls.check_table(table[fold.train].reset_index(drop=True))
        law = cls.rival_law(train, reference)
    except InputError as err:
        return out.replace(reason=str(err))
    if fold.kind == R and cls.per_r_multipliers:  # bound to the training r: no multiplier at the held-out r
        try:
            mid = law.to_user(np.mean(law.bounds(), axis=1))
            for value in np.unique(test.r):
                law.multiplier(mid, float(value))
        except InputError:
            return out.replace(reason=f"the form has no multiplier at {fold.label}, which it was not fitted at")
    keep = [form.law.internal_names.index(n) for n in law.internal_names]
    warm = clip_to_bounds(np.array(starts)[:, keep], law)
    position = ABSENT
    with np.errstate(all="ignore"):
        if form.by_position:  # the sigma by position re-estimated from the training rows alone (`refit_fold_...`)
            share = position_share(table)[fold.train]
            best, model = refit_fold_by_position(law, train, form.loss, warm, table[fold.train], share)
            position = None if model is None else model.to_json()
        else:
            best, _ = multistart(law, train, form.loss, warm)
    train_res = law.log_predict(best.theta, train) - train.log_L
    predicted = np.exp(law.log_predict(best.theta, test))
    return out.replace(
        ok=True,
        params=law.to_user(best.theta),
        objective=best.objective,
        n_train=len(train),
        train_rms_log=float(np.sqrt(np.mean(train_res**2))),
        held_out=held_out_errors(predicted, test.L),
        rows=np.flatnonzero(fold.test).tolist(),
        predicted=predicted.tolist(),
        observed=test.L.tolist(),
        position_sigma=position,
    )
