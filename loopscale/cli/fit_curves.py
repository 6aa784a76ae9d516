"""`loopscale fit TABLE --curves`: a curve law fitted to one model's whole loss curves across lr schedules.

The table has one row per (run, evaluation) with the run's name, the step, the lr at that step and the loss
(`loopscale collect` writes curves.csv beside runs.csv; public curves of other models read the same with --run-col,
--step-col, --lr-col, --loss-col; several tables, or a folder of them, are read as one: a table without the run
column is one run named by its file's stem, the layout of the public multi-power curves, one CSV per schedule:
`loopscale fit csv_400/ --curves --loss-col loss --holdout wsdcon_9`). The law (`--law multipower`, the default with
--curves, or its rival `lr-annealing`; `loopscale.fit.curves.registry`) is fitted to every run not named by
--holdout; every run is then predicted and scored by its mean and max relative error, the held-out ones summed up on
the last line. --out writes the fit record (JSON), --predictions one row per (run, evaluation) with the prediction
(CSV), --plot the measured and fitted curves of every run (PNG and PDF, `plots/loss_curves.py`); all checked
writable before fitting and written atomically.
"""

from __future__ import annotations

import argparse

from loopscale.atomic import check_writable, write_json_atomic
from loopscale.cli import UsageError
from loopscale.fit.curves.fit import (
    curve_fit_record,
    evaluations_from,
    fit_and_predict,
    held_out_runs,
    no_warmup_note,
    read_trained_curves,
    result_lines,
    write_predictions,
)
from loopscale.fit.curves.registry import curve_law, curve_law_names
from loopscale.fit.curves.table import CurveColumns
from loopscale.fit.objective import Loss
from loopscale.plots.files import check_dpi, figure_files, write_figure

DEFAULT_CURVE_LAW = "multipower"
# each run's evaluations fitted from this share of its steps on (`--curve-start`); measured on the tuned demo:
# docs/results.md, "Early evaluations of a curve"
DEFAULT_CURVE_START = 0.0
DEFAULT_CURVE_LOSS = "val_loss"  # what `loopscale collect` names the validation loss of curves.csv


def add_arguments(p: argparse.ArgumentParser) -> None:
    """--curves and the options only it reads (`fit`'s --law, --loss, --delta, --starts, --out are shared)."""
    g = p.add_argument_group("whole loss curves (--curves)")
    g.add_argument(
        "--curves",
        action="store_true",
        help="fit a curve law (--law multipower, the default, or lr-annealing) to one model's loss curves: one row "
        "per (run, evaluation)",
    )
    g.add_argument("--run-col", default="run", metavar="NAME", help="column naming each curve's run (default run)")
    g.add_argument("--step-col", default="step", metavar="NAME", help="column holding the step (default step)")
    g.add_argument("--lr-col", default="lr", metavar="NAME", help="column holding the lr at that step (default lr)")
    holdout_help = "runs left out of the fit and predicted (their mean / max relative error printed)"
    g.add_argument("--holdout", nargs="+", default=[], metavar="RUN", help=holdout_help)
    fit_runs_help = "fit only these runs and predict every other one (the complement of --holdout)"
    g.add_argument("--fit-runs", nargs="+", default=[], metavar="RUN", help=fit_runs_help)
    g.add_argument("--predictions", metavar="PATH", help="write every evaluation's predicted loss here (CSV)")
    drops_help = "multipower: count the warmup's lr rises in the drop sum, as the authors' released code does"
    g.add_argument("--warmup-drops", action="store_true", help=drops_help)
    repeated_help = "a step logged twice with two values: refused (default), or the last read (a resumed run's log)"
    g.add_argument("--repeated-steps", default="refuse", choices=["refuse", "last"], help=repeated_help)
    g.add_argument(
        "--curve-start",
        type=float,
        default=DEFAULT_CURVE_START,
        metavar="SHARE",
        help="fit each run's evaluations from SHARE of its steps on (a curve law: the looped curve laws, or with "
        "--curves); the schedule's terms (S1, S2, the drops) are still summed over the whole schedule from step 0 "
        "(default %(default)s)",
    )
    from_step_help = "fit and score each run's evaluations from STEP on (--curve-start: from a share of its steps)"
    g.add_argument("--from-step", type=int, default=0, metavar="STEP", help=from_step_help)
    g.add_argument(
        "--curve-sigma",
        default="off",
        choices=["off", "position"],
        help="a looped curve law's fit: off (default), every evaluation weighed alike; position, two stages: the "
        "residuals' sigma of log L by the evaluation's share of its run's steps estimated from the fit, then the "
        'fit again with the residuals standardised by it (docs/design.md, "A curve fit\'s position sigma")',
    )
    g.add_argument(
        "--lr-before-first",
        default="zero",
        choices=["zero", "hold"],
        help="the lr before a run's first row: a linear rise from 0 at step 0 (zero, the default: a warmup) or "
        "the first row's lr held",
    )


