"""`loopscale fit TABLE --law testtime`: the test-time recurrence law on a table of one row per (model, r_eval).

    loopscale fit testtime.csv --law testtime [--r-eval-col r_eval --r-train-col r_train --group-col model
                                               --loss-col bpb --shape exp|power --train-fit fit.json
                                               --out tt.json --plot tt.png]

Any such table: `loopscale collect`'s testtime.csv, or published rows of another looped model (r_train a number
for a fixed-r model, a word such as "sampled" for sampled r; the loss any positive metric, lower is better: nats,
bits per byte, perplexity). Prints each model's fit and the joint fit (one rate over the models) with 95% profile
intervals and the verdict, both shapes' leave-one-out errors, and the gain of one more pass; with --train-fit (a
training-time fit JSON, in the same loss units, and N_once, N_rec and D or C in the table), what one more pass at
inference is worth in unique parameters (phi_tt). The fit is `loopscale.fit.testtime`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from loopscale.atomic import check_writable, json_safe, write_json_atomic
from loopscale.cli import UsageError
from loopscale.cli.arguments import read_fit_arg
from loopscale.fit.objective import Loss
from loopscale.fit.result import file_sha256
from loopscale.fit.runs_table import read_table
from loopscale.fit.testtime import SHAPES, TestTimeColumns, fit_testtime, testtime_table
from loopscale.fit.testtime_phi import phi_rows
from loopscale.fit.testtime_text import testtime_lines
from loopscale.plots.files import check_dpi, figure_files, write_figure

# `fit` options that mean nothing to a test-time table: refused, not ignored
NOT_FOR_TESTTIME = {
    "joint": "--joint",
    "group": "--group",
    "holdout_largest": "--holdout-largest",
    "cluster": "--cluster",
    "drop_top_k": "--drop-top-k",
}


def register_options(p: argparse.ArgumentParser) -> None:
    """The options `fit` takes for --law testtime (its column mapping, the shape, the training fit)."""
    tt = p.add_argument_group("test-time law (--law testtime: one row per model and r_eval)")
    tt.add_argument("--r-eval-col", default="r_eval", metavar="NAME", help="column holding r_eval (default r_eval)")
    tt.add_argument(
        "--r-train-col",
        default="r_train",
        metavar="NAME",
        help="column holding each model's training r: a number (fixed r) or a word such as 'sampled' "
        "(default r_train, else a loopscale table's r)",
    )
    tt.add_argument("--group-col", default="model", metavar="NAME", help="column naming the model (default model)")
    tt.add_argument("--shape", default="exp", choices=SHAPES, help="saturating shape in r_eval: exp (default) or power")
    tt.add_argument(
        "--train-fit",
        metavar="FIT.json",
        help="a training-time looped fit: with N_once, N_rec and D (or C) in the table, one more pass in unique "
        "parameters and phi_tt",
    )


def run_testtime_fit(args: argparse.Namespace) -> int:
    """Check the options and the output paths, read and map the table, fit, print, write JSON and figure."""
    for key, flag in NOT_FOR_TESTTIME.items():
        if getattr(args, key, None):
            raise UsageError(f"{flag} is not available with --law testtime (each model and the joint fit are fitted)")
    if args.bootstrap:
        raise UsageError("--bootstrap is not available with --law testtime (its intervals are profile intervals)")
    if len(args.tables) > 1:
        raise UsageError(f"--law testtime reads one table; got {len(args.tables)}")
    check_dpi(args.dpi)
    for path, what in ((args.out, "--out"), (args.plot, "--plot")):
        if path:
            for f in figure_files(path) if what == "--plot" else [Path(path)]:
                check_writable(f, what)
    train = read_fit_arg(args.train_fit) if args.train_fit else None
    if train is not None and not {"E", "A", "alpha", "B", "beta"} <= set(train.params):
        raise UsageError(f"--train-fit {args.train_fit} has no E, A, alpha, B, beta (a looped or chinchilla fit)")
    path = args.tables[0]
    raw = read_table(path)
    columns = TestTimeColumns(
        model=args.group_col,
        r_eval=args.r_eval_col,
        r_train=args.r_train_col,
        L=None if args.loss_col == "L" and "L" not in raw.columns else args.loss_col,
    )
    table = testtime_table(raw, columns)
    record = fit_testtime(table, args.shape, Loss(args.loss, args.delta), n_refine=args.starts)
    source = {"path": str(path), "sha256": file_sha256(path), "n_rows": len(raw)}
    record = record.replace(input={**source, "columns": table.attrs.get("columns_used", {})})
    if train is not None:
        record = record.replace(testtime_phi=phi_rows(table, record, train.params))
    for line in testtime_lines(record):
        print(line)
    if args.out:
        write_json_atomic(args.out, json_safe(record.to_json()))
        print(f"wrote {args.out}")
    if args.plot:
        from loopscale.plots.testtime import testtime_figure  # matplotlib: only when --plot draws

        column = record["input"]["columns"]["L"]
        ylabel = "validation loss L (nats per token)" if column == "L" else column
        files = write_figure(testtime_figure(table, record, ylabel=ylabel), figure_files(args.plot), args.dpi)
        print(f"wrote {' and '.join(map(str, files))}")
    return 0
