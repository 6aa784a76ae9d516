"""`loopscale power`: how many runs does it take to measure phi, and a delta-phi of a given size?

    loopscale power --fit runs/demo/fit.json experiment=isodepth_cpu_demo --detect 0.1
    loopscale power --law "E=1.57,A=28,alpha=0.2,B=916,beta=0.37,phi=0.46" --sigma 0.005 experiment=isodepth
    loopscale power --fit fit.json --table runs.csv --seeds 3
    loopscale power --fit fit.json --table designs.csv --recipe lora --detect 0.1
    loopscale power --fit curves_fit.json experiment=isodepth_cpu_demo      # a looped-curve pilot: curves count
    loopscale power --fit entry_fit.json --table runs.csv --measure-phi    # a looped-entry pilot; the width rule
    loopscale power --fit logn_fit.json experiment=isodepth_cpu_demo --measure-phi   # looped-logn: phi at its N_ref

From a pilot fit (or a stated law and seed sigma) and a sweep design (Hydra overrides, expanded with exact
accounting by `loopscale.launch.design`; or a runs table), simulate sweeps of the design and of a small menu of
designs beside it (more seeds, a budget more, a size more), fit each as `fit` does (`loopscale.fit.power`), and
print per design: its runs, FLOPs, GPU and CPU hours (`loopscale plan`'s estimates, for the design alone and with
a second recipe's looped runs), the expected 95% interval width of phi and of delta-phi, and the minimum detectable
delta-phi at 80% power; with a looped-curve pilot fit also what a run's curve is worth (in final points, from the
noise along the pilot's curves: `loopscale.fit.curve_worth`) and the MDE when the sweep is fitted from curves.
With --detect X: the cheapest design that detects |delta-phi| >= X, checked by simulating it. Writes JSON
(--json), Markdown (--md) and a figure of MDE against FLOPs (--plot); nothing is written when anything fails.
"""

from __future__ import annotations

import argparse
import dataclasses

from hydra.errors import HydraException

