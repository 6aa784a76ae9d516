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
    joint_recorded_tables,
    merge_sources,
    named_fits,
    per_recipe,
    read_source,
    read_table_file,
    read_validation,
)
from loopscale.atomic import check_outputs_apart
from loopscale.cli import COMMANDS, UsageError
from loopscale.cli.arguments import DPI, check_dpi
from loopscale.fit.result import load_fit
from loopscale.fit.runs_table import ColumnMap, drop_top_k
from loopscale.plots.inputs import free_multipliers
from loopscale.plots.registry import FIGURE_NAMES, FORMATS, figures, save_figures


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


def _load_fits(args):
    """(fit, compare fits, free fit) with a UsageError naming the bad file."""
    fit = load_fit(args.fit) if args.fit else None
    compare = {path: load_fit(path) for path in args.compare}
    free = load_fit(args.free) if args.free else None
    if free is not None:
        free_multipliers(free)  # checks it is a looped-free fit
    if compare and fit is None:
        raise UsageError("--compare needs --fit")
    for f in ([fit] if fit is not None else []) + list(compare.values()):
        if compare and "phi" not in f.params:
            raise UsageError(f"--compare needs looped fits with phi; got a {f.law!r} fit")
    return fit, named_fits(compare), free


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
    check_outputs_apart(_figure_outputs(out_dir), _inputs(args, args.tables))
    fit, compare, free = _load_fits(args)
    table, _ = merge_sources([(read_table_file(t, columns, fit.law), None) for t in args.tables])
    if per_recipe(fit):
        extra = joint_recorded_tables(fit, table, Path(args.fit))
        table = merge_sources([(table, None), *extra])[0] if extra else table
    table = drop_top_k(table, args.drop_top_k)
    paths = _save(_draw(table, fit, compare, free), out_dir, args.dpi)
    for path in paths:
        print(path)
    return 0


def _figure_outputs(out_dir: Path, prefix: str = "") -> list[tuple[str, Path]]:
    """Every file a figure may be written to (plots/registry.py names them): none may be an input."""
    return [("a figure", out_dir / f"{prefix}{name}.{fmt}") for name in FIGURE_NAMES for fmt in FORMATS]


def _inputs(args, tables) -> list[tuple[str, Path]]:
    """The files plot / report read: the tables, the fit and the fits beside it, the validation record."""
    found = [("the input table", Path(t)) for t in tables if Path(t).is_file()]
    found += [("the fit", Path(args.fit))] if args.fit else []
    found += [("a --compare fit", Path(p)) for p in args.compare]
    found += [("the --free fit", Path(args.free))] if args.free else []
    found += [("the --validation record", Path(v)) for v in [getattr(args, "validation", None)] if v]
    return found


def _save(drawn, out_dir: Path, dpi: int, prefix: str = "") -> list[Path]:
    return save_figures(drawn, out_dir, dpi, prefix=prefix)


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
    outputs = [("--out", out_path), *_figure_outputs(figures_dir, report_prefix(out_path))]
    check_outputs_apart(outputs, _inputs(args, args.sources))
    fit, compare, free = _load_fits(args)
    validation, other_fit = read_validation(args.validation, fit, args.fit, args.allow_other_fit)
    law = fit.law if fit is not None else None
    parts = [read_source(Path(s), columns, law) for s in args.sources]
    table, problems = merge_sources(parts)
    extra = []
    if fit is not None and per_recipe(fit) and len(table):
        extra = joint_recorded_tables(fit, table, Path(args.fit))
        table, problems = merge_sources([(table, problems), *extra]) if extra else (table, problems)
    if len(table):
        table = drop_top_k(table, args.drop_top_k)
    drawn = {}
    if fit is not None:
        if len(table) == 0:
            raise UsageError(f"{', '.join(args.sources)} has no finished runs to draw the fit against")
        drawn = _draw(table, fit, compare, free)
    paths = _save(drawn, figures_dir, args.dpi, report_prefix(out_path)) if drawn else []
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
