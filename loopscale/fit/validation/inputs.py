"""What `loopscale validate` (and the notebook's section) reads: the tables given, or the fit's own; the fit's
group selected; the columns the fit mapped mapped again; the lr grid's rows (an `lr_scale` other than 1) split
off from the law's rows; every check the fit makes (one line, InputError); whether the tables are the one the fit
was made from (`table_check`: its recorded sha256); the fit record itself, checked as `fit` wrote it (`read_fit`)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from loopscale.errors import InputError, LoopscaleError
from loopscale.fit.laws.form import BASE_USER
from loopscale.fit.laws.looped_curve import rows_from_start
from loopscale.fit.laws.registry import find_law, law_class
from loopscale.fit.replicates import replicate_groups
from loopscale.fit.result import FitResult, file_sha256, read_fit_json, recorded_tables
from loopscale.fit.runs_table import ColumnMap, canonical_table, check_fit_size, read_table
from loopscale.fit.validation.lr_confound import LR_COLUMN, lr_rows


def validation_tables(fit: FitResult, given=()) -> tuple[pd.DataFrame, pd.DataFrame | None, list[Path]]:
    """(the canonical law table, the canonical lr-grid rows or None without an lr_scale column, the paths read)."""
    paths = [Path(p) for p in given]
    if not paths:
        recorded = fit.input.get("path")
        if not recorded:
            raise InputError("the fit records no table: give the runs table(s) after FIT.json")
        if not Path(recorded).is_file():
            raise InputError(f"the fit's table {recorded} is not there: give the runs table(s) after FIT.json")
        paths = [Path(recorded)]
    parts = [read_table(p) for p in paths]
    raw = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    group = fit.group or {}
    if group.get("column"):
        if group["column"] not in raw.columns:
            raise InputError(f"the fit is of group {group['column']}={group['value']!r}, a column the table lacks")
        raw = raw[raw[group["column"]].astype(str) == str(group["value"])].reset_index(drop=True)
    used = fit.input.get("columns") or {}
    columns = ColumnMap(**{k: v for k, v in used.items() if k in ColumnMap.__dataclass_fields__ and v in raw.columns})
    raw = law_class(fit.law).rows_to_fit(raw)  # as canonical_table keeps them: the lr mask below is over these
    lr = lr_rows(raw)
    try:
        every = canonical_table(raw, fit.law, columns)  # every row checked alike; the lr rows split off after
        keep = rows_from_start(every, fit.settings.get("curve_start") or 0.0)  # as `fit --curve-start` kept them
        every, lr = every.loc[keep].reset_index(drop=True), lr[keep]
        table = every[~lr].reset_index(drop=True)
        check_fit_size(table, fit.law)
        lr_table = every[lr].reset_index(drop=True) if lr.any() else None
    except LoopscaleError as err:
        raise InputError(f"{err} ({', '.join(str(p) for p in paths)})") from None
    if LR_COLUMN in raw.columns and lr_table is None:
        lr_table = table.iloc[:0]
    return table, lr_table, paths


def table_check(fit: FitResult, paths) -> dict:
    """Whether the tables to validate on are the one the fit was made from, by content (the sha256 the fit
    records; a table moved or renamed since still matches): {"recorded": [{path, sha256}], "given": [{path,
    sha256}], "changed": True / False, or None when the fit records no hash (then nothing can be said)}. One of
    the given tables must be the fit's: others beside it (an lr grid's runs) add rows; a table edited since the
    fit (a loss, a row) is another table."""
    recorded = [{"path": t.get("path"), "sha256": t["sha256"]} for t in recorded_tables(fit)]
    given = [{"path": str(p), "sha256": file_sha256(p)} for p in paths]
    ours = {g["sha256"] for g in given}
    changed = None if not recorded else not any(t["sha256"] in ours for t in recorded)
    return {"recorded": recorded, "given": given, "changed": changed}


def changed_table_line(check: dict) -> str:
    """What a changed table is, in one line: the fit's table and hash, the given ones and theirs."""
    theirs = ", ".join(f"{t['path']} (sha256 {t['sha256'][:12]})" for t in check["recorded"])
    ours = ", ".join(f"{g['path']} (sha256 {g['sha256'][:12]})" for g in check["given"])
    return f"the fit was made from {theirs}, not from {ours}: its rows changed since the fit"


