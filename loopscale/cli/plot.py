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
import json
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from loopscale.analysis.conditioning import verdict
from loopscale.analysis.report import conditioning_lines, input_warning, write_report
from loopscale.cli import COMMANDS, UsageError
from loopscale.cli.arguments import DPI, check_dpi
from loopscale.errors import InputError, LoopscaleError
from loopscale.fit.laws.registry import find_law
from loopscale.fit.result import load_fit
from loopscale.fit.runs_table import ColumnMap, drop_top_k
from loopscale.plots.inputs import as_looped_table, free_multipliers, read_table
from loopscale.plots.recipes import fit_name
from loopscale.plots.registry import figures, save_figures
from loopscale.train.collect import collect
from loopscale.train.run_json import TABLE_COLUMNS


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


def parse_columns(text: str | None):
    """A ColumnMap from 'N=Model Size,C=Training FLOP,L=loss' (None: no mapping), or a UsageError."""
    if text is None:
        return None
    known = list(ColumnMap.__dataclass_fields__)
    pairs = {}
    for item in (part.strip() for part in text.split(",")):
        canon, eq, column = (x.strip() for x in item.partition("="))
        if not eq or not canon or not column:
            raise UsageError(f"--columns: {item!r} is not CANON=column (e.g. N=params)")
        if canon not in known:
            raise UsageError(f"--columns: {canon!r} is not one of {', '.join(known)}")
        if canon in pairs:
            raise UsageError(f"--columns: {canon} is mapped twice")
        pairs[canon] = column
    return ColumnMap(**pairs)


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
    return fit, _named(compare), free


def _named(compare: dict) -> dict:
    """The --compare fits by the name their legend shows: their recipe, else the file's stem."""
    out = {}
    for path, f in compare.items():
        name = fit_name(f, Path(path).stem)
        out[name if name not in out else f"{name} ({Path(path).stem})"] = f
    return out


def _draw(table, fit, compare, free):
    try:
        return figures(table, fit, compare, free)
    except (ValueError, KeyError) as err:
        raise UsageError(f"cannot draw the figures: {err}") from err


def _read_table(path, columns=None, law=None):
    """A table file read for the figures: mapped and checked for the fit's law when a mapping is given or the
    law reads no looped columns (`Law.dense`: chinchilla)."""
    known = find_law(law) if law is not None else None
    canonical = columns is not None or (known is not None and known.dense)
    try:
        table = read_table(path, columns, law if canonical else None)
    except InputError as err:  # `fit`'s mapping options are --n-col etc.; here it is --columns
        hint = "map names with --columns, e.g. --columns 'N=Model Size,C=Training FLOP,L=loss'"
        raise InputError(re.sub(r"map names with --[a-z-]+", hint, str(err))) from None
    return table


def _per_recipe(fit) -> bool:
    """Whether the fit is of a per-recipe law (`Law.per_recipe`: a joint fit, whose recipes' tables it recorded)."""
    law = find_law(fit.law)
    return law is not None and law.per_recipe


def _drop_top_k(table, k: int):
    """The merged table without its k highest losses: the rows `fit --drop-top-k k` left out of the same
    tables (one merged table, so a run shared by several sources is counted once)."""
    return drop_top_k(table, k)


def run_plot(args: argparse.Namespace) -> int:
    check_dpi(args.dpi)
    out_dir = Path(args.out)
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"--out {out_dir} exists and is not a directory")
    columns = parse_columns(args.columns)
    for path in args.tables:
        if not Path(path).is_file():  # said before the fit is read: the first argument is the first problem
            _read_table(path)
    fit, compare, free = _load_fits(args)
    table, _ = merge_sources([(_read_table(t, columns, fit.law), None) for t in args.tables])
    if _per_recipe(fit):
        extra = joint_recorded_tables(fit, table, Path(args.fit))
        table = merge_sources([(table, None), *extra])[0] if extra else table
    table = _drop_top_k(table, args.drop_top_k)
    paths = _save(_draw(table, fit, compare, free), out_dir, args.dpi)
    for path in paths:
        print(path)
    return 0


def _save(drawn, out_dir: Path, dpi: int, prefix: str = "") -> list[Path]:
    return save_figures(drawn, out_dir, dpi, prefix=prefix)


def read_source(source: Path, columns=None, law=None):
    """(table, problems): a sweep directory is collected (problems = unfinished runs); a table file
    is read as is (problems = None: a bare table says nothing about missing runs)."""
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
    return _read_table(source, columns, law), None


def merge_sources(parts):
    """(table, problems) of several sources read as one: a run found in several (the baseline's r = 1 runs
    in every recipe's table) is kept once, as `fit T1 T2 --joint` keeps it: same law inputs and, for r > 1,
    the same recipe. problems: every sweep's unfinished runs (None when every source is a bare table)."""
    tables = [t for t, _ in parts if len(t)]
    problems = None if all(p is None for _, p in parts) else [x for _, p in parts for x in (p or [])]
    if len(parts) == 1:
        return parts[0][0], problems
    if not tables:
        return parts[0][0], problems
    table = pd.concat(tables, ignore_index=True)
    key_cols = [c for c in ("N_once", "N_rec", "r", "D", "L") if c in table]
    key = table[key_cols].astype(float)
    if "recipe" in table:
        looped = table["r"].to_numpy(dtype=float) > 1
        key = key.assign(_recipe=np.where(looped, table["recipe"].astype(str), ""))
    return table[~key.duplicated().to_numpy()].reset_index(drop=True), problems


