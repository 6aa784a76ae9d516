"""`loopscale advise`: which r, which width and how many tokens under a compute, memory and inference budget.

    loopscale advise fits/baseline.json --compute 1e20
    loopscale advise fits/baseline.json --compute 1e20 --max-unique-params 1e8 --json advice.json --plot advice.png
    loopscale advise runs/demo/fit.json --compute 5e11 --family demo --inference-tokens 1e8

The math lives in loopscale/analysis/advise.py (the optimiser), loopscale/analysis/advise_family.py (the model
family) and
loopscale/analysis/advise_report.py (replicates, verdict, break-even); this module parses and prints. Everything is
computed (and the figure drawn) before anything is written, so bad input writes nothing.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from loopscale.cli import UsageError

FAMILIES = ("auto", "paper", "demo", "cpu", "custom")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "advise",
        help="the best r, width and tokens under a compute / memory / inference budget, with intervals",
        description="For each r, the model of the fit's family and the tokens that minimise the fitted law's "
        "loss under the constraints; the best r (or which are within the noise) from the bootstrap replicates; "
        "the unique-parameter budget below which looping beats r = 1.",
    )
    p.add_argument("fit", help="fit JSON from `loopscale fit --out` (looped law; --bootstrap for intervals)")
    p.add_argument("--compute", type=_positive, required=True, help="training FLOPs C (F x D <= C)")
    p.add_argument("--max-unique-params", type=_positive, default=None, help="cap M on N_once + N_rec")
    serving = p.add_mutually_exclusive_group()
    serving.add_argument("--max-inference-flops", type=_positive, default=None, help="cap I on forward FLOPs per token")
    serving.add_argument(
        "--inference-tokens", type=_positive, default=None, help="T_inf: C is the lifetime cost F D + 2 N_active T_inf"
    )
    p.add_argument("--r", type=_r_list, default=None, help="comma-separated r (default: the fit's r)")
    p.add_argument("--family", choices=FAMILIES, default="auto", help="model family (default: the one the fit matches)")
    p.add_argument("--experiment", default=None, help="--family custom: the experiment whose model is the family")
    p.add_argument("--override", action="append", default=[], help="--family custom: a Hydra override (repeatable)")
    p.add_argument(
        "--recipe",
        default=None,
        help="the recipe to advise on: the family's (baseline | tbptt | hyper) and, for a looped-joint fit, whose phi "
        "to use (default: the fit's; a joint fit's reference)",
    )
    p.add_argument("--level", type=float, default=0.95, help="interval level (default 0.95)")
    p.add_argument("--json", default=None, metavar="PATH", help="write the advice as JSON")
    p.add_argument("--plot", default=None, metavar="PATH", help="write the figure as PNG (and a PDF beside it)")
    p.add_argument("--dpi", type=int, default=200, help="PNG resolution (default 200); a PDF is written beside it")
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


def run(args: argparse.Namespace) -> int:
    from loopscale.analysis.advise import Constraints
    from loopscale.analysis.advise_report import advise_from_fit
    from loopscale.fit.result import load_fit

    _check_outputs(args)
    fit = load_fit(args.fit)
    cons = Constraints(args.compute, args.max_unique_params, args.max_inference_flops, args.inference_tokens)
    advice = advise_from_fit(
        fit, cons, args.r, args.family, None, args.experiment, args.override, args.recipe, args.level
    )
    advice.record["fit"]["input"] = str(args.fit)
    figure = None
    if args.plot:
        from loopscale.plots import advice_figure

        figure = advice_figure(advice)
    print("\n".join(render(advice)))
    _write(advice, figure, args)
    return 0


def _write(advice, figure, args) -> None:
    from loopscale.atomic import atomic_path

    if args.json:
        with atomic_path(Path(args.json)) as tmp:
            tmp.write_text(json.dumps(advice.record, indent=2) + "\n")
        print(f"wrote {args.json}")
    if figure is not None:  # a PNG for the screen, a PDF beside it for a paper (as every loopscale figure)
        for path, fmt in ((Path(args.plot), "png"), (Path(args.plot).with_suffix(".pdf"), "pdf")):
            with atomic_path(path) as tmp:
                figure.savefig(tmp, dpi=args.dpi, format=fmt)
            print(f"wrote {path}")


def _span(interval) -> str:
    return "-" if not interval else f"[{interval[0]:.4g}, {interval[1]:.4g}]"


def render(advice) -> list[str]:
    """The terminal table: one row per r, then the verdict, the break-even and the notes."""
    from loopscale.analysis.advise_report import advice_table, summary_lines

    record = advice.record
    cons, fam = record["constraints"], record["family"]
    cap = f"{cons['max_unique_params']:.3g}" if cons["max_unique_params"] else "none"
    serving = (
        f", inference <= {cons['max_inference_flops']:.3g} FLOPs/token" if cons["max_inference_flops"] else ""
    ) + (f", lifetime cost with {cons['inference_tokens']:.3g} tokens served" if cons["inference_tokens"] else "")
    lines = [
        f"advice for C = {cons['compute_flops']:.3g} FLOPs, unique-parameter cap {cap}{serving}; family {fam['name']} "
        f"({fam['recipe']}, widths in steps of {fam['width_step']}); fit {record['fit']['law']}",
        f"{'':1} {'r':>2} {'d_model':>7} {'N_unique':>9} {'N_eff':>9} {'D tokens':>9} {'D/N':>6} {'L':>7} "
        f"{'L interval':>18} {'N_unique interval':>20} {'D interval':>20} {'best':>5} binding",
    ]
    for row in advice_table(advice).to_dict("records"):
        if "d_model" not in row or row["d_model"] != row["d_model"]:  # infeasible r: its reason
            lines.append(f"  {row['r']:>2} {row['note']}")
            continue
        share = (
            "-" if row["share_best"] is None or row["share_best"] != row["share_best"] else f"{row['share_best']:.0%}"
        )
        lines.append(
            f"{'*' if row['note'] == 'best' else ' '} {row['r']:>2} {row['d_model']:>7g} {row['N_unique']:>9.3g} "
            f"{row['N_eff']:>9.3g} {row['D_tokens']:>9.3g} {row['tokens_per_param']:>6.3g} {row['L']:>7.4f} "
            f"{_span(row['L_interval']):>18} {_span(row['N_unique_interval']):>20} {_span(row['D_interval']):>20} "
            f"{share:>5} {row['binding'] or '-'}"
        )
    return lines + summary_lines(advice)
