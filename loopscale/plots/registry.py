"""Which figures a fit gets, and writing them: `figures` draws every one that applies, `save_all` and
`save_figures` write each as PNG (DPI dots per inch) and PDF, `plot_fit` writes the one `loopscale fit
--plot` asks for (as PNG and PDF too: plots/files.py figure_files); each figure through plots/files.py
write_figure (atomic files, the layout solved once per figure)."""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from loopscale import plots as package
from loopscale.fit.laws.registry import law_class
from loopscale.fit.result import load_fit

from .figure import FitFigure
from .files import DPI, write_figure
from .single_fit import predicted_vs_observed

FORMATS = ("png", "pdf")  # every figure as a bitmap for the report and a vector file for a paper


@functools.cache
def fit_figures() -> tuple[FitFigure, ...]:
    """Every fit figure of plots/: the `FIGURES` of each module that has them, in rank order (found on first use;
    adding a figure is adding its entry to the module that draws it)."""
    found = []
    for info in pkgutil.iter_modules(package.__path__):
        found += getattr(importlib.import_module(f"{package.__name__}.{info.name}"), "FIGURES", ())
    return tuple(sorted(found, key=lambda f: (f.rank, f.name)))


FIGURE_NAMES = tuple(dict.fromkeys(f.name for f in fit_figures()))


def figure_paths(out_dir: Path, prefix: str = "") -> list[tuple[str, Path]]:
    """Every file a figure may be written to in `out_dir` (`save_figures` with `prefix`): none may be an input."""
    return [("a figure", Path(out_dir) / f"{prefix}{name}.{fmt}") for name in FIGURE_NAMES for fmt in FORMATS]


def figure_names(tables: str) -> tuple[str, ...]:
    """The names of the figures a fit of `tables` ("runs" or "curves", `FitFigure.tables`) can get, in rank order:
    a curves fit's rows are evaluations along runs, not runs, so it gets its curves and phi's evidence, not the
    runs-table figures (iso-FLOP, collapse, residuals by budget, N*)."""
    return tuple(dict.fromkeys(f.name for f in fit_figures() if tables in f.tables))


def figures(table: pd.DataFrame, fit, compare=(), free=None) -> dict[str, Figure]:
    """Every figure that applies (each entry of `fit_figures` says, from the fit's law: `Law.per_recipe`,
    `Law.compute_optimal`): phi figures need a fit with phi or a joint fit (phi_profile only when the record has
    a profile or bootstrap replicates), delta-phi needs `compare` fits (a sequence, or a mapping name -> fit) or a
    joint fit. A joint fit is drawn recipe by recipe (`views`), its delta-phi figures from its own tests. A fit of
    loss curves (`Law.reads_curves`) gets the entries whose `tables` hold "curves" (`figure_names`)."""
    fit = load_fit(fit)
    tables = "curves" if law_class(fit.law).reads_curves else "runs"
    out = {}
    for entry in fit_figures():
        if tables not in entry.tables:
            continue
        if entry.name not in out and (drawn := entry.draw(table, fit, compare, free)) is not None:
            out[entry.name] = drawn
    return out


def save_all(
    table: pd.DataFrame, fit, out_dir, compare=(), free=None, dpi: int = DPI, formats: Sequence[str] = FORMATS
) -> list[Path]:
    """Write every figure that applies as out_dir/<name>.<format>; return the paths (figures in
    FIGURE_NAMES order, each in `formats` order)."""
    drawn = figures(table, fit, compare, free)  # draw everything before writing anything
    return save_figures(drawn, out_dir, dpi, formats)


def save_figures(
    drawn: Mapping[str, Figure], out_dir, dpi: int = DPI, formats: Sequence[str] = FORMATS, prefix: str = ""
) -> list[Path]:
    """Write each figure as out_dir/<prefix><name>.<format> (PNG at `dpi`); return the paths in the mapping's
    order, each figure's formats in `formats` order."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, fig in drawn.items():
        paths += write_figure(fig, [out_dir / f"{prefix}{name}.{fmt}" for fmt in formats], dpi)
    return paths


def plot_fit(table: pd.DataFrame, fit, paths, dpi: int = DPI) -> Path:
    """Write `predicted_vs_observed` to each of `paths` (one path or several), in the format its suffix names
    (what `loopscale fit --plot PATH` calls, with figure_files(PATH)), PNG at `dpi`. A plain table (no r
    column: a chinchilla fit) is drawn as one r = 1 series. Returns the first path."""
    paths = [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]
    return write_figure(predicted_vs_observed(table, fit), paths, dpi)[0]
