"""The two-stage bootstrap of a table with seed repeats: outer clusters drawn with replacement, then within each
drawn cluster each point's seeds kept whole ("keep", the default: Ren et al. 2010, resample the highest level
only) or drawn again with replacement ("resample", which counts the seed variance twice: it is already in the
points' scatter). Outer clusters: the points (in a forked sweep the models, whose parents are their seeds), or
the `--cluster` column's values (`noise.seed_hierarchy`: a forked sweep's parents).
`loopscale.fit.resample.bootstrap` draws its replicates' weights from `Hierarchy`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from loopscale.errors import InputError
from loopscale.fit.replicates import Replicates, point_keys
from loopscale.fit.runs_table import PARENT_COLUMN, is_forked

INNER_MODES = ("keep", "resample")


@dataclass(frozen=True)
class Hierarchy:
    """Two-stage resampling of a table's rows. unit_of_row: the run (seed) of each row, numbered so that the
    units of one group are consecutive; group_start, group_size: each group's first unit and its number of
    units (a group: one point's seeds inside one outer cluster); outer_of_group: each group's outer cluster;
    n_outer: outer clusters; inner: "resample" (seeds drawn with replacement within each drawn point) or
    "keep" (a drawn point brings all its seeds)."""

    unit_of_row: np.ndarray
    group_start: np.ndarray
    group_size: np.ndarray
    outer_of_group: np.ndarray
    n_outer: int
    inner: str = "keep"

    def weights(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """(size, n_rows) row weights: each replicate draws n_outer outer clusters with replacement; a group
        of a cluster drawn c times gets c x (its units) draws of its units, uniformly with replacement
        ("resample"), or each of its units c times ("keep"). A row's weight is its unit's count."""
        n_units = int(self.group_start[-1] + self.group_size[-1])
        out = np.empty((size, len(self.unit_of_row)))
        groups = np.arange(len(self.group_start))
        for i in range(size):
            c = np.bincount(rng.integers(0, self.n_outer, self.n_outer), minlength=self.n_outer)
            cg = c[self.outer_of_group]
            if self.inner == "keep":
                counts = np.repeat(cg, self.group_size).astype(float)
            else:
                rep = np.repeat(groups, cg * self.group_size)
                drawn = self.group_start[rep] + np.floor(rng.random(len(rep)) * self.group_size[rep]).astype(int)
                counts = np.bincount(drawn, minlength=n_units).astype(float)
            out[i] = counts[self.unit_of_row]
        return out


def hierarchy(
    table: pd.DataFrame, reps: Replicates, clusters: np.ndarray | None = None, inner: str = "keep"
) -> Hierarchy:
    """The two-stage bootstrap of a table with seed repeats. The unit resampled within a point is its seed's
    run; in a forked sweep the parent job (its branches share its stable phase and its seed), and the point
    is then the parent's model (r, N_once, N_rec, recipe), so a model's parents are its seeds. Outer clusters:
    `clusters` (a label per row, e.g. compute budgets) or the points themselves; a parent whose branches fall
    in several outer clusters is cut at their borders."""
    if inner not in INNER_MODES:
        raise InputError(f"inner resampling must be one of {INNER_MODES}; got {inner!r}")
    point = reps.point.astype(str)
    unit = reps.unit.astype(str)
    if is_forked(table):
        parent = table[PARENT_COLUMN]
        present = (parent.notna() & (parent.astype(str).str.strip() != "")).to_numpy()
        keys = point_keys(table).drop(columns=["D"])
        model = keys.groupby(list(keys.columns), sort=False, dropna=False).ngroup().to_numpy().astype(str)
        point = np.where(present, "model " + model, "point " + point)
        unit = np.where(present, "parent " + parent.astype(str).to_numpy(), "unit " + unit)
    outer = point if clusters is None else np.asarray(clusters).astype(str)
    frame = pd.DataFrame({"outer": outer, "group": point, "unit": unit})
    outer_id = frame.groupby("outer", sort=True).ngroup().to_numpy()
    group_id = frame.groupby(["outer", "group"], sort=True).ngroup().to_numpy()
    unit_id = frame.groupby(["outer", "group", "unit"], sort=True).ngroup().to_numpy()
    n_groups, n_units = group_id.max() + 1, unit_id.max() + 1
    group_of_unit = np.zeros(n_units, dtype=int)
    group_of_unit[unit_id] = group_id
    group_size = np.bincount(group_of_unit, minlength=n_groups)
    group_start = np.concatenate([[0], np.cumsum(group_size)[:-1]])
    outer_of_group = np.zeros(n_groups, dtype=int)
    outer_of_group[group_id] = outer_id
    return Hierarchy(unit_id, group_start, group_size, outer_of_group, int(outer_id.max() + 1), inner)