def joint_recorded_tables(fit, table, fit_path: Path) -> list:
    """The tables a joint fit recorded (`fit T1 T2 --joint`), read with the column mapping it recorded, for
    the recipes the given sources lack; [] when none is missing. A UsageError names a recipe still missing."""
    j = fit.joint or {}
    col = j.get("column") or "recipe"

    def missing(t):
        have = set() if col not in t else set(t.loc[t["r"].to_numpy(dtype=float) > 1, col].astype(str))
        return [g for g in j.get("recipes", []) if g not in have]

    lacking = missing(table)
    if not lacking:
        return []
    found = []
    for record in (fit.input or {}).get("tables", []):
        where = [Path(record.get("path", "")), fit_path.parent / record.get("path", "")]
        path = next((p for p in where if p.name and p.is_file()), None)
        if path is None:
            continue
        fields = set(ColumnMap.__dataclass_fields__)
        mapping = {c: s for c, s in (record.get("columns") or {}).items() if c in fields and "(" not in s}
        try:
            found.append((_read_table(path, ColumnMap(**mapping), fit.law), None))
        except (LoopscaleError, ValueError, OSError) as err:  # a recorded table that changed since the fit
            raise UsageError(f"cannot read {path}, a table the joint fit recorded: {err}") from None
    still = missing(merge_sources([(table, None), *found])[0]) if found else lacking
    if still:
        raise UsageError(
            f"the joint fit covers recipes {', '.join(j.get('recipes', []))}, but the runs given have no looped "
            f"runs of {', '.join(still)} (nor do the tables the fit recorded): give its sweep or table too, "
            "e.g. `loopscale report runs/baseline runs/mine --fit joint.json`"
        )
    return found


def report_prefix(out_path: Path) -> str:
    """The figure-file prefix of a report: its file name without the suffix (report.md -> 'report_')."""
    return f"{out_path.stem}_"


def _conditioning(table, fit) -> dict | None:
    """The fit's verdict (analysis/conditioning.py `verdict`): as the record stores it, or computed from the
    table for a looped fit written before fits carried it; a record it cannot be computed for says so."""
    if fit is None:
        return None

    try:
        return verdict(table, fit)
    except (InputError, KeyError, ValueError) as err:
        why = str(err).splitlines()[0] if str(err) else type(err).__name__
        return {
            "checks": [],
            "verdict": f"not measured: {why}" if isinstance(err, InputError) else f"not measured: no checks ({why})",
            "measured": False,
        }


def _load_validation(path: str | None) -> dict | None:
    """A `loopscale validate` record, or None without --validation; one line when it is not one."""
    if path is None:
        return None

    try:
        record = json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        raise UsageError(f"cannot read --validation {path}: {str(err).splitlines()[0]}") from None
    if not isinstance(record, dict) or not {"verdict", "results", "forms", "folds"} <= record.keys():
        raise UsageError(f"--validation {path} is not a `loopscale validate` record")
    return record


def run_report(args: argparse.Namespace) -> int:
    check_dpi(args.dpi)
    out_path = Path(args.out)
    if out_path.is_dir():
        raise UsageError(f"--out {out_path} is a directory; give the Markdown file to write")
    columns = parse_columns(args.columns)
    for source in args.sources:
        if not Path(source).exists():
            raise UsageError(f"{source} does not exist")
    fit, compare, free = _load_fits(args)
    validation = _load_validation(args.validation)
    law = fit.law if fit is not None else None
    parts = [read_source(Path(s), columns, law) for s in args.sources]
    table, problems = merge_sources(parts)
    extra = []
    if fit is not None and _per_recipe(fit) and len(table):
        extra = joint_recorded_tables(fit, table, Path(args.fit))
        table, problems = merge_sources([(table, problems), *extra]) if extra else (table, problems)
    if len(table):
        table = _drop_top_k(table, args.drop_top_k)
    drawn = {}
    if fit is not None:
        if len(table) == 0:
            raise UsageError(f"{', '.join(args.sources)} has no finished runs to draw the fit against")
        drawn = _draw(table, fit, compare, free)
    figures_dir = Path(args.figures) if args.figures else out_path.parent / "figures"
    paths = _save(drawn, figures_dir, args.dpi, report_prefix(out_path)) if drawn else []
    names = [Path(s).resolve().name for s in args.sources]
    title = args.title or f"loopscale report: {' + '.join(names)}"
    cond = _conditioning(table, fit)
    warning = input_warning(fit, [Path(s) for s in args.sources]) if fit is not None else None
    write_report(
        table,
        fit,
        paths,
        out_path,
        problems=problems,
        title=title,
        conditioning=cond,
        drop_top_k=args.drop_top_k,
        warnings=[warning] if warning else [],
        validation=validation,
    )
    if warning:
        print(f"warning: {warning}", file=sys.stderr)
    print(out_path)
    for line in conditioning_lines(cond):  # the checks and, last, the verdict line
        print(line)
    return 0