def run_curve_fit(args: argparse.Namespace) -> int:
    """Read, check, fit, print, write; every option and path checked before the fit."""
    law_name = args.law or DEFAULT_CURVE_LAW
    if law_name not in curve_law_names():
        raise UsageError(f"--curves fits a curve law ({', '.join(curve_law_names())}); got --law {law_name}")
    if args.starts < 1:
        raise UsageError(f"--starts must be >= 1; got {args.starts}")
    if args.curve_sigma != "off":
        raise UsageError(
            "--curve-sigma weighs a looped curve law's fit (fit CURVES.csv --law looped-curve or looped-entry-curve "
            "--loss-col val_loss), not --curves"
        )
    plots = figure_files(args.plot) if args.plot else []
    check_dpi(args.dpi)
    for path, what in ((args.out, "--out"), (args.predictions, "--predictions"), *((p, "--plot") for p in plots)):
        if path:
            check_writable(path, what)
    if not 0 <= args.curve_start < 1:  # every option checked before a line is printed: a refusal prints nothing
        raise UsageError(f"--curve-start {args.curve_start}: a share of each run's steps, in [0, 1)")
    law = curve_law(law_name)
    if args.warmup_drops:
        if not hasattr(law, "warmup_drops"):
            raise UsageError(f"--warmup-drops is an option of the multipower law, not of {law_name}")
        law.warmup_drops = True
    columns = CurveColumns(args.run_col, args.step_col, args.lr_col, args.loss_col or DEFAULT_CURVE_LOSS)
    zero, last = args.lr_before_first == "zero", args.repeated_steps == "last"
    curves, other_r, notes = read_trained_curves(args.tables, columns, warmup_from_zero=zero, last_repeated=last)
    curves = evaluations_from(curves, args.curve_start, args.from_step)
    holdout = held_out_runs(curves, args.holdout, args.fit_runs)
    if other_r:
        print(f"read each run's curve at its trained r: {other_r} rows scored at another r_eval left out")
    notes += [n for n in [no_warmup_note(curves)] if n]
    print("".join(f"note: {note}\n" for note in notes), end="")
    result, predictions = fit_and_predict(law, curves, holdout, Loss(args.loss, args.delta), args.starts)
    for line in result_lines(result):
        print(line)
    if args.out:
        tables = args.tables[0] if len(args.tables) == 1 else args.tables
        record = curve_fit_record(result, tables, columns, args.warmup_drops, args.lr_before_first)
        record["curve_start"] = args.curve_start
        record["from_step"] = args.from_step
        write_json_atomic(args.out, record)
        print(f"wrote {args.out}")
    if args.predictions:
        write_predictions(args.predictions, curves, predictions, holdout)
        print(f"wrote {args.predictions}")
    if plots:
        from loopscale.plots.loss_curves import curve_law_figure  # matplotlib: only when --plot draws

        figure = curve_law_figure(curves, predictions, holdout, law.name)
        for path in write_figure(figure, plots, args.dpi):
            print(f"wrote {path}")
    return 0
