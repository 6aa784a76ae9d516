"""`loopscale plot` and `loopscale report`: diagnostic figures and a Markdown report of a sweep.

    loopscale plot runs.csv fits/baseline.json --compare fits/tbptt.json fits/hyper.json \
        --free fits/free.json --out plots/
    loopscale report runs/isodepth_cpu --fit fits/baseline.json --out runs/isodepth_cpu/report.md

Both read what `loopscale collect` and `loopscale fit --out` wrote; neither fits anything. Every input
is read and every figure drawn before anything is written, so bad input writes nothing.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from loopscale.cli import UsageError


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "plot",
        help="write the diagnostic figures (iso-FLOP, collapse, phi profile, residuals, ...) as PNG",
        description="Diagnostic figures of a fitted law from a runs table and a fit JSON (no fitting).",
    )
    p.add_argument("table", help="runs table (CSV or Parquet, as `loopscale collect` writes it)")
    p.add_argument("fit", help="fit JSON from `loopscale fit --out`")
    _figure_options(p)
    p.add_argument("--out", required=True, help="directory for the PNG files")
    p.set_defaults(func=run_plot)

    r = subparsers.add_parser(
        "report",
        help="write a short Markdown report of a sweep: fitted law with CIs, figures, runs, failures",
        description="A Markdown report of a sweep directory (collected here) or a runs table.",
    )
    r.add_argument("source", help="sweep directory (its run.json records are collected) or a runs table")
    r.add_argument("--fit", default=None, help="fit JSON from `loopscale fit --out` (figures need it)")
    _figure_options(r)
    r.add_argument(
        "--figures", default=None, help="directory for the figures (default: a 'figures' folder beside the report)"
    )
    r.add_argument("--title", default=None, help="report title (default: from the source name)")
    r.add_argument("--out", required=True, help="the Markdown file to write")
    r.set_defaults(func=run_report)


def _figure_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--compare",
        nargs="+",
        default=[],
        metavar="FIT.json",
        help="fits of other recipes, for the delta-phi figure",
    )
    p.add_argument("--free", default=None, metavar="FREE.json", help="a looped-free fit, for the k_r vs r^phi panel")
    p.add_argument("--dpi", type=int, default=110, help="PNG resolution (default 110)")


def _load_fits(args):
    """(fit, compare fits, free fit) with a UsageError naming the bad file."""
    from loopscale.plots import free_multipliers, load_fit

    fit = load_fit(args.fit) if args.fit else None
    compare = [load_fit(path) for path in args.compare]
    free = load_fit(args.free) if args.free else None
    if free is not None:
        free_multipliers(free)  # checks it is a looped-free fit
    if compare and fit is None:
        raise UsageError("--compare needs --fit")
    for f in ([fit] if fit is not None else []) + compare:
        if compare and "phi" not in f.params:
            raise UsageError(f"--compare needs looped fits with phi; got a {f.law!r} fit")
    return fit, compare, free


def _draw(table, fit, compare, free):
    from loopscale.plots import figures

    try:
        return figures(table, fit, compare, free)
    except (ValueError, KeyError) as err:
        raise UsageError(f"cannot draw the figures: {err}") from err


def _save(drawn, out_dir: Path, dpi: int) -> list[Path]:
    from loopscale.plots import save_figures

    return save_figures(drawn, out_dir, dpi)


def _check_dpi(dpi: int) -> None:
    if not 10 <= dpi <= 1000:
        raise UsageError(f"--dpi must be between 10 and 1000; got {dpi}")


def _read_table(path):
    from loopscale.plots import read_table

    return read_table(path)


def run_plot(args: argparse.Namespace) -> int:
    _check_dpi(args.dpi)
    out_dir = Path(args.out)
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"--out {out_dir} exists and is not a directory")
    table = _read_table(args.table)
    fit, compare, free = _load_fits(args)
    paths = _save(_draw(table, fit, compare, free), out_dir, args.dpi)
    for path in paths:
        print(path)
    return 0


def read_source(source: Path):
    """(table, problems): a sweep directory is collected (problems = unfinished runs); a table file
    is read as is (problems = None: a bare table says nothing about missing runs)."""
    import pandas as pd

    from loopscale.plots import as_looped_table
    from loopscale.train.records import TABLE_COLUMNS, collect

    if source.is_dir():
        rows, problems = collect(source)
        if not rows and not problems:
            raise UsageError(f"{source} holds no runs (no run.json, checkpoint or Hydra config below it)")
        table = pd.DataFrame(rows, columns=TABLE_COLUMNS)
        if rows:
            table = as_looped_table(table, source=f"runs collected from {source}")
        return table, problems
    if not source.exists():
        raise UsageError(f"{source} does not exist")
    return _read_table(source), None


def run_report(args: argparse.Namespace) -> int:
    from loopscale.analysis.report import write_report

    _check_dpi(args.dpi)
    out_path = Path(args.out)
    if out_path.is_dir():
        raise UsageError(f"--out {out_path} is a directory; give the Markdown file to write")
    source = Path(args.source)
    table, problems = read_source(source)
    fit, compare, free = _load_fits(args)
    drawn = {}
    if fit is not None:
        if len(table) == 0:
            raise UsageError(f"{source} has no finished runs to draw the fit against")
        drawn = _draw(table, fit, compare, free)
    figures_dir = Path(args.figures) if args.figures else out_path.parent / "figures"
    paths = _save(drawn, figures_dir, args.dpi) if drawn else []
    title = args.title or f"loopscale report: {source.resolve().name}"
    write_report(table, fit, paths, out_path, problems=problems, title=title)
    print(out_path)
    return 0
