"""A tune's lr grids (loopscale/launch/tune.py): the grid's shape (`TuneGrid`: how many lrs, their ratio, the
centre), one grid's lrs and losses (`Grid`: an r at a cell), how a grid that misses its optimum grows (`extend`)
and how each grid is read (`fit_grids`: a parabola in ln lr over the FIT_POINTS lrs nearest its lowest loss, the
noise pooled over every grid, the runs that did not train left out: loopscale/fit/lr_optimum.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from loopscale.config.tune_record import TuneNoise
from loopscale.errors import ConfigError
from loopscale.fit.lr_optimum import (
    LrOptimum,
    away_from_failure,
    bounded_by_failure,
    failed,
    parabola_optimum,
    pooled_noise,
    window,
)

FIT_POINTS = 5  # the parabola's window: the lrs nearest the lowest loss


@dataclass(frozen=True)
class TuneGrid:
    """points: the lrs of a first grid (>= 3); step: the ratio of neighbouring lrs; centre: the middle multiplier
    (rounded to a power of step, so every multiplier is step^k and run names repeat across rounds and tunes);
    max_extend: how many times a grid that does not bracket its optimum may grow."""

    points: int = 5
    step: float = 2**0.5
    centre: float = 1.0
    max_extend: int = 3

    def __post_init__(self) -> None:
        if not (isinstance(self.points, int) and self.points >= 3):
            raise ConfigError(f"points={self.points!r} must be an integer >= 3 (a parabola needs 3 lrs)")
        if not float(self.step) > 1.0:
            raise ConfigError(f"step={self.step!r} must be > 1 (the ratio of neighbouring learning rates)")
        if not float(self.centre) > 0.0:
            raise ConfigError(f"centre={self.centre!r} must be > 0 (a multiplier of the experiment's lr)")

    def first_ks(self) -> list[int]:
        k0 = round(math.log(self.centre) / math.log(self.step))
        return list(range(k0 - (self.points - 1) // 2, k0 + self.points // 2 + 1))

    def multiplier(self, k: int) -> float:
        return float(f"{float(self.step) ** k:.12g}")  # 0.707106781187: the same override, hence run name, every time


@dataclass
class Grid:
    """One lr grid: a (recipe, r) at one cell; ks trained so far, each k's losses (several with seeds)."""

    recipe: str
    r: int
    cell: str
    overrides: list[str]  # the group's job overrides without its point
    ks: list[int]
    L: dict[int, list[float]] = field(default_factory=dict)


def runs_of(g: Grid) -> tuple[np.ndarray, np.ndarray]:
    """(ks, L) per run of the grid (an lr with seeds: a run each)."""
    ks = np.array([k for k in g.ks for _ in g.L.get(k, [])], dtype=int)
    return ks, np.array([v for k in g.ks for v in g.L.get(k, [])], dtype=float)


def failed_ks(g: Grid) -> list[int]:
    """The grid's ks with a run that did not train (what `fit_grids` leaves out)."""
    ks, L = runs_of(g)
    return sorted({int(k) for k in ks[failed(L)]})


def fit_grids(grids: list[Grid], tg: TuneGrid) -> tuple[dict[int, LrOptimum | None], TuneNoise]:
    """Each grid's parabola at the pooled noise, the runs that did not train left out of both (`lr_optimum.failed`,
    `bounded_by_failure`): ({id(grid): LrOptimum}, the noise {sigma_nats, dof}). The window is the FIT_POINTS lrs
    nearest the lowest mean loss, every run at them (seeds and all)."""
    windows, trained = {}, {}
    for g in grids:
        ks, L = runs_of(g)
        x = np.log([tg.multiplier(k) for k in ks])
        bad = failed(L)  # a run that did not train is no point of the basin
        x_ok, L_ok = x[~bad], L[~bad]
        lrs = np.unique(x_ok)
        means = np.array([L_ok[x_ok == u].mean() for u in lrs])
        keep = np.isin(x_ok, lrs[window(lrs, means, FIT_POINTS)] if len(lrs) > FIT_POINTS else lrs)
        windows[id(g)], trained[id(g)] = (x_ok[keep], L_ok[keep]), (x_ok, L_ok, x[bad])
    sigma, dof = pooled_noise(list(windows.values()))
    fits = {}
    for g in grids:
        x, L = windows[id(g)]
        x_ok, L_ok, x_failed = trained[id(g)]
        if len(np.unique(x)) >= 3:
            fits[id(g)] = bounded_by_failure(parabola_optimum(x, L, sigma=sigma, dof=dof or None), x_ok, x_failed)
        else:
            fits[id(g)] = away_from_failure(x_ok, L_ok, x_failed)
    return fits, {"sigma_nats": sigma, "dof": dof}


def extend(grid: Grid, side: int) -> list[int]:
    """Two more lrs beyond the grid's edge on `side` (-1: below, +1: above); the new ks."""
    new = [min(grid.ks) - 1, min(grid.ks) - 2] if side < 0 else [max(grid.ks) + 1, max(grid.ks) + 2]
    grid.ks = sorted([*grid.ks, *new])
    return new
