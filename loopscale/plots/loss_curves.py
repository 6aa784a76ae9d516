"""Fitted against measured loss curves (issue 55): the figure to look at before trusting a curve law.

curve_law_figure    one model's runs (`fit --curves`): each run's measured loss against the step (points) and
                    the law's curve (a solid line where it was fitted, dashed where the run was held out), one
                    panel per run with its mean relative error
looped_curves       a `looped-curve` fit on a curves table: one panel per r, each run's evaluations (points)
                    against the tokens seen and the law at them (a line), one colour per width
fit_curves_figure   the same from the fit record alone: the curves table it records, read with its columns
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

import loopscale.plots.labels as labels  # the module, not the package: no import cycle
from loopscale.errors import InputError
from loopscale.fit.laws.registry import law_class
from loopscale.fit.result import load_fit
from loopscale.fit.runs_table import ColumnMap, canonical_table
from loopscale.fit.runs_table import read_table as read_any_table

from .figure import FitFigure
from .layout import log_axis, panel_grid

MAX_PANELS = 12  # runs drawn by curve_law_figure: the held-out ones first, then the fitted ones


def curve_law_figure(curves, predictions: dict[str, np.ndarray], holdout=(), law: str = "") -> Figure:
    """`curves`: `loopscale.fit.curves.table.Curve`s; `predictions`: run -> the law's loss at its
    evaluations; `holdout`: the runs the fit did not see."""
    held = set(holdout)
    ordered = [c for c in curves if c.run in held] + [c for c in curves if c.run not in held]
    shown = ordered[:MAX_PANELS]
    fig, axes = panel_grid(len(shown), ncols=3, size=(4.2, 3.2))
    for ax, curve in zip(axes, shown):
        pred = predictions[curve.run]
        rel = np.abs(pred - curve.loss) / curve.loss
        ax.scatter(curve.steps, curve.loss, s=8, color="0.25", zorder=3)
        dashed = curve.run in held
        ax.plot(curve.steps, pred, color="tab:red" if dashed else "tab:blue", ls="--" if dashed else "-", lw=1.4)
        role = "held out" if dashed else "fitted"
        ax.set_title(
            f"{curve.run} ({role})\nmean error {100 * rel.mean():.3f}%, max {100 * rel.max():.3f}%", fontsize=9
        )
        ax.set_xlabel(labels.STEP)
        ax.set_ylabel(labels.LOSS)
    handles = [
        Line2D([], [], color="0.25", marker="o", ls="", label="measured"),
        Line2D([], [], color="tab:blue", label="law, fitted run"),
        Line2D([], [], color="tab:red", ls="--", label="law, held-out run (predicted)"),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=3, frameon=False)
    more = f" ({len(curves) - len(shown)} more runs not drawn)" if len(curves) > len(shown) else ""
    fig.suptitle(f"{law} law: measured and fitted loss curves{more}")
    return fig


def looped_curves(table: pd.DataFrame, fit) -> Figure:
    """A looped-curve fit against its curves table (the rows it fitted: run, step, tokens, L, r, width)."""
    fit = load_fit(fit)
    predicted = law_class(fit.law).predict_table(fit.params, table)
    r_values = sorted(set(table["r"].astype(float)))
    fig, axes = panel_grid(len(r_values), ncols=min(4, len(r_values)), size=(4.2, 3.6))
    width = table["width"] if "width" in table.columns else pd.Series(0, index=table.index)
    widths = sorted(set(width))
    colours = {w: c for w, c in zip(widths, _palette(len(widths)))}
    for ax, r in zip(axes, r_values):
        rows = table[table["r"].astype(float) == r]
        rel = np.abs(predicted[rows.index] - rows["L"]) / rows["L"]
        for _, run in rows.groupby("run", sort=False):
            colour = colours[width[run.index[0]]]
            order = run.sort_values("tokens").index
            ax.scatter(run.loc[order, "tokens"], run.loc[order, "L"], s=8, color=colour, zorder=3)
            ax.plot(run.loc[order, "tokens"], predicted[order], color=colour, lw=1.0)
        log_axis(ax, "x")
        ax.set_title(f"r = {r:g}: mean error {100 * rel.mean():.2f}%", fontsize=10)
        ax.set_xlabel(labels.TOKENS)
        ax.set_ylabel(labels.LOSS)
    handles = [Line2D([], [], color=colours[w], marker="o", label=f"d = {w:g}") for w in widths if w]
    handles.append(Line2D([], [], color="0.3", label="law at each evaluation"))
    fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 6), frameon=False)
    fig.suptitle(f"{fit.law}: every evaluation of every run, measured (points) and fitted (lines)")
    return fig


def fit_curves_figure(fit) -> Figure:
    """`looped_curves` of a fit whose law reads curves, from its record: the table it records (`input.path`)
    with the column names it used (what the notebook shows; `loopscale plot` reads the table it is given)."""
    fit = load_fit(fit)
    if not law_class(fit.law).reads_curves:
        raise InputError(f"a {fit.law} fit is not fitted to loss curves (loopscale fit CURVES.csv --law looped-curve)")
    path = fit.input.get("path")
    if not path:
        raise InputError("the curve fit records no table: draw it with loopscale plot CURVES.csv --fit FIT.json")
    raw = read_any_table(path)
    used = {k: v for k, v in (fit.input.get("columns") or {}).items() if v in raw.columns}
    columns = ColumnMap(**{k: v for k, v in used.items() if k in ColumnMap.__dataclass_fields__})
    return looped_curves(canonical_table(raw, fit.law, columns), fit)


def _palette(n: int) -> list:
    cmap = colormaps["viridis"]
    return [cmap(x) for x in np.linspace(0.05, 0.85, max(n, 1))]


FIGURES = (  # a looped-curve fit's evaluations as curves (plots/registry.py)
    FitFigure("loss_curves", 6, lambda t, fit, c, f: looped_curves(t, fit), tables=("curves",)),
)
