"""The numbers behind the figures, from the fitted law alone: the law along an iso-FLOP curve, the
collapse coordinates and their spread, and the compute-optimal N*, D* per r. Nothing here draws."""

from __future__ import annotations

import numpy as np
import pandas as pd

from loopscale.fit.laws.registry import law_class, predict_loss
from loopscale.fit.result import FitResult, load_fit

from .inputs import rows_for_fit


def law_line(group: pd.DataFrame, fit: FitResult, n_points: int = 60, C: float | None = None):
    """(N, L) of the fitted law along one iso-FLOP curve (runs of one r, at one budget or, given C, near it).

    Between the runs, N_once, N_rec and D are interpolated in log N from the runs themselves (the
    architecture family fixes how they move with width), so the line needs no accounting model. Given a
    budget C (runs binned over several budgets), D = C / F with the training FLOPs per token F = C / D of
    the runs interpolated the same way: the law at exactly C.
    """
    g = group.sort_values("N").drop_duplicates("N")
    log_n = np.log(g["N"].to_numpy(dtype=float))
    grid = np.linspace(log_n.min(), log_n.max(), n_points)

    def along(values):
        values = np.asarray(values, dtype=float)
        if (values > 0).all():
            return np.exp(np.interp(grid, log_n, np.log(values)))
        return np.interp(grid, log_n, values)

    sizes = dict.fromkeys(["N_once", "N_rec", *law_class(fit.law).size_columns])  # and a law's own (N_pass)
    cols = {c: along(g[c]) for c in sizes if c not in ("N", "r")}
    if C is None:
        cols["D"] = along(g["D"])
    else:
        cols["D"] = C / along(g["C"].to_numpy(dtype=float) / g["D"].to_numpy(dtype=float))
    cols["N"], cols["r"] = np.exp(grid), np.full(n_points, float(g["r"].iloc[0]))
    return np.exp(grid), predict_loss(fit.law, fit.params, cols)


def collapse_coordinates(table: pd.DataFrame, fit: FitResult, phi: float):
    """(N_eff at this phi, L - B D^-beta): with the data term removed, the law says every run lies
    on the single curve E + A N_eff^-alpha, whatever its r, if phi is right (`Law.effective_size`)."""
    p = fit.params
    law = law_class(fit.law).from_params(p)
    at = {**p, "phi": phi}
    if phi != p["phi"]:  # phi = 0 / 1 mean m = 1 / r: a rival's own parameters (psi, kappa) where it is r^phi
        at |= dict(law.looped_at)
    x = law.effective_size(at, table)
    y = table["L"].to_numpy(dtype=float) - p["B"] * table["D"].to_numpy(dtype=float) ** -p["beta"]
    return np.asarray(x, dtype=float), y


def collapse_spread(table: pd.DataFrame, fit, phi: float) -> float:
    """RMS relative distance of the collapsed runs from E + A N_eff^-alpha at this phi.

    The number behind the collapse figure: smallest near the fitted phi when the law holds.
    """
    fit = load_fit(fit)
    table = rows_for_fit(table, fit)
    p = fit.params
    x, y = collapse_coordinates(table, fit, phi)
    curve = p["E"] + p["A"] * x ** -p["alpha"]
    return float(np.sqrt(np.mean(((y - curve) / curve) ** 2)))
