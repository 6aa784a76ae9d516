"""What `loopscale validate` (and the notebook's section) reads: the tables given, or the fit's own; the fit's
group selected; the columns the fit mapped mapped again; the lr grid's rows (an `lr_scale` other than 1) split
off from the law's rows; every check the fit makes (one line, InputError); whether the tables are the one the fit
was made from (`table_check`: its recorded sha256)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from loopscale.errors import InputError, LoopscaleError
from loopscale.fit.laws.registry import law_class
from loopscale.fit.replicates import replicate_groups
from loopscale.fit.result import FitResult, file_sha256, recorded_tables
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
