"""Designs for `power`'s tests: a grid of points, each trained `seeds` times (a seed column numbering them)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from loopscale.fit import synthetic as S


def seeded(grid: pd.DataFrame, seeds: int) -> pd.DataFrame:
    """Every row of `grid` `seeds` times, seeds 0..seeds-1."""
    design = grid.loc[grid.index.repeat(seeds)].reset_index(drop=True)
    design["seed"] = np.tile(np.arange(seeds), len(grid))
    return design


def cpu_design(seeds: int, r_values=(1, 2, 4, 8)) -> pd.DataFrame:
    """The CPU-sized grid (two budgets, three sizes) at `r_values`, `seeds` times."""
    return seeded(S.isodepth_grid(S.CPU_SIZES, r_values), seeds)
