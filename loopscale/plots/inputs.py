"""What a figure reads: the runs table (looped-law columns checked and filled in), the rows a fit covers,
and the numbers the fit record gives per row (L_hat, log residuals, compute budget, phi, k_r).

Nothing here draws or fits: the fitted law is `Law.predict_table` at the stored parameters.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from loopscale.errors import InputError
from loopscale.fit.laws.form import compute_from_tokens, cost_params, tokens_from_compute
from loopscale.fit.laws.registry import law_class
from loopscale.fit.result import FitResult, load_fit
from loopscale.fit.runs_table import ColumnMap, canonical_table
from loopscale.fit.runs_table import read_table as read_any_table

# Columns a looped-law figure reads; `read_table` checks for them.
REQUIRED_COLUMNS = ("N_once", "N_rec", "r", "D", "L")
LAW_INPUTS = ("N_once", "N_rec", "N", "r", "D", "C")


def read_table(path, columns: ColumnMap | None = None, law: str | None = None) -> pd.DataFrame:
    """A runs table from CSV, Parquet or JSON lines, with the looped-law columns present and numeric.

    A plain Chinchilla table (N, D or C, L, no r) is accepted too: it is a looped table with r = 1,
    N_once = N and N_rec = 0, for which every N_eff equals N. Given a column mapping (`fit`'s --n-col,
    --c-col, --loss-col, ...) or the fit's law, the columns that law reads are renamed and checked as
    `loopscale fit` does (`runs_table.canonical_table`): a chinchilla fit needs no N_once, N_rec or r.
    """
    table = read_any_table(path)  # CSV, Parquet or JSON lines; ValueError naming the file
    if columns is not None or law is not None:
        try:
            table = canonical_table(table, law or "looped", columns)
        except InputError as err:
            raise InputError(f"{path}: {err}") from None
    return as_looped_table(table, source=str(path))


def as_looped_table(table: pd.DataFrame, source: str = "runs table") -> pd.DataFrame:
    """The table with r, N_once, N_rec (filled in for a plain N table) and D (from C = 6 N D)."""
    t = table.copy()
    if "N_once" not in t and "N" in t:
        t["N_once"], t["N_rec"] = t["N"], 0.0
    if "r" not in t:
        t["r"] = 1
    if "D" not in t and "C" in t and "N_once" in t:
        t["D"] = tokens_from_compute(t["C"], cost_params(t["N_once"], t["N_rec"], t["r"]))
    missing = [c for c in REQUIRED_COLUMNS if c not in t]
    if missing:
        raise InputError(f"{source} lacks column(s) {', '.join(missing)}")
    if len(t) == 0:
        raise InputError(f"{source} has no rows")
    for col in REQUIRED_COLUMNS:
        t[col] = pd.to_numeric(t[col], errors="coerce")
    bad = ~np.isfinite(t[list(REQUIRED_COLUMNS)].to_numpy(dtype=float)).all(axis=1)
    if bad.any():
        raise InputError(f"{source} has {int(bad.sum())} row(s) with missing or non-numeric law inputs")
    if "N" not in t:
        t["N"] = t["N_once"] + t["N_rec"]
    if "C" not in t:
        t["C"] = compute_from_tokens(t["D"], cost_params(t["N_once"], t["N_rec"], t["r"]))
    return t


def fit_label(fit: FitResult, default: str = "fit") -> str:
    """A short name for a fit: its group value (`loopscale fit --group recipe` fits one recipe per
    file), else `default`."""
    group = fit.group or {}
    return str(group["value"]) if group.get("value") is not None else default


def rows_for_fit(table: pd.DataFrame, fit: FitResult) -> pd.DataFrame:
    """The rows a fit was made on: with `--group COL` a fit covers the rows where COL equals its
    value, so a sweep's whole table can be drawn against one recipe's fit."""
    group = fit.group or {}
    col = group.get("column")
    if col is None:
        return table
    if col not in table:
        raise InputError(f"the fit is for {col} = {group.get('value')!r} but the table has no column {col!r}")
    mask = table[col].astype(str) == str(group.get("value"))
    if group.get("shared_r1"):  # a recipe of a joint fit: its runs and the shared r = 1 runs
        mask |= table["r"].to_numpy(dtype=float) == 1
    rows = table[mask]
    if len(rows) == 0:
        raise InputError(f"the table has no rows with {col} = {group.get('value')!r} (the fit's group)")
    return rows.reset_index(drop=True)


def predicted_loss(table: pd.DataFrame, fit: FitResult) -> np.ndarray:
    """L_hat per row of the table at the fitted parameters (`Law.predict_table`: only the numeric law inputs
    are read; a per-recipe fit takes each row's recipe from the fit's recipe column)."""
    law = law_class(fit.law)
    if law.per_recipe:
        return law.predict_table(fit.params, table, (fit.joint or {}).get("column", "recipe"))
    inputs = dict.fromkeys([*LAW_INPUTS, *law.size_columns])  # and a law's own (N_pass)
    return law.predict_table(fit.params, {c: table[c].to_numpy(dtype=float) for c in inputs if c in table})


def log_residuals(table: pd.DataFrame, fit: FitResult) -> np.ndarray:
    """log L - log L_hat: the quantity the fitter's Huber objective is summed over."""
    return np.log(table["L"].to_numpy(dtype=float)) - np.log(predicted_loss(table, fit))


def looped_phi(fit: FitResult, figure: str) -> float:
    """The fitted phi, or a ValueError naming the figure that needs it (a chinchilla fit has none)."""
    if "phi" not in fit.params:
        raise InputError(f"the {figure} figure needs a looped fit with phi; this fit is {fit.law!r}")
    return float(fit.params["phi"])


def free_multipliers(free) -> dict[float, float]:
    """{r: k_r} from a fit of a law with a free multiplier per r (looped-free), with k_1 = 1
    (N_eff = N_once + k_r N_rec)."""
    free = load_fit(free)
    if not law_class(free.law).per_r_multipliers:
        raise InputError(f"the free multipliers need a looped-free fit; this fit is {free.law!r}")
    k = {float(name[2:]): float(v) for name, v in free.params.items() if name.startswith("k_")}
    return {1.0: 1.0, **k}
