"""`loopscale validate FIT.json [TABLES...]`: does the fitted law hold where it was not fitted?

    loopscale validate fits/baseline.json                        # the table the fit recorded
    loopscale validate fits/baseline.json runs.csv --out fits/baseline.validate.json --jobs 2

Leave-one-budget-out, leave-one-r-out, rival forms with AICc / BIC, Approach 2, the lr grid (rows with an
`lr_scale` column, from hydra/sweeper=lr_grid) and the counting conventions, ending in one verdict line
(loopscale/fit/validation/). Prints the Markdown; `--out X.json` also writes X.md and the held-out figure X.png,
all three together or none. Every input is checked before the first fit (one line, exit 2, nothing written).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from loopscale.atomic import atomic_paths, check_writable, json_safe
from loopscale.cli import UsageError
from loopscale.errors import LoopscaleError
from loopscale.fit.laws.registry import find_law
from loopscale.fit.resample import resolve_jobs
from loopscale.fit.result import FitResult, read_fit_json
from loopscale.fit.validation.inputs import validation_tables
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
        for path in outputs:
            check_writable(path, "--out")

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
    record["tables"] = [str(p) for p in paths]
    text = markdown(record)
    if outputs:
        figure = held_out_figure(record)  # drawn before anything is written
        with atomic_paths(*outputs) as (tmp_json, tmp_md, tmp_png):
            tmp_json.write_text(json.dumps(json_safe(record), indent=2, allow_nan=False) + "\n")
            tmp_md.write_text(text + "\n")
            figure.savefig(tmp_png, dpi=150, format="png")
    print(text)
    if outputs:
        print(f"wrote {', '.join(str(p) for p in outputs)}")
    return 0


def _columns(items: list[str]) -> dict:
    """--column NAME=VALUE pairs: numbers as floats, anything else as text."""
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name or not value:
            raise UsageError(f"--column takes NAME=VALUE; got {item!r}")
        try:
            out[name] = float(value)
        except ValueError:
            out[name] = value
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
        fit = FitResult.from_dict(raw)
    except TypeError as err:
        raise UsageError(f"{path} is not a loopscale fit record: {err}") from None
    if not isinstance(fit.settings, dict) or not isinstance(fit.input, dict):
        raise UsageError(f"{path} is not a loopscale fit record (settings and input must be objects)")
    return fit