from loopscale.analysis.power_designs import (
    MAX_SEEDS,
    MAX_SIMS,
    PowerRequest,
    power_outputs,
    power_record,
    write_power,
)
from loopscale.analysis.power_text import markdown
from loopscale.cli import COMMANDS, UsageError, usage_error
from loopscale.cli.arguments import add_probe_argument
from loopscale.fit.pilot import Truth, stated_law, truth_from_fit
from loopscale.fit.resample import resolve_jobs


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "power",
        help=COMMANDS["power"].help,
        description="Simulate sweeps of a design from a pilot law plus seed noise, fit each as `fit` does, and "
        "report the expected 95%% interval width of phi and delta-phi, the minimum detectable delta-phi "
        "(80%% power, 5%% two-sided: MDE = 2.80 se), for the design and a menu of designs beside it, with their "
        "FLOPs and hours; --detect X finds the cheapest design that detects X.",
    )
    p.add_argument("overrides", nargs="*", help="the sweep design: Hydra overrides, e.g. experiment=isodepth_cpu_demo")
    law = p.add_mutually_exclusive_group(required=True)
    law.add_argument(
        "--fit", metavar="FIT", help="pilot fit JSON (`fit --out`: looped, looped-entry, looped-logn, or joint)"
    )
    law.add_argument("--law", metavar="E=..,A=..", help="a stated law: E, A, alpha, B, beta, phi (needs --sigma)")
    p.add_argument(
        "--sigma",
        type=_positive,
        default=None,
        help="seed sigma of log L (default: the pilot's seed repeats, else its RMS residual)",
    )
    p.add_argument("--table", metavar="RUNS", help="a runs table as the design instead of overrides (seeds only)")
    p.add_argument(
        "--recipe",
        metavar="NAME",
        help="with --table: that recipe's runs as the design (and the baseline's r = 1 runs if it has none)",
    )
    p.add_argument(
        "--seeds", type=int, default=None, metavar="K", help="seeds per point of the design (default: its own)"
    )
    p.add_argument("--detect", type=_positive, default=None, metavar="X", help="find the cheapest design with MDE <= X")
    p.add_argument("--measure-phi", action="store_true", help="the cheapest design whose phi meets the width rule")
    p.add_argument("--delta", type=float, default=0.0, help="delta-phi planted in the second recipe (default 0)")
    p.add_argument(
        "--parent-share",
        type=float,
        default=None,
        help="share of a run's noise that a forked job's branches share (default: the pilot's residuals show it; "
        "1 for a stated law or an unforked pilot: a seed moves the whole job)",
    )
    p.add_argument("--finals", dest="curves", action="store_false", help="a looped-curve pilot: no MDE from curves")
    p.add_argument("--curve-share", type=float, metavar="S", help="noise share independent between evaluations")
    p.add_argument("--curve-points", type=int, default=PowerRequest.curve_points, metavar="M", help="evaluations a run")
    p.add_argument("--candidate", default="", metavar="OVERRIDES", help="the second recipe's overrides, for its cost")
    p.add_argument(
        "--sims", type=int, default=200, help=f"simulated sweeps per design (default 200, at most {MAX_SIMS:,})"
    )
    p.add_argument("--no-menu", action="store_true", help="the design as given only (no designs beside it)")
    p.add_argument("--full", action="store_true", help="fit every sweep with the full multi-start (slow)")
    p.add_argument(
        "--jobs", type=int, default=None, metavar="N", help="worker processes (default, and at most: every usable core)"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the simulations (reproducible for any --jobs)")
    p.add_argument("--json", metavar="PATH", help="write the results as JSON")
    p.add_argument("--md", metavar="PATH", help="write the results as Markdown")
    p.add_argument("--plot", metavar="PATH", help="write the figure: MDE against FLOPs per design")

    add_probe_argument(p)
    p.set_defaults(func=run)


def _positive(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0; got {text}")
    return value


def run(args: argparse.Namespace) -> int:

    if not 20 <= args.sims <= MAX_SIMS:  # more is months of CPU for no visible gain (the se's own error ~ 1/sqrt(2 n))
        raise UsageError(f"--sims {args.sims}: at least 20 simulated sweeps per design, at most {MAX_SIMS:,}")
    if args.delta != args.delta or abs(args.delta) == float("inf"):
        raise UsageError(f"--delta {args.delta}: the planted delta-phi must be a finite number")
    if args.seeds is not None and not 1 <= args.seeds <= MAX_SEEDS:
        raise UsageError(f"--seeds must be in [1, {MAX_SEEDS}]; got {args.seeds}")
    if args.recipe and args.table is None:
        raise UsageError("--recipe picks a recipe's runs from --table; with overrides, set model.recipe=NAME")
    if args.table is None and not args.overrides:
        raise UsageError("give the design: Hydra overrides (e.g. experiment=isodepth_cpu_demo) or --table RUNS")
    power_outputs(args.json, args.md, args.plot, [("the fit", args.fit), ("the --table", args.table)])
    args.jobs = resolve_jobs(args.jobs)
    truth = _truth(args)
    fields = {f.name for f in dataclasses.fields(PowerRequest)} - {"overrides", "source"}
    request = PowerRequest(
        tuple(args.overrides), source=args.fit or PowerRequest.source, **{name: getattr(args, name) for name in fields}
    )
    try:
        record = power_record(request, truth)
    except (HydraException, ValueError) as err:
        raise usage_error(err) from err
    text = markdown(record)
    print(text)
    write_power(record, text, args.json, args.md, args.plot)
    return 0


def _truth(args):

    if args.fit:
        return truth_from_fit(args.fit, args.sigma, args.parent_share)
    if args.sigma is None:
        raise UsageError("--law needs --sigma (the seed sigma of log L)")
    share = 1.0 if args.parent_share is None else args.parent_share
    return Truth(stated_law(args.law), args.sigma, share, "stated (--sigma)")
