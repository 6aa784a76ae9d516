"""The iso-FLOP figure: loss against N per compute budget, one colour per r and one marker per recipe, the runs
as points and the fitted law as lines. A table with more budgets than MAX_PANELS (a public table such as
Chinchilla's, whose runs each have their own C) is binned: at most MAX_PANELS panels of equal width in log C,
each with the law at the panel's median budget and a band from its smallest to its largest budget."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

import loopscale.plots.labels as labels  # the module, not the package: no import cycle
from loopscale.fit.result import load_fit
from loopscale.fit.runs_table import budgets

from .curves import law_line
from .figure import FitFigure
from .layout import log_axis, panel_grid, r_colours, style_legend, suptitle
from .views import View, all_rows, view_styles, views

MAX_PANELS = 9


def budget_panels(C, max_panels: int = MAX_PANELS) -> list[tuple[float, float]]:
    """[(lowest, highest) budget] per panel: one panel per distinct budget when there are at most
    max_panels of them, else bins of equal width in log C (empty bins dropped)."""
    C = np.asarray(C, dtype=float)
    levels = np.unique(C)
    if len(levels) <= max_panels:
        return [(float(c), float(c)) for c in levels]
    edges = np.geomspace(levels[0], levels[-1], max_panels + 1)
    idx = np.clip(np.searchsorted(edges, C, side="right") - 1, 0, max_panels - 1)
    return [(float(C[idx == i].min()), float(C[idx == i].max())) for i in range(max_panels) if (idx == i).any()]


def iso_flop(table: pd.DataFrame, fit, max_panels: int = MAX_PANELS) -> Figure:
    """Loss vs N (log x) at each compute budget (module docstring).

    At fixed C a bigger model sees fewer tokens (D = C / F), so each curve has a minimum: the
    compute-optimal size for that r. Looping shifts the r curves left (fewer unique parameters).
    """
    fit = load_fit(fit)
    vs = views(table, fit)
    panels = budget_panels(np.concatenate([budgets(v.rows) for v in vs]), max_panels)
    colours = r_colours(all_rows(vs)["r"])
    fig, axes = panel_grid(len(panels))
    for ax, (lo, hi) in zip(axes, panels):
        n_runs = sum(_draw_panel(ax, v, lo, hi, colours) for v in vs)
        log_axis(ax, "x")
        ax.set_xlabel(labels.N)
        ax.set_ylabel(labels.LOSS)
        if lo == hi:
            ax.set_title(f"$C$ = {labels.sci(lo)} FLOPs")
        else:
            ax.set_title(f"$C$ from {labels.sci(lo, 2)} to {labels.sci(hi, 2)} FLOPs\n({n_runs} runs)", fontsize=10)
    law = Line2D([], [], color="0.35", lw=1.2, label=f"fitted {fit.law} law")
    style_legend(fig, colours, view_styles(vs), extra=[law])
    binned = " (budgets binned)" if any(lo != hi for lo, hi in panels) else ""
    suptitle(fig, f"iso-FLOP curves{binned}: runs (points) and the fitted {fit.law} law (lines)")
    return fig


def _draw_panel(ax, view: View, lo: float, hi: float, colours: dict) -> int:
    """The view's runs with budgets in [lo, hi] and the law through them; returns how many runs."""
    b = budgets(view.rows)
    inside = (b >= lo) & (b <= hi)
    at_c = view.rows[inside]
    for r, g in at_c.groupby("r"):
        colour = colours[float(r)]
        ax.scatter(g["N"], g["L"], color=colour, marker=view.marker, s=18, zorder=3)
        if g["N"].nunique() < 2:
            continue
        if lo == hi:
            x, y = law_line(g, view.fit)
        else:  # the law at the bin's median budget, a band over the bin's budgets
            x, y = law_line(g, view.fit, C=float(np.median(b[inside])))
            _, y_lo = law_line(g, view.fit, C=hi)
            _, y_hi = law_line(g, view.fit, C=lo)
            ax.fill_between(x, y_lo, y_hi, color=colour, alpha=0.15, lw=0)
        ax.plot(x, y, color=colour, lw=1.2, ls=view.linestyle)
    return len(at_c)


FIGURES = (FitFigure("iso_flop", 0, lambda t, fit, c, f: iso_flop(t, fit)),)
