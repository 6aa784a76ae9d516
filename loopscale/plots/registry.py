"""Which figures a fit gets, and writing them: `figures` draws every one that applies, `save_all` and
`save_figures` write them as PNG, `plot_fit` writes the one `loopscale fit --plot` asks for. Every PNG
is written atomically (loopscale/atomic.py)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from loopscale.atomic import atomic_path
from loopscale.fit.result import load_fit

from .recipes import delta_phi, joint_delta_phi, recipe_fit
from .single_fit import collapse, compute_optimal, iso_flop, phi_profile, predicted_vs_observed, residuals

FIGURE_NAMES = ("iso_flop", "collapse", "phi_profile", "residuals", "delta_phi", "compute_optimal")


def figures(table: pd.DataFrame, fit, compare=(), free=None) -> dict[str, Figure]:
    """Every figure that applies: phi figures need a looped fit, delta-phi needs `compare` fits.
    A joint fit draws the single-law figures for its reference recipe (`recipe_fit`) and its own
    delta-phi figure (`joint_delta_phi`)."""
    fit = load_fit(fit)
    if fit.law == "looped-joint":
        out = figures(table, recipe_fit(fit, fit.joint["reference"]), (), free)
        out["delta_phi"] = joint_delta_phi(fit)
        return {name: out[name] for name in FIGURE_NAMES if name in out}
    out = {"iso_flop": iso_flop(table, fit), "residuals": residuals(table, fit, free)}
    if "phi" in fit.params:
        out["collapse"] = collapse(table, fit)
        out["phi_profile"] = phi_profile(fit)
        out["compute_optimal"] = compute_optimal(table, fit)
        if compare:
            out["delta_phi"] = delta_phi([fit, *compare])
    return {name: out[name] for name in FIGURE_NAMES if name in out}


def save_all(table: pd.DataFrame, fit, out_dir, compare=(), free=None, dpi: int = 110) -> list[Path]:
    """Write every figure that applies as out_dir/<name>.png; return the paths in FIGURE_NAMES order."""
    drawn = figures(table, fit, compare, free)  # draw everything before writing anything
    return save_figures(drawn, out_dir, dpi)


def save_figures(drawn: Mapping[str, Figure], out_dir, dpi: int = 110) -> list[Path]:
    """Write each figure as out_dir/<name>.png; return the paths in the mapping's order."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, fig in drawn.items():
        path = out_dir / f"{name}.png"
        with atomic_path(path) as tmp:  # never a cut PNG (loopscale/atomic.py)
            fig.savefig(tmp, dpi=dpi)
        paths.append(path)
    return paths


def plot_fit(table: pd.DataFrame, fit, path, dpi: int = 110) -> Path:
    """Write `predicted_vs_observed` to path (what `loopscale fit --plot PATH` calls)."""
    path = Path(path)
    with atomic_path(path) as tmp:
        predicted_vs_observed(table, fit).savefig(tmp, dpi=dpi)
    return path
