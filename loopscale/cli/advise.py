"""`loopscale advise`: which r, which width and how many tokens under a compute, memory and inference budget.

    loopscale advise fits/baseline.json --compute 1e20
    loopscale advise fits/baseline.json --compute 1e20 --max-unique-params 1e8 --json advice.json --plot advice.png
    loopscale advise runs/demo/fit.json --compute 5e11 --family demo --inference-tokens 1e8
    loopscale advise runs/testtime_cpu/testtime.json --max-inference-flops 2e6    (a test-time fit: r_eval's axis)

The advice is `loopscale.analysis.advise.advice.advise` (the package loopscale/analysis/advise/: the model
family, the optimiser, the replicates, verdict and break-even, the lines shown); this module parses, prints
and writes. Everything is computed (and the figure drawn) before anything is written, so bad input writes
nothing.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from loopscale.analysis.advise.advice import advise
from loopscale.analysis.advise.testtime import inference_advice, inference_lines, read_testtime_record, recorded_table
from loopscale.analysis.advise.text import render
from loopscale.atomic import atomic_path, check_outputs_apart, json_text
from loopscale.cli import COMMANDS, UsageError
from loopscale.plots.files import DPI, check_dpi, write_figure

FAMILIES = ("auto", "paper", "demo", "cpu", "custom")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "advise",
        help=COMMANDS["advise"].help,
        description="For each r, the model of the fit's family and the tokens that minimise the fitted law's "
        "loss under the constraints; the best r (or which are within the noise) from the bootstrap replicates; "
        "the unique-parameter budget below which looping beats r = 1.",
    )
    p.add_argument("fit", help="fit JSON from `loopscale fit --out` (looped law; --bootstrap for intervals)")
    p.add_argument(
        "--compute", type=_positive, default=None, help="training FLOPs C (F x D <= C); not for a test-time fit"
    )
    p.add_argument("--max-unique-params", type=_positive, default=None, help="cap M on N_once + N_rec")
    serving = p.add_mutually_exclusive_group()
    serving.add_argument("--max-inference-flops", type=_positive, default=None, help="cap I on forward FLOPs per token")
    serving.add_argument(
        "--inference-tokens", type=_positive, default=None, help="T_inf: C is the lifetime cost F D + 2 N_active T_inf"
    )
    p.add_argument(
        "--r",
        type=_r_list,
        default=None,
        help="comma-separated r (default: the r the fit saw; others are extrapolated)",
    )
    p.add_argument("--family", choices=FAMILIES, default="auto", help="model family (default: the one the fit matches)")
    p.add_argument("--experiment", default=None, help="--family custom: the experiment whose model is the family")
    p.add_argument("--override", action="append", default=[], help="--family custom: a Hydra override (repeatable)")
    p.add_argument(
        "--recipe",
        default=None,
        help="the recipe to advise on: the family's model.recipe (baseline | tbptt | hyper; with --family custom "
        "default the experiment's own) and, for a looped-joint fit, whose phi and fitted models to use (default: "
        "the fit's group, a joint fit's reference, else baseline)",
    )
    p.add_argument(
        "--table",
        default=None,
        metavar="PATH",
        help="a test-time fit (`fit --law testtime`) with --max-inference-flops: its test-time table (default: the "
        "one the fit read)",
    )
    p.add_argument("--level", type=float, default=0.95, help="interval level (default 0.95)")
    p.add_argument("--json", default=None, metavar="PATH", help="write the advice as JSON")
    p.add_argument("--plot", default=None, metavar="PATH", help="write the figure as PNG (and a PDF beside it)")
    p.add_argument(
        "--dpi", type=int, default=DPI, help=f"PNG resolution, 10-1000 (default {DPI}); a PDF is written beside it"
    )
    p.set_defaults(func=run)


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number; got {text!r}")
    return value


def _r_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--r takes comma-separated integers, e.g. 1,2,4,8; got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"--r takes integers >= 1; got {text!r}")
    return values


def _check_outputs(args) -> None:
    check_dpi(args.dpi)  # as `plot` and `report` do, before anything is computed or written
    if not 0.5 <= args.level < 1:
        raise UsageError(f"--level must be in [0.5, 1); got {args.level}")
    for flag in ("json", "plot"):
        path = getattr(args, flag)
        if path is None:
            continue
        if Path(path).is_dir():
            raise UsageError(f"--{flag} {path} is a directory; give the file to write")
        if not Path(path).resolve().parent.is_dir():
            raise UsageError(f"--{flag} {path}: its folder does not exist")
    plot = [("--plot", Path(args.plot)), ("--plot", Path(args.plot).with_suffix(".pdf"))] if args.plot else []
    check_outputs_apart([("--json", args.json), *plot], [("the fit", Path(args.fit))])


def run(args: argparse.Namespace) -> int:
    _check_outputs(args)
    testtime = read_testtime_record(args.fit)
    if testtime is not None:  # inference-time r: more passes or a bigger model (analysis/advise/testtime.py)
        return run_testtime(args, testtime)
    if args.compute is None:
        raise UsageError("--compute C is needed (training FLOPs), unless FIT is a test-time fit (`fit --law testtime`)")
    advice = advise(
        args.fit,
        compute_flops=args.compute,
        max_unique_params=args.max_unique_params,
        max_inference_flops=args.max_inference_flops,
        inference_tokens=args.inference_tokens,
        r_values=args.r,
        family=args.family,
        recipe=args.recipe,
        experiment=args.experiment,
        overrides=args.override,
        level=args.level,
    )
    figure = None
    if args.plot:
        from loopscale.plots.advice import advice_figure  # matplotlib: only with --plot

        figure = advice_figure(advice)
    print("\n".join(render(advice)))
    _write(advice, figure, args)
    return 0


def _write(advice, figure, args) -> None:
    if args.json:
        with atomic_path(Path(args.json)) as tmp:
            tmp.write_text(json_text(advice.record) + "\n")
        print(f"wrote {args.json}")
    if figure is not None:  # a PNG for the screen, a PDF beside it for a paper (as every loopscale figure)
        for path in write_figure(figure, [Path(args.plot), Path(args.plot).with_suffix(".pdf")], args.dpi):
            print(f"wrote {path}")


def run_testtime(args: argparse.Namespace, record: dict) -> int:
    """`advise TT.json --max-inference-flops I`: each model's best pass count within I forward FLOPs per token and
    the best model, from the test-time fit and its table."""
    if args.max_inference_flops is None:
        raise UsageError("a test-time fit is advised for an inference budget: give --max-inference-flops I")
    if args.compute is not None or args.plot:
        raise UsageError("--compute and --plot are not available with a test-time fit (its advice is a table)")
    path, table = recorded_table(record, args.table)
    out = inference_advice(record, table, args.max_inference_flops)
    print("\n".join(inference_lines(out, args.max_inference_flops, path)))
    if args.json:
        with atomic_path(Path(args.json)) as tmp:
            tmp.write_text(json_text(out) + "\n")
        print(f"wrote {args.json}")
    return 0
