"""`loopscale validate FIT.json [TABLES...]`: does the fitted law hold where it was not fitted?

    loopscale validate fits/baseline.json                        # the table the fit recorded
    loopscale validate fits/baseline.json runs.csv --out fits/baseline.validate.json --jobs 2

Leave-one-budget-out, leave-one-r-out, rival forms with AICc / BIC, Approach 2, the lr grid (rows with an
`lr_scale` column, from hydra/sweeper=lr_grid) and the counting conventions, ending in one verdict line
(loopscale/fit/validation/). Prints the Markdown; `--out X.json` also writes X.md and the held-out figure X.png,
all three together or none; none of them may be an input. The table must be the one the fit was made from (its
sha256, as the fit recorded it): a changed table is refused unless --allow-changed-table, and then the output says
so. Every input is checked before the first fit (one line, exit 2, nothing written).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from loopscale.atomic import atomic_paths, check_outputs_apart, check_writable, json_safe
from loopscale.cli import UsageError
from loopscale.errors import InputError, LoopscaleError, not_one_of
from loopscale.fit.laws.form import BASE_USER
from loopscale.fit.laws.registry import find_law
from loopscale.fit.resample import resolve_jobs
from loopscale.fit.result import FitResult, read_fit_json
from loopscale.fit.runs_table import table_warnings
from loopscale.fit.validation.inputs import changed_table_line, point_means, table_check, validation_tables
from loopscale.fit.validation.run import validate
from loopscale.fit.validation.text import markdown
from loopscale.plots.validation import held_out_figure


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "validate",
        help="out-of-sample checks of a fit: held-out budgets and r, rival forms, the lr confound, conventions",
        description="Refit the law without each compute budget and without each r > 1 and predict what was left "
        "out; fit rival forms (a free k_r per r, E pinned, an N x D term, MSE instead of Huber) and score them "
        "with AICc / BIC; cross-check the r = 1 exponents by Approach 2; read an lr grid; refit under other "
        "counting conventions. Ends in one verdict line.",
    )
    p.add_argument("fit", help="fit JSON from `loopscale fit --out` (a single-table law)")
    p.add_argument(
        "tables", nargs="*", help="runs table(s) (CSV, .parquet, .jsonl; several are stacked); default: the fit's own"
    )
    p.add_argument("--out", metavar="PATH.json", help="write the record here, and PATH.md and PATH.png beside it")
    p.add_argument(
        "--jobs", type=int, default=None, metavar="N", help="worker processes for the folds (default: every core)"
    )
    p.add_argument("--starts", type=int, default=16, metavar="K", help="starts refined in each whole-table fit")
    p.add_argument("--pin-E", type=float, default=None, metavar="E", help="the pinned-E form's E (default: the fit's)")
    p.add_argument(
        "--column",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a column the counting conventions read, one value for every row where the table lacks it "
        "(e.g. seq_len=2048, vocab_size=32001, injection=concat, depth=20)",
    )
    p.add_argument("--no-conventions", action="store_true", help="skip the counting conventions")
    p.add_argument(
        "--allow-changed-table",
        action="store_true",
        help="validate on a table other than the one the fit was made from (its sha256 differs: rows edited, added "
        "or removed since the fit); refused by default, and said in the output when allowed",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    if args.starts < 1:
        raise UsageError(f"--starts must be >= 1; got {args.starts}")
    if args.pin_E is not None and not args.pin_E > 0:
        raise UsageError(f"--pin-E must be > 0; got {args.pin_E}")
    jobs = resolve_jobs(args.jobs)
    fill = _columns(args.column)
    fit = _read_fit(args.fit)

    table, lr_table, paths = validation_tables(fit, args.tables)
    outputs = None
    if args.out:
        out = Path(args.out)
        if out.suffix.lower() != ".json":
            raise UsageError(f"--out must name a .json file (the .md and .png go beside it); got {out}")
        outputs = [out, out.with_suffix(".md"), out.with_suffix(".png")]
        inputs = [("the fit", Path(args.fit)), *(("the input table", p) for p in paths)]
        check_outputs_apart([("--out", p) for p in outputs], inputs)
        for path in outputs:
            check_writable(path, "--out")
    check = table_check(fit, paths)
    if check["changed"] and not args.allow_changed_table:
        raise UsageError(
            f"{changed_table_line(check)}; refit it, or give --allow-changed-table to validate the old fit on it"
        )
    warnings = table_warnings(table, fit.law)  # copied rows, a seed counted twice: said as `fit` says them
    for line in warnings:
        print(f"warning: {line}", file=sys.stderr)
    table, repeats = point_means(table)  # seed repeats and copies: one observation per point

    progress = sys.stderr if sys.stderr.isatty() else None
    record = validate(
        table,
        fit,
        jobs=jobs,
        progress=progress,
        n_refine=args.starts,
        pin_E=args.pin_E,
        lr_table=lr_table,
        conventions=not args.no_conventions,
        fill=fill,
    )
    record.fit["json"] = str(args.fit)  # which fit this validates (report --validation checks it)
    checked = {**check, "allowed": bool(check["changed"])}
    tables = [str(p) for p in paths]
    record = record.replace(tables=tables, table_check=checked, seed_repeats=repeats, warnings=warnings)
    text = markdown(record)
    if outputs:
        figure = held_out_figure(record)  # drawn before anything is written
        with atomic_paths(*outputs) as (tmp_json, tmp_md, tmp_png):
            tmp_json.write_text(json.dumps(json_safe(record.to_json()), indent=2, allow_nan=False) + "\n")
            tmp_md.write_text(text + "\n")
            figure.savefig(tmp_png, dpi=150, format="png")
    print(text)
    if outputs:
        print(f"wrote {', '.join(str(p) for p in outputs)}")
    return 0


# the columns the counting conventions read (fit/validation/conventions.py): counts, and the injection's name
COUNT_COLUMNS = ("seq_len", "vocab_size", "width", "depth", "n_rec", "r", "embedding", "lm_head")
MAY_BE_ZERO = ("n_prelude", "n_coda")
TEXT_COLUMNS = ("injection",)


def _columns(items: list[str]) -> dict:
    """--column NAME=VALUE pairs: a count the conventions read as a whole number (> 0; >= 0 for the prelude and
    coda layers), the injection as text; another name, or a count that is text, NaN, inf, negative or 0, is
    refused in one line (it gave a traceback, or "+0.000")."""
    out = {}
    known = (*COUNT_COLUMNS, *MAY_BE_ZERO, *TEXT_COLUMNS)
    for item in items:
        name, sep, value = (x.strip() for x in item.partition("="))
        if not sep or not name or not value:
            raise UsageError(f"--column takes NAME=VALUE; got {item!r}")
        if name not in known:
            raise UsageError(str(not_one_of("--column", name, known, what="a column the conventions read")))
        if name in TEXT_COLUMNS:
            out[name] = value
            continue
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        least = 0 if name in MAY_BE_ZERO else 1
        if not (math.isfinite(number) and number == int(number) and number >= least):
            raise UsageError(f"--column {name}={value}: {name} is a whole number {'>= 0' if least == 0 else '> 0'}")
        out[name] = number
    return out


def _read_fit(path: str):

    try:
        raw = read_fit_json(path)
    except LoopscaleError:
        raise
    if not isinstance(raw, dict) or not isinstance(raw.get("params"), dict) or not isinstance(raw.get("law"), str):
        raise UsageError(f"{path} is not a loopscale fit record (needs 'law' and 'params')")
    cls = find_law(raw["law"])
    if cls is None:
        raise UsageError(f"{path}: law {raw['law']!r} is not a law this loopscale knows")
    if cls.per_recipe:
        raise UsageError(f"{path} is a joint fit over recipes: validate each recipe's fit (loopscale fit --group COL)")
    try:
        fit = FitResult.from_dict(raw)  # a block that is no object is refused here (record_blocks)
    except (TypeError, InputError) as err:
        raise UsageError(f"{path} is not a loopscale fit record: {err}") from None
    if not isinstance(fit.input, dict):
        raise UsageError(f"{path} is not a loopscale fit record (settings and input must be objects)")
    problem = _malformed(fit, cls)
    if problem is not None:
        raise UsageError(f"{path}: {problem} (a hand-edited or damaged fit record: refit it)")
    return fit


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _interval_problem(name: str, interval) -> str | None:
    if interval is None:
        return None
    if not (isinstance(interval, (list, tuple)) and len(interval) == 2):
        return f"{name} must be [low, high]; got {interval!r}"
    if None in interval:  # an open side (a profile that never crossed its threshold)
        return None
    if not all(_number(x) for x in interval):
        return f"{name} must hold numbers; got {interval!r}"
    return f"{name} {list(interval)} is reversed (low > high)" if interval[0] > interval[1] else None


def _malformed(fit, cls) -> str | None:
    """What in a fit record validate reads cannot be what `fit` wrote, or None: every parameter the law has (phi
    too) a finite number, the seed a whole number, the group and profile objects, every interval [low, high]."""
    needed = [*BASE_USER, *([cls.profile_param] if cls.profile_param else [])]
    missing = [k for k in needed if k not in fit.params]
    if missing:
        return f"params lacks {', '.join(missing)}"
    for name, value in fit.params.items():
        if not _number(value):
            return f"params: {name}={value!r} is not a finite number"
    if fit.seed is not None and not (isinstance(fit.seed, int) and not isinstance(fit.seed, bool)):
        return f"seed must be a whole number; got {fit.seed!r}"
    if fit.group and not isinstance(fit.group.get("column", ""), str):
        return f"group must be an object with a column name; got {fit.group.to_json()!r}"
    found = _interval_problem("profile_phi interval", (fit.profile_phi or {}).get("interval"))
    if not isinstance(fit.ci95, dict):
        return f"ci95 must be an object; got {fit.ci95!r}"
    for name, interval in fit.ci95.items():
        found = found or _interval_problem(f"ci95 {name}", interval)
    return found
