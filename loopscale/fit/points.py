"""What makes a point of the law: r, N_once, N_rec (or N), D, a looped row's recipe, a curve's step
(`point_keys`); rows of one point differing by seed are its replicates (loopscale/fit/replicates.py). The loop's
own lr (optim.lr_loop, the runs table's `lr_loop`) is no input of the law, so rows of one point at two lr_loop are
not seeds of one point but a grid over a setting the law does not see: a table with one is refused where it is
read to fit (`check_one_lr_loop`, called by runs_table.canonical_table: fit, validate, power's designs), and each
setting is fitted alone. A tuned loop rule gives each r and width its own lr_loop: constant within each point,
which fits as before."""

from __future__ import annotations

import numpy as np
import pandas as pd

from loopscale.errors import InputError

RECIPE_COLUMN = "recipe"
LR_LOOP_COLUMN = "lr_loop"  # `loopscale collect`: optim.lr_loop, empty at 1 (runs_table.read_table reads it as 1)


def point_keys(table: pd.DataFrame, recipe_column: str | None = RECIPE_COLUMN) -> pd.DataFrame:
    """The columns that make a point, one row per table row: r, N_once, N_rec (or N), D (as read; equal when
    written by one generator, rounded to 12 significant digits so a D derived from C matches), and the recipe
    of looped rows ("" for r = 1 and for tables without `recipe_column`); in a curves table (a `step` column:
    evaluations along runs, issue 55) also the step, so seeds repeat an evaluation, not a run."""
    cols = [c for c in ("r", "N_once", "N_rec", "N", "D", "step") if c in table.columns]
    if "N_once" in cols and "N" in cols:
        cols.remove("N")  # N = N_once + N_rec: no new information, and maybe summed in another order
    if "D" not in cols:
        raise InputError(f"a point needs its tokens D (or C); columns are {list(table.columns)}")
    keys = pd.DataFrame({c: round_sig(table[c].to_numpy(dtype=float)) for c in cols})
    looped = table["r"].to_numpy(dtype=float) > 1 if "r" in table.columns else np.zeros(len(table), bool)
    if recipe_column and recipe_column in table.columns:
        keys["_recipe"] = np.where(looped, table[recipe_column].astype(str).to_numpy(), "")
    return keys


def round_sig(x: np.ndarray, digits: int = 12) -> np.ndarray:
    """x rounded to `digits` significant digits (0 and non-finite values kept)."""
    x = np.asarray(x, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        mag = np.where((x != 0) & np.isfinite(x), np.floor(np.log10(np.abs(x))), 0.0)
    scale = 10.0 ** (digits - 1 - mag)
    return np.where(np.isfinite(x), np.round(x * scale) / scale, x)


def multiplier_column(given: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(the values of an lr multiplier column, lr_scale or lr_loop, with an empty cell read as 1: the setting's
    own lr; the rows that hold no multiplier: text, inf, 0 or a negative). Empty is a missing value or blanks (a
    JSON "" too)."""
    values = pd.to_numeric(given, errors="coerce").to_numpy(dtype=float)
    empty = given.isna().to_numpy() | (given.astype(str).str.strip() == "").to_numpy()
    bad = ~empty & ~(np.isfinite(values) & (values > 0))
    return np.where(empty, 1.0, values), bad


def check_one_lr_loop(table: pd.DataFrame) -> None:
    """InputError naming the first point whose rows trained at two lr_loop values or more (a loop-lr grid: `tune
    --axis loop`'s runs, a sweep over optim.lr_loop) and how to fit one setting at a time; nothing when the table
    has no lr_loop column or one value per point. Empty is 1 (the loop at the other matrices' lr)."""
    if LR_LOOP_COLUMN not in table.columns:
        return
    given = table[LR_LOOP_COLUMN]
    values, bad = multiplier_column(given)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(f"column {LR_LOOP_COLUMN} has {given.iloc[i]!r} (row {i}): the loop's lr is a number > 0")
    keys = point_keys(table)
    keys[LR_LOOP_COLUMN] = round_sig(values, digits=6)
    per_point = keys.groupby(list(keys.columns[:-1]), sort=False, dropna=False)[LR_LOOP_COLUMN]
    settings = per_point.transform("nunique").to_numpy()
    if (settings < 2).all():
        return
    first = keys.columns[:-1]
    at = (keys[first] == keys[first].iloc[int(np.argmax(settings > 1))]).all(axis=1).to_numpy()
    rows = np.flatnonzero(at)
    point = ", ".join(f"{c} = {table[c].iloc[rows[0]]:.4g}" for c in first if c in table.columns)
    if RECIPE_COLUMN in table.columns:  # an r = 1 point is one whatever recipe labels it: say which ones
        point += f", recipe {', '.join(sorted(set(table[RECIPE_COLUMN].astype(str).iloc[rows])))}"
    raise InputError(
        f"rows {rows[:8].tolist()} are one point of the law ({point}) trained at lr_loop "
        f"{sorted(set(keys[LR_LOOP_COLUMN].iloc[rows]))} ({int((per_point.nunique() > 1).sum())} such point(s)): "
        "runs that differ in the loop's lr are not seeds of one point; fit one setting at a time "
        "(`loopscale fit --group lr_loop`, or a table of one lr_loop)"
    )
