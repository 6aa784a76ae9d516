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
import sys

from loopscale.analysis.validation_files import validation_outputs, write_validation
from loopscale.cli import UsageError
from loopscale.fit.resample import resolve_jobs
from loopscale.fit.runs_table import table_warnings
from loopscale.fit.validation.conventions import fill_columns
from loopscale.fit.validation.inputs import changed_table_line, point_means, read_fit, table_check, validation_tables
from loopscale.fit.validation.run import validate
from loopscale.fit.validation.text import markdown


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
    fill = fill_columns(args.column)
    fit = read_fit(args.fit)

    table, lr_table, paths = validation_tables(fit, args.tables)
    outputs = validation_outputs(args.out, args.fit, paths) if args.out else None
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
    record = record.with_inputs(str(args.fit), [str(p) for p in paths], check, repeats, warnings)
    text = markdown(record)
    if outputs:
        write_validation(record, text, outputs)
    print(text)
    if outputs:
        print(f"wrote {', '.join(str(p) for p in outputs)}")
    return 0
