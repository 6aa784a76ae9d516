"""What `loopscale validate` (and the notebook's section) reads: the tables given, or the fit's own; the fit's
group selected; the columns the fit mapped mapped again; the lr grid's rows (an `lr_scale` other than 1) split
off from the law's rows; every check the fit makes (one line, InputError)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from loopscale.errors import InputError, LoopscaleError
from loopscale.fit.result import FitResult
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