def point_means(table: pd.DataFrame) -> tuple[pd.DataFrame, dict | None]:
    """(one row per point, each point's seed repeats and copies averaged in log L; {"n_rows", "n_points"} or None
    when every point has one run). The folds, the rival forms and their AICc then count points, not copies: three
    near-identical seeds of a point are one observation of the law, not three (AICc -11.4 read -40.5 when they
    were counted as rows)."""
    reps = replicate_groups(table)
    n_points = len(np.unique(reps.point))
    if n_points == len(table):
        return table, None
    log_L = pd.Series(np.log(table["L"].to_numpy(dtype=float)))
    first = ~pd.Series(reps.point).duplicated().to_numpy()
    points = table[first].copy()
    points["L"] = np.exp(log_L.groupby(reps.point).transform("mean").to_numpy()[first])
    return points.reset_index(drop=True), {"n_rows": len(table), "n_points": n_points}


def read_fit(path) -> FitResult:
    """The single-table fit record at `path`, every block validate reads checked as `fit` writes it (one line,
    InputError: not a fit record, a law this loopscale does not know, a joint fit, a damaged block)."""
    raw = read_fit_json(path)
    if not isinstance(raw, dict) or not isinstance(raw.get("params"), dict) or not isinstance(raw.get("law"), str):
        raise InputError(f"{path} is not a loopscale fit record (needs 'law' and 'params')")
    cls = find_law(raw["law"])
    if cls is None:
        raise InputError(f"{path}: law {raw['law']!r} is not a law this loopscale knows")
    if cls.per_recipe:
        raise InputError(f"{path} is a joint fit over recipes: validate each recipe's fit (loopscale fit --group COL)")
    try:
        fit = FitResult.from_dict(raw)  # a block that is no object is refused here (record_blocks)
    except (TypeError, InputError) as err:
        raise InputError(f"{path} is not a loopscale fit record: {err}") from None
    if not isinstance(fit.input, dict):
        raise InputError(f"{path} is not a loopscale fit record (settings and input must be objects)")
    problem = _malformed(fit, cls)
    if problem is not None:
        raise InputError(f"{path}: {problem} (a hand-edited or damaged fit record: refit it)")
    return fit


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _interval_problem(name: str, interval) -> str | None:
    if interval is None:
        return None
    if not (isinstance(interval, (list, tuple)) and len(interval) == 2):
        return f"{name} must be [low, high]; got {interval!r}"
    if None in interval:  # an open side (a profile that never crossed its threshold)
        return None
    if not all(_number(x) for x in interval):
        return f"{name} must hold numbers; got {interval!r}"
    return f"{name} {list(interval)} is reversed (low > high)" if interval[0] > interval[1] else None


def _malformed(fit, cls) -> str | None:
    """What in a fit record validate reads cannot be what `fit` wrote, or None: every parameter the law has (phi
    too) a finite number, the seed a whole number, the group and profile objects, every interval [low, high]."""
    needed = [*BASE_USER, *([cls.profile_param] if cls.profile_param else [])]
    missing = [k for k in needed if k not in fit.params]
    if missing:
        return f"params lacks {', '.join(missing)}"
    for name, value in fit.params.items():
        if not _number(value):
            return f"params: {name}={value!r} is not a finite number"
    if fit.seed is not None and not (isinstance(fit.seed, int) and not isinstance(fit.seed, bool)):
        return f"seed must be a whole number; got {fit.seed!r}"
    if fit.group and not isinstance(fit.group.get("column", ""), str):
        return f"group must be an object with a column name; got {fit.group.to_json()!r}"
    found = _interval_problem("profile_phi interval", (fit.profile_phi or {}).get("interval"))
    if not isinstance(fit.ci95, dict):
        return f"ci95 must be an object; got {fit.ci95!r}"
    for name, interval in fit.ci95.items():
        found = found or _interval_problem(f"ci95 {name}", interval)
    return found
