"""What a figure of a fit is, for the registry (plots/registry.py): its name (the file's), its place among the
others, and `draw(table, fit, compare, free)`, which returns the Figure or None where the fit does not get it.
A module of plots/ that draws fit figures lists them in `FIGURES`; the registry finds them there."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class FitFigure:
    name: str  # the file's name (iso_flop.png); two entries may share one when at most one applies
    rank: int  # its place in every listing of the figures (the report's, `plot`'s output)
    draw: Callable  # (t, fit, c, f): the runs table, the fit, the --compare fits, the free fit -> Figure | None
    # the tables whose fits get it: "runs" (a law of final points), "curves" (a law of every evaluation along
    # runs, `Law.reads_curves`: its rows are not runs, so the runs-table figures do not apply to it)
    tables: tuple[str, ...] = ("runs",)
