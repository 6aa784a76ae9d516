"""Seeds as data: which rows of a runs table are one point of the law and which one seed's run.

A *point* is one set of law inputs: r, N_once, N_rec (or N), D and, for looped rows, the recipe (an r = 1 run is
the same dense model whatever recipe labels it). Rows of one point that differ by seed are *replicates*; the
seed comes from the `seed` column (another name: `seed_column`); a forked sweep's parent job stands for its seed
where the table has no seed column (a seed is a different parent; its branches share it); in a table with
neither, every row is its own run, and two rows with one point and one loss are one run copied. Rows of one
point with the same seed are one run counted twice (`Replicates.duplicate`). What `loopscale collect` says
about the seeds (`seed_count_line`) and what the seed sigma (`loopscale.fit.seed_sigma`) pools.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from loopscale.errors import InputError
from loopscale.fit.runs_table import PARENT_COLUMN, SEED_COLUMN, is_forked

RECIPE_COLUMN = "recipe"


@dataclass(frozen=True)
class Replicates:
    """Which rows of a table are one point and which one seed.

    point: point id per row (0..n_points-1); unit: seed-run id per row (0..n_units-1), each unit inside one
    point (rows of one unit are one run: a duplicate after the first); seeds: number of distinct seeds per
    point; duplicate: rows that repeat an earlier row's point and seed; seed_column: the column the seeds
    came from (None: every row its own run)."""

    point: np.ndarray
    unit: np.ndarray
    seeds: np.ndarray
    duplicate: np.ndarray
    seed_column: str | None

    @property
    def n_points(self) -> int:
        return len(self.seeds)

    @property
    def has_repeats(self) -> bool:
        """Whether some point has two seeds or more: the seed sigma can be measured."""
        return bool((self.seeds >= 2).any())

    def summary(self) -> dict[str, Any]:
        """{"n_points", "n_replicated_points", "seeds_per_point": {n seeds: n points}, "n_duplicate_rows",
        "dof" (sum of seeds - 1 over points), "seed_column"}: what collect and fit say about the seeds."""
        counts = pd.Series(self.seeds).value_counts().sort_index()
        return {
            "n_points": self.n_points,
            "n_replicated_points": int((self.seeds >= 2).sum()),
            "seeds_per_point": {str(int(k)): int(v) for k, v in counts.items()},
            "n_duplicate_rows": int(self.duplicate.sum()),
            "dof": int((self.seeds - 1).sum()),
            "seed_column": self.seed_column,
        }


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
    keys = pd.DataFrame({c: _round_sig(table[c].to_numpy(dtype=float)) for c in cols})
    looped = table["r"].to_numpy(dtype=float) > 1 if "r" in table.columns else np.zeros(len(table), bool)
    if recipe_column and recipe_column in table.columns:
        keys["_recipe"] = np.where(looped, table[recipe_column].astype(str).to_numpy(), "")
    return keys


def replicate_groups(
    table: pd.DataFrame, seed_column: str | None = SEED_COLUMN, recipe_column: str | None = RECIPE_COLUMN
) -> Replicates:
    """Points and seeds of a table (`Replicates`). seed_column: the column naming each run's seed (None, or a
    name the table lacks: no seeds, every row its own run unless it copies another row's point and loss);
    an empty seed makes the row its own run. Forked sweeps: a seed is a different parent job, so the parent
    column names the run where the table has no seed column."""
    keys = point_keys(table, recipe_column)
    point = keys.groupby(list(keys.columns), sort=False, dropna=False).ngroup().to_numpy()
    used = seed_column if seed_column and seed_column in table.columns else None
    if used is not None:
        raw = table[used]
        missing = raw.isna().to_numpy() | (raw.astype(str).str.strip() == "").to_numpy()
        run = np.where(missing, "row " + pd.Series(np.arange(len(table))).astype(str), "seed " + raw.astype(str))
    elif is_forked(table):
        parent = table[PARENT_COLUMN]
        present = (parent.notna() & (parent.astype(str).str.strip() != "")).to_numpy()
        run = np.where(present, "parent " + parent.astype(str), "row " + pd.Series(np.arange(len(table))).astype(str))
    elif "L" in table.columns:  # copies of one run: same point and loss
        run = "L " + pd.Series(_round_sig(table["L"].to_numpy(dtype=float))).astype(str).to_numpy()
    else:
        run = "row " + pd.Series(np.arange(len(table))).astype(str).to_numpy()
    frame = pd.DataFrame({"point": point, "run": np.asarray(run, dtype=str)})
    unit = frame.groupby(["point", "run"], sort=False).ngroup().to_numpy()
    duplicate = frame.duplicated(["point", "run"]).to_numpy()
    seeds = np.bincount(frame.drop_duplicates(["point", "run"])["point"].to_numpy(), minlength=point.max() + 1)
    return Replicates(point, unit, seeds, duplicate, used)


def _round_sig(x: np.ndarray, digits: int = 12) -> np.ndarray:
    """x rounded to `digits` significant digits (0 and non-finite values kept)."""
    x = np.asarray(x, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        mag = np.where((x != 0) & np.isfinite(x), np.floor(np.log10(np.abs(x))), 0.0)
    scale = 10.0 ** (digits - 1 - mag)
    return np.where(np.isfinite(x), np.round(x * scale) / scale, x)


def seed_count_line(reps: Replicates) -> str:
    """'44 points: 40 with 3 seeds, 4 with 1 seed' (what collect prints)."""
    s = reps.summary()
    parts = [f"{n} with {k} seed{'s' if k != '1' else ''}" for k, n in sorted(s["seeds_per_point"].items(), key=_num)]
    return f"{s['n_points']} points: " + ", ".join(parts)


def _num(item):
    return int(item[0])
