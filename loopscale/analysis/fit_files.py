"""The files `loopscale fit` writes: a fit JSON (--out) and a figure (--plot) per fit, NAME.<group>.json per group,
every path checked before the first solve (writable, a figure format matplotlib writes, none an input or another
output); then each fit JSON written atomically (a kill mid-write leaves no half file) before any figure, and a
figure that fails said in one line with the JSONs kept (FigureFailed, exit 1)."""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

from loopscale.atomic import atomic_path, check_outputs_apart, check_writable
from loopscale.errors import InputError, LoopscaleError
from loopscale.plots.files import check_dpi, figure_files
from loopscale.plots.inputs import as_looped_table


class FigureFailed(LoopscaleError):
    """A figure failed after its fit JSON was written: one line naming the figure and the JSON, exit 1."""

    exit_code = 1


def write_fits(results, out_paths, plot_paths, figures, dpi: int, say=print) -> None:
    """Each fit JSON of `results` ((group, table, FitResult) each) at its --out path, then each figure at its --plot
    path, drawn from its table in `figures` (`figure_table`); `say` hears each file written."""
    written = []
    for (_g, _table, result), path in zip(results, out_paths):
        if path is not None:
            with atomic_path(path, follow_symlinks=True) as tmp:
                result.write_json(tmp)
            say(f"wrote {path}")
            written.append(str(path))
    for (_g, _table, result), path, table in zip(results, plot_paths, figures):
        if path is not None:
            from loopscale.plots.registry import plot_fit  # matplotlib: only when --plot draws

            files = figure_files(path)
            try:
                with contextlib.ExitStack() as stack:  # a linked --plot keeps its link
                    plot_fit(
                        table, result, [stack.enter_context(atomic_path(f, follow_symlinks=True)) for f in files], dpi
                    )
            except Exception as err:  # the fit is kept whatever the figure does
                kept = f"the fit is written: {', '.join(written)}" if written else "no fit JSON was asked for (--out)"
                why = str(err).strip().splitlines()[0] if str(err).strip() else ""
                raise FigureFailed(
                    f"the predicted-vs-observed figure {path} failed ({type(err).__name__}: {why}); {kept}"
                ) from None
            say(f"wrote {' and '.join(map(str, files))}")


def figure_table(table, plot_path):
    """The table the --plot figure draws, checked before any fitting: the looped-law columns every figure
    reads, filled in for a table without them (a chinchilla table is r = 1, N_once = N, N_rec = 0:
    `plots.inputs.as_looped_table`); None without --plot."""
    if plot_path is None:
        return None
    return as_looped_table(table, source="the table (for --plot)")


def output_paths(out, plot, dpi: int, tables: list, groups: list) -> tuple[list, list]:
    """--out and --plot for each fit (one per group; [None] for a single fit), checked before any fitting
    starts, so a bad path fails in a second rather than after the whole fit: writable, --plot's format one
    matplotlib writes, no path that is an input table or another output (two groups whose values give one
    file name included)."""
    out_paths = _out_paths(out, groups, "--out") if out else [None] * len(groups)
    plot_paths = _out_paths(plot, groups, "--plot") if plot else [None] * len(groups)
    if plot:
        _check_plot_format(Path(plot))
        check_dpi(dpi)
    plot_files = [f for p in plot_paths if p is not None for f in figure_files(p)] or [None] * len(groups)
    outputs = [("--out", p) for p in out_paths] + [("--plot", p) for p in plot_files]
    check_outputs_apart(outputs, [("the input table", Path(t)) for t in tables])  # none an input or another output
    for what, path in outputs:
        if path is not None:
            check_writable(os.path.realpath(path), what)  # where a linked path really writes
    return out_paths, plot_paths


def _check_plot_format(path: Path) -> None:
    from matplotlib.backend_bases import FigureCanvasBase  # matplotlib: only with --plot

    formats = FigureCanvasBase.get_supported_filetypes()
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in formats:
        raise InputError(
            f"--plot {path}: {'.' + fmt if fmt else 'no suffix'} is not a figure format; use one of "
            + ", ".join(f".{f}" for f in sorted(formats))
        )


def _out_paths(path: str, groups: list, what: str) -> list[Path]:
    """PATH for a single fit; PATH with .<group> before the suffix per group (UsageError when two groups'
    values give one file name, which would overwrite each other)."""
    base = Path(path)
    if groups == [None]:
        return [base]
    paths, seen = [], {}
    for g in groups:
        name = f"{base.stem}.{_safe(g)}{base.suffix}"
        if name in seen:
            raise InputError(
                f"{what}: groups {seen[name]!r} and {g!r} would both write {base.with_name(name)} (their "
                "values differ only in characters a file name cannot hold); rename one in the table"
            )
        seen[name] = g
        paths.append(base.with_name(name))
    return paths


def _safe(value) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", str(value)) or "group"
