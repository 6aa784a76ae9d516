"""Seeds as data: which rows of a runs table are one point of the law and which one seed's run.

A *point* is one set of law inputs (loopscale/fit/points.py): r, N_once, N_rec (or N), D and, for looped rows,
the recipe (an r = 1 run is the same dense model whatever recipe labels it). Rows of one point that differ by seed
are *replicates*; the seed comes from the `seed` column (another name: `seed_column`); a forked sweep's parent
job stands for its seed where the table has no seed column (a seed is a different parent; its branches share it);
in a table with neither, every row is its own run, and two rows with one point and one loss are one run copied.
Rows of one point with the same seed are one run counted twice (`Replicates.duplicate`). What `loopscale collect`
says about the seeds (`seed_count_line`) and what the seed sigma (`loopscale.fit.seed_sigma`) pools.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from loopscale.fit.points import RECIPE_COLUMN, point_keys, round_sig
from loopscale.fit.runs_table import PARENT_COLUMN, SEED_COLUMN, is_forked


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
        run = "L " + pd.Series(round_sig(table["L"].to_numpy(dtype=float))).astype(str).to_numpy()
    else:
        run = "row " + pd.Series(np.arange(len(table))).astype(str).to_numpy()
    frame = pd.DataFrame({"point": point, "run": np.asarray(run, dtype=str)})
    unit = frame.groupby(["point", "run"], sort=False).ngroup().to_numpy()
    duplicate = frame.duplicated(["point", "run"]).to_numpy()
    seeds = np.bincount(frame.drop_duplicates(["point", "run"])["point"].to_numpy(), minlength=point.max() + 1)
    return Replicates(point, unit, seeds, duplicate, used)


def seed_count_line(reps: Replicates) -> str:
    """'44 points: 40 with 3 seeds, 4 with 1 seed' (what collect prints)."""
    s = reps.summary()
    parts = [f"{n} with {k} seed{'s' if k != '1' else ''}" for k, n in sorted(s["seeds_per_point"].items(), key=_num)]
    return f"{s['n_points']} points: " + ", ".join(parts)


def _num(item):
    return int(item[0])
