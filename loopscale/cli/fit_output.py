"""What `loopscale fit` prints and writes: the parameter table of each fit, a joint fit's delta-phi lines and
every fit's conditioning checks with their verdict (`loopscale.fit.verdict.verdict_lines`, the one renderer
`compare`, `report` and the notebook use too), and the output
paths (--out, --plot; one per group), checked writable before any fitting and written atomically after it,
each fit JSON before any figure."""

from __future__ import annotations

import argparse
import contextlib
import os
import re
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from loopscale.atomic import atomic_path, check_outputs_apart, check_writable
from loopscale.cli import UsageError
from loopscale.cli.arguments import check_dpi
from loopscale.errors import LoopscaleError
from loopscale.fit.noise_text import noise_lines
from loopscale.fit.result_text import joint_lines, summary_lines
from loopscale.fit.verdict_render import verdict_lines
from loopscale.plots.files import figure_files
from loopscale.plots.inputs import as_looped_table


class FigureFailed(LoopscaleError):
    """A figure failed after its fit JSON was written: one line naming the figure and the JSON, exit 1."""

    exit_code = 1


def write_results(results, out_paths, plot_paths, figures=None, dpi: int = 200) -> int:
    """Print each fit with its conditioning, write each fit JSON (atomically, loopscale/atomic.py: a kill
    mid-write leaves no half file), then the figures: a figure that fails leaves the JSONs and says which
    figure failed (FigureFailed, exit 1). `figures`: the table each figure draws (`figure_table`)."""
    figures = figures or [table for _g, table, _r in results]
    for g, _table, result in results:
        print_result(result, g)
        if result.joint:
            for line in joint_lines(result.joint):
                print(line)
        for line in verdict_lines(result.conditioning):
            print(line)
    written = []
    for (_g, _table, result), path in zip(results, out_paths):
        if path is not None:
            with atomic_path(path, follow_symlinks=True) as tmp:
                result.write_json(tmp)
            print(f"wrote {path}")
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
            print(f"wrote {' and '.join(map(str, files))}")
    return 0


def figure_table(table, plot_path):
    """The table the --plot figure draws, checked before any fitting: the looped-law columns every figure
    reads, filled in for a table without them (a chinchilla table is r = 1, N_once = N, N_rec = 0:
    `plots.inputs.as_looped_table`); None without --plot."""
    if plot_path is None:
        return None
    return as_looped_table(table, source="the table (for --plot)")


def output_paths(args: argparse.Namespace, groups: list) -> tuple[list, list]:
    """--out and --plot for each fit (one per group; [None] for a single fit), checked before any fitting
    starts, so a bad path fails in a second rather than after the whole fit: writable, --plot's format one
    matplotlib writes, no path that is an input table or another output (two groups whose values give one
    file name included)."""
    out_paths = _out_paths(args.out, groups, "--out") if args.out else [None] * len(groups)
    plot_paths = _out_paths(args.plot, groups, "--plot") if args.plot else [None] * len(groups)
    if args.plot:
        _check_plot_format(Path(args.plot))
        check_dpi(args.dpi)
    plot_files = [f for p in plot_paths if p is not None for f in figure_files(p)] or [None] * len(groups)
    _check_distinct(out_paths, plot_files, args.tables)
    _check_writable(out_paths, "--out")
    _check_writable(plot_files, "--plot")
    return out_paths, plot_paths


def _check_plot_format(path: Path) -> None:
    from matplotlib.backend_bases import FigureCanvasBase  # matplotlib: only with --plot

    formats = FigureCanvasBase.get_supported_filetypes()
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in formats:
        raise UsageError(
            f"--plot {path}: {'.' + fmt if fmt else 'no suffix'} is not a figure format; use one of "
            + ", ".join(f".{f}" for f in sorted(formats))
        )


def _check_distinct(out_paths: list, plot_paths: list, tables: list) -> None:
    """No output may overwrite an input table or another output (atomic.check_outputs_apart)."""
    outputs = [("--out", p) for p in out_paths] + [("--plot", p) for p in plot_paths]
    check_outputs_apart(outputs, [("the input table", Path(t)) for t in tables])


def _check_writable(paths: list, what: str) -> None:
    for path in paths:
        if path is not None:
            check_writable(os.path.realpath(path), what)  # where a linked path really writes


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
            raise UsageError(
                f"{what}: groups {seen[name]!r} and {g!r} would both write {base.with_name(name)} (their "
                "values differ only in characters a file name cannot hold); rename one in the table"
            )
        seen[name] = g
        paths.append(base.with_name(name))
    return paths


def _safe(value) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", str(value)) or "group"


def print_result(result, group=None) -> None:
    title = f"{result.law} fit" + (f" — {result.group['column']} = {group}" if group is not None else "")
    t = Table(title=title)
    t.add_column("parameter")
    t.add_column("estimate", justify="right")
    t.add_column("95% CI", justify="right")
    for name, value in result.params.items():
        ci = result.ci95.get(name)
        t.add_row(escape(name), f"{value:.6g}", escape(f"[{ci[0]:.4g}, {ci[1]:.4g}]") if ci else "—")
    console = Console()
    console.print(t)
    for line in summary_lines(result):
        console.print(line, highlight=False, markup=False)  # "[open, 0.61]" is an interval, not a tag
    for line in noise_lines(result.noise):  # the seed sigma, or that the intervals omit seed noise
        console.print(escape(line), highlight=False, soft_wrap=True)
    for w in result.warnings:
        console.print(f"[yellow]warning:[/yellow] {escape(w)}", highlight=False, soft_wrap=True)
