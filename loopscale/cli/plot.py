"""`loopscale plot` and `loopscale report`: diagnostic figures and a Markdown report of a sweep.

    loopscale plot runs.csv fits/baseline.json --compare fits/tbptt.json fits/hyper.json \
        --free fits/free.json --out plots/
    loopscale plot runs/isodepth/runs.csv runs/isodepth_tbptt/runs.csv fits/joint.json --out plots/joint/
    loopscale plot chinchilla.csv fits/chinchilla.json --columns "N=Model Size,C=Training FLOP,L=loss" \
        --drop-top-k 5 --out plots/
    loopscale report runs/isodepth_cpu --fit fits/baseline.json --out runs/isodepth_cpu/report.md
    loopscale report runs/baseline runs/mine --fit fits/joint.json --out reports/joint.md

Both read what `loopscale collect` and `loopscale fit --out` wrote; neither fits anything. Every input
is read and every figure drawn before anything is written, so bad input writes nothing. Figures are
written as PNG (--dpi, default 200) and PDF; a report's figures are named after the report
(`reports/figures/joint_iso_flop.png`), so two reports in one folder keep their own figures.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from loopscale.analysis.report import conditioning_lines, input_warning, write_report
from loopscale.analysis.report_inputs import (
    fit_verdict,
    input_files,
    plot_table,
    read_fits,
    read_table_file,
    read_validation,
    report_table,
)
from loopscale.atomic import check_outputs_apart
from loopscale.cli import COMMANDS, UsageError
from loopscale.fit.runs_table import ColumnMap
from loopscale.plots.files import DPI, check_dpi
from loopscale.plots.registry import figure_paths, figures, save_figures


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "plot",
        help=COMMANDS["plot"].help,
        description="Diagnostic figures of a fitted law from a runs table and a fit JSON (no fitting).",
    )
    p.add_argument(
        "tables",
        nargs="+",
        metavar="table",
        help="runs table (CSV, Parquet or JSON lines, as `loopscale collect` writes it); several are read as "
        "one (a joint fit's recipe tables, as `fit T1 T2 --joint` read them)",
    )
    p.add_argument("fit", help="fit JSON from `loopscale fit --out`")
    _figure_options(p)
    p.add_argument("--out", required=True, help="directory for the figures (PNG and PDF)")
    p.set_defaults(func=run_plot)

    r = subparsers.add_parser(
        "report",
        help=COMMANDS["report"].help,
        description="A Markdown report of sweep directories (collected here) or runs tables. Several sources "
        "are read as one table (a joint fit's recipe tables as `fit T1 T2 --joint` read them); a joint fit "
        "whose recipes the sources lack reads the tables it recorded.",
    )
    r.add_argument(
        "sources", nargs="+", metavar="source", help="sweep directory (its run.json records are collected) or table"
    )
    r.add_argument("--fit", default=None, help="fit JSON from `loopscale fit --out` (figures need it)")
    _figure_options(r)
    r.add_argument(
        "--figures",
        default=None,
        help="directory for the figures (default: a 'figures' folder beside the report); each file is "
        "named <report name>_<figure>.png/.pdf",
    )
    r.add_argument("--title", default=None, help="report title (default: from the source name)")
    r.add_argument(
        "--validation", default=None, metavar="V.json", help="a `loopscale validate --out` record: its section"
    )
    r.add_argument(
        "--allow-other-fit",
        action="store_true",
        help="show a --validation record of another fit than --fit (refused by default), saying so in the report",
    )
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
    p.add_argument("--dpi", type=int, default=DPI, help=f"PNG resolution (default {DPI}); a PDF is written too")
    p.add_argument(
        "--columns",
        default=None,
        metavar="MAP",
        help="column mapping for a table written by another tool, CANON=column pairs separated by commas, "
        "e.g. 'N=Model Size,C=Training FLOP,L=loss' (CANON: r, N_once, N_rec, N, D, C, L); only the "
        "columns the fit's law reads are needed (a chinchilla fit: N, D or C, L)",
    )
    p.add_argument(
        "--drop-top-k",
        type=int,
        default=0,
        metavar="K",
        help="leave out the K highest-loss rows of the tables read as one (as Besiroglu et al. 2024 did with the "
        "Chinchilla points); give the K the fit was made with",
    )


def _draw(table, fit, compare, free):
    try:
        return figures(table, fit, compare, free)
    except (ValueError, KeyError) as err:
        raise UsageError(f"cannot draw the figures: {err}") from err


def run_plot(args: argparse.Namespace) -> int:
    check_dpi(args.dpi)
    out_dir = Path(args.out)
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"--out {out_dir} exists and is not a directory")
    columns = ColumnMap.parse(args.columns)
    for path in args.tables:
        if not Path(path).is_file():  # said before the fit is read: the first argument is the first problem
            read_table_file(path)
    check_outputs_apart(figure_paths(out_dir), input_files(args.tables, args.fit, args.compare, args.free))
    fit, compare, free = read_fits(args.fit, args.compare, args.free)
    table = plot_table(args.tables, columns, fit, args.fit, args.drop_top_k)
    paths = save_figures(_draw(table, fit, compare, free), out_dir, args.dpi)
    for path in paths:
        print(path)
    return 0


def report_prefix(out_path: Path) -> str:
    """The figure-file prefix of a report: its file name without the suffix (report.md -> 'report_')."""
    return f"{out_path.stem}_"


def run_report(args: argparse.Namespace) -> int:
    check_dpi(args.dpi)
    out_path = Path(args.out)
    if out_path.is_dir():
        raise UsageError(f"--out {out_path} is a directory; give the Markdown file to write")
    columns = ColumnMap.parse(args.columns)
    for source in args.sources:
        if not Path(source).exists():
            raise UsageError(f"{source} does not exist")
    figures_dir = Path(args.figures) if args.figures else out_path.parent / "figures"
    outputs = [("--out", out_path), *figure_paths(figures_dir, report_prefix(out_path))]
    inputs = input_files(args.sources, args.fit, args.compare, args.free, args.validation)
    check_outputs_apart(outputs, inputs)
    fit, compare, free = read_fits(args.fit, args.compare, args.free)
    validation, other_fit = read_validation(args.validation, fit, args.fit, args.allow_other_fit)
    table, problems = report_table(args.sources, columns, fit, args.fit, args.drop_top_k)
    drawn = {}
    if fit is not None:
        if len(table) == 0:
            raise UsageError(f"{', '.join(args.sources)} has no finished runs to draw the fit against")
        drawn = _draw(table, fit, compare, free)
    paths = save_figures(drawn, figures_dir, args.dpi, prefix=report_prefix(out_path)) if drawn else []
    names = [Path(s).resolve().name for s in args.sources]
    title = args.title or f"loopscale report: {' + '.join(names)}"
    cond = fit_verdict(table, fit)
    warning = input_warning(fit, [Path(s) for s in args.sources]) if fit is not None else None
    warnings = [w for w in (warning, other_fit) if w]
    write_report(
        table,
        fit,
        paths,
        out_path,
        problems=problems,
        title=title,
        conditioning=cond,
        drop_top_k=args.drop_top_k,
        warnings=warnings,
        validation=validation,
    )
    for line in warnings:
        print(f"warning: {line}", file=sys.stderr)
    print(out_path)
    for line in conditioning_lines(cond):  # the checks and, last, the verdict line
        print(line)
    return 0
