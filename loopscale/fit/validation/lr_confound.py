"""The learning-rate confound (issue 39 item 2): if the best lr moves with r, a shared lr under-trains some r
and phi absorbs the tuning error (Porian et al. 2024). Reads the lr grid of a sweep (hydra/sweeper=lr_grid,
loopscale/launch/lr_grid.py: runs with an `lr_scale` column at the smallest budget, one width, every r) beside
the grid's own run there (lr_scale 1).

Per r (and recipe): a parabola of L in ln(lr_scale) gives the best multiplier and, by the delta method on the
parabola's coefficients (their covariance from its residuals, t quantile of its n - 3 degrees of freedom), a
95% interval; the best lr "moves with r" when it differs from r = 1's by more than one grid step. Then phi is
refitted twice: with each r's grid point at its best-lr loss (the parabola's minimum), and with every run of
each r scaled by that r's relative lr penalty L_best / L_shared (the penalty measured at the smallest budget
carried to every budget: an upper reading of the confound).
"""

from __future__ import annotations

from typing import TypedDict

import numpy as np

from loopscale.errors import InputError
from loopscale.fit.lr_optimum import parabola_optimum
from loopscale.fit.points import multiplier_column
from loopscale.fit.runs_table import budgets
from loopscale.fit.validation.forms import Form
from loopscale.fit.validation.record import LrSection
from loopscale.fit.validation.refit import refit

LR_COLUMN = "lr_scale"


class BestLr(TypedDict, total=False):
    """The best lr multiplier of one group (`best_lr`), or only the reason there is none."""

    best: float
    interval: list[float] | None  # 95%; None with 3 points
    at_edge: bool  # the grid does not bracket it
    L_best: float
    reason: str | None


def lr_rows(raw) -> np.ndarray:
    """The rows of an lr grid (lr_scale set and not 1) of a table as read."""
    if LR_COLUMN not in raw.columns:
        return np.zeros(len(raw), bool)
    given = raw[LR_COLUMN]
    scale, bad = multiplier_column(given)  # empty: the grid's lr (1)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(
            f"column {LR_COLUMN} has {given.iloc[i]!r} (row {i}, {int(bad.sum())} such row(s)): an lr multiplier is "
            "a finite number > 0 (empty: the grid's own lr, 1)"
        )
    return scale != 1.0


def best_lr(log_scale: np.ndarray, L: np.ndarray) -> BestLr:
    """The parabola L = c0 + c1 x + c2 x^2 in x = ln(lr_scale) (loopscale/fit/lr_optimum.py, this grid's own
    residuals for the noise): best multiplier exp(x*), its 95% interval (None with 3 points), L at x* (x*
    clipped to the grid), whether the grid fails to bracket it (`at_edge`); or a reason."""
    try:
        fit = parabola_optimum(log_scale, L)
    except ValueError as err:
        return BestLr(reason=str(err))
    interval = list(fit.interval) if fit.interval else None
    return BestLr(best=fit.best, interval=interval, at_edge=fit.at_edge, L_best=fit.L_best, reason=fit.reason)


def lr_section(lr_table, table, form: Form, params: dict[str, float], starts) -> LrSection:
    """The lr grid read against the law's table (module docstring). starts: the fit's optima the refits start from."""

    out = LrSection(groups=[], flags=[], phi_shared=params.get("phi"), reason=None)
    if len(lr_table) == 0:
        out["reason"] = "the table has no lr-grid runs (run the sweep with hydra/sweeper=lr_grid)"
        return out
    if "r" not in lr_table.columns or "r" not in table.columns:
        out["reason"] = "the table has no r column: the lr grid is read per r"
        return out
    width = "width" if "width" in table.columns and "width" in lr_table.columns else None
    size = (lambda t: t[width].to_numpy(float)) if width else (lambda t: (t["N_once"] + t["N_rec"]).to_numpy(float))
    keys = ["r", *(["recipe"] if "recipe" in lr_table.columns and "recipe" in table.columns else [])]
    grid_budget, lr_budget = budgets(table), budgets(lr_table)
    # the grid's own run (multiplier 1) is a grid point too: without it a 3-point grid (1/s, 1, s) read its step as s^2
    steps = np.diff(np.unique(np.log(np.append(lr_table[LR_COLUMN].to_numpy(float), 1.0))))
    out["step"] = float(np.exp(steps.min())) if len(steps) else None
    best_L, centre_rows = {}, {}
    for key, rows in lr_table.groupby(keys, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        at = np.ones(len(table), bool)
        for name, value in zip(keys, key):
            at &= (table[name] == value).to_numpy()
        lr_at = lr_table.index.isin(rows.index)
        centre = at & np.isin(grid_budget, lr_budget[lr_at]) & np.isin(size(table), size(rows))
        scales = np.concatenate([rows[LR_COLUMN].to_numpy(float), np.ones(int(centre.sum()))])
        L = np.concatenate([rows["L"].to_numpy(float), table["L"].to_numpy(float)[centre]])
        fit = best_lr(np.log(scales), L)
        shared = float(table["L"].to_numpy(float)[centre].mean()) if centre.any() else None
        named = {name: v.item() if hasattr(v, "item") else v for name, v in zip(keys, key)}
        group = {**named, "multipliers": scales.tolist(), "L": L.tolist(), "L_shared": shared, **fit}
        if shared is not None and fit.get("L_best") is not None:
            group["penalty"] = shared - fit["L_best"]
            best_L[key], centre_rows[key] = fit["L_best"], (at, centre, shared)
        out["groups"].append(group)
    _moves(out)
    if best_L and "phi" in params:
        points = table.copy()
        scaled = table.copy()
        for key, L_best in best_L.items():
            at, centre, shared = centre_rows[key]
            points.loc[centre, "L"] = L_best
            scaled.loc[at, "L"] = scaled.loc[at, "L"] * (L_best / shared)
        for name, changed in (("phi_best_points", points), ("phi_penalty_all", scaled)):
            out[name] = refit(form, form.law.data_from_table(changed), starts).get("phi")
    return out


def _moves(out: LrSection) -> None:
    """Each group's move of the best lr from r = 1's (in grid steps), flagged beyond one step."""
    base = next((g for g in out["groups"] if g.get("r") == 1 and g.get("best")), None)
    if base is None or not out.get("step"):
        return
    for g in out["groups"]:
        if g.get("best") is None or g is base:
            continue
        g["steps_from_r1"] = float(np.log(g["best"] / base["best"]) / np.log(out["step"]))
        if abs(g["steps_from_r1"]) > 1:
            out["flags"].append(
                f"the best lr at r = {g['r']:g} is x{g['best'] / base['best']:.2f} r = 1's "
                f"({g['steps_from_r1']:+.1f} grid steps): a shared lr under-trains one of them"
            )
