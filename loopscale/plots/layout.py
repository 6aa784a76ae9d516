"""Figure layout shared by every figure: one colour per r, a grid of panels, and the note an empty panel
shows. Figures are built with `matplotlib.figure.Figure` (no pyplot state), so they work under any
backend and in notebooks alike."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from matplotlib.figure import Figure


def r_colours(r_values: Iterable[float]) -> dict[float, tuple]:
    """One colour per r, stable across figures (matplotlib's tab10 cycle in increasing r)."""
    from matplotlib import colormaps

    cmap = colormaps["tab10"]
    return {r: cmap(i % 10) for i, r in enumerate(sorted(set(float(v) for v in r_values)))}


def explain_empty(ax, text: str) -> None:
    """A panel that explains why it is empty instead of silently dropping it."""
    ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True, transform=ax.transAxes, fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([])


def panel_grid(n: int, ncols: int = 3, size=(4.2, 3.4)) -> tuple[Figure, list]:
    ncols = max(1, min(ncols, n))
    nrows = int(np.ceil(n / ncols))
    fig = Figure(figsize=(size[0] * ncols, size[1] * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel().tolist()
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes[:n]
