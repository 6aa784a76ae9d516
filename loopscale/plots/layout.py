"""Figure layout shared by every figure: one colour per r, one marker and line style per recipe, a grid of
panels with nothing left empty, log axes whose tick labels do not collide, and the figure-level legend.
Figures are built with `matplotlib.figure.Figure` (no pyplot state), so they work under any backend and in
notebooks alike."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Sequence

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import Formatter, FuncFormatter, LogLocator

MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
LINESTYLES = ("-", "--", "-.", ":")


def r_colours(r_values: Iterable[float]) -> dict[float, tuple]:
    """One colour per r, stable across figures (matplotlib's tab10 cycle in increasing r)."""
    cmap = colormaps["tab10"]
    return {r: cmap(i % 10) for i, r in enumerate(sorted(set(float(v) for v in r_values)))}


def recipe_styles(labels: Sequence) -> dict:
    """{label: (marker, line style)} in the order given: the first recipe gets circles and solid lines."""
    return {g: (MARKERS[i % len(MARKERS)], LINESTYLES[i % len(LINESTYLES)]) for i, g in enumerate(labels)}


def r_label(r: float) -> str:
    return f"$r = {float(r):g}$"


def explain_empty(ax, text: str) -> None:
    """A note in a panel that has no data of its own (a figure keeps such a panel only when it is the
    figure's one panel: otherwise the panel is dropped)."""
    ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True, transform=ax.transAxes, fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([])


def panel_grid(n: int, ncols: int = 3, size=(4.2, 3.4)) -> tuple[Figure, list]:
    """A figure with n panels in rows of at most ncols; no unused axes are left in the figure."""
    ncols = max(1, min(ncols, n))
    nrows = int(np.ceil(n / ncols))
    fig = Figure(figsize=(size[0] * ncols, size[1] * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel().tolist()
    for ax in axes[n:]:
        ax.remove()
    return fig, axes[:n]


def style_legend(fig: Figure, colours: dict[float, tuple], styles: dict | None = None, extra=()) -> None:
    """One legend for the whole figure, outside the panels: a colour per r, a marker (and line style) per
    recipe when there are several, and `extra` handles (e.g. the law's curve)."""
    handles = [Line2D([], [], color=c, marker="o", ls="-", label=r_label(r)) for r, c in sorted(colours.items())]
    if styles and len(styles) > 1:
        handles += [Line2D([], [], color="0.35", marker=m, ls=ls, label=str(g)) for g, (m, ls) in styles.items()]
    handles += list(extra)
    # below the panels, in rows as wide as the figure: to their right it shared the top edge with the
    # suptitle (and covered its end on a one-panel figure) and pressed against the image's right edge
    columns = max(1, min(len(handles), int(fig.get_figwidth() / LEGEND_ENTRY_IN)))
    fig.legend(handles=handles, loc="outside lower center", ncols=columns, fontsize=8, frameon=False)


LEGEND_ENTRY_IN = 1.1  # width of one legend entry (marker and "r = 8" / a recipe name at 8 pt), inches


def suptitle(fig: Figure, text: str, fontsize: float = 12.0) -> None:
    """The figure's title, wrapped to the figure's width (a one-panel figure is narrower than a long title)."""
    chars = max(20, int(fig.get_figwidth() * 72 / (0.55 * fontsize)))  # ~0.55 em per character
    fig.suptitle("\n".join(textwrap.wrap(text, chars)), fontsize=fontsize)


class SparseLogFormatter(Formatter):
    """Labels on a log axis that never crowd: decades (10^k) when two or more are in view, otherwise the
    decade and a few mantissas (1, 2, 5, or 1-9 on a very short axis) as m x 10^k; other ticks unlabelled."""

    def __call__(self, x, pos=None) -> str:
        if x <= 0 or not np.isfinite(x):
            return ""
        lo, hi = sorted(self.axis.get_view_interval())
        lo = max(lo, 1e-300)
        span = np.log10(hi / lo)
        decades = np.floor(np.log10(hi)) - np.ceil(np.log10(lo)) + 1
        exp = int(np.floor(np.log10(x) + 1e-9))
        mant = int(round(x / 10.0**exp))
        if not np.isclose(x, mant * 10.0**exp, rtol=1e-6):
            return ""
        if decades >= 2:
            allowed = {1}
        elif span > 0.6:
            allowed = {1, 2, 5}
        elif span > 0.3:
            allowed = {1, 2, 3, 5}
        else:
            allowed = set(range(1, 10))
        if mant not in allowed:
            return ""
        return f"$10^{{{exp}}}$" if mant == 1 else f"${mant}\\times10^{{{exp}}}$"


def log_axis(ax, which: str = "x", base: int = 10) -> None:
    """A log axis with ticks at every mantissa and `SparseLogFormatter` labels on major and minor ticks."""
    axis = ax.xaxis if which == "x" else ax.yaxis
    (ax.set_xscale if which == "x" else ax.set_yscale)("log", base=base)
    if base != 10:
        return
    axis.set_major_locator(LogLocator(base=10, numticks=12))
    axis.set_minor_locator(LogLocator(base=10, subs=np.arange(2, 10), numticks=12))
    axis.set_major_formatter(SparseLogFormatter())
    axis.set_minor_formatter(SparseLogFormatter())


def scaled_y_label(ax, label: str) -> None:
    """Label the y axis with its common power of ten ("objective - minimum (x 10^-5)") instead of
    matplotlib's offset text, which sits above the axes where a panel title covers it. Call after set_ylim."""
    top = max(abs(v) for v in ax.get_ylim())
    power = int(np.floor(np.log10(top))) if top > 0 and np.isfinite(top) else 0
    if -2 <= power <= 3:  # plain numbers read fine
        ax.set_ylabel(label)
        return
    scale = 10.0**power
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v / scale:g}"))
    ax.set_ylabel(rf"{label} ($\times 10^{{{power}}}$)")
