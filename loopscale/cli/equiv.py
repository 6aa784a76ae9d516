"""`loopscale equiv`: N_eff and the cost-equivalent non-looped size of a looped model (and the compute-optimal
N*, D* at a budget from a fit), eq. 1 of docs/design.md. Every number is checked before anything is printed.
"""

from __future__ import annotations

import argparse
import math

from loopscale.analysis.advise.record_checks import check_record
from loopscale.cli import COMMANDS, UsageError
from loopscale.cli.arguments import read_fit_arg
from loopscale.fit.derived import equivalent_sizes, optima_beside_dense


def register(subparsers) -> None:
    e = subparsers.add_parser("equiv", help=COMMANDS["equiv"].help)
    e.add_argument("--r", type=float, required=True, help="recurrences")
    e.add_argument("--n-once", type=float, required=True, help="parameters run once (e.g. 220e6)")
    e.add_argument("--n-rec", type=float, required=True, help="recurrent-block parameters")
    src = e.add_mutually_exclusive_group(required=True)
    src.add_argument("--phi", type=float, help="recurrence-equivalence exponent")
    src.add_argument("--fit", metavar="JSON", help="take phi (and E, A, B, ... ) from a fit JSON")
    e.add_argument(
        "--budget", type=float, metavar="C", help="also print compute-optimal N*, D* at this FLOP budget (needs --fit)"
    )
    e.add_argument(
        "--flops-per-token",
        type=float,
        metavar="F",
        help="training FLOPs per token of the looped model (`loopscale params`); with "
        "--budget, D = C / F scales F with the model (default F = 6 (N_once + r N_rec))",
    )
    e.add_argument(
        "--dense-flops-per-token",
        type=float,
        metavar="F",
        help="the same for the r = 1 model of N_once + N_rec parameters (default 6 N)",
    )
    e.set_defaults(func=run_equiv)


def run_equiv(args: argparse.Namespace) -> int:
    _check_equiv_numbers(args)
    fit = read_fit_arg(args.fit) if args.fit else None
    if fit is not None and "phi" not in fit.params:
        raise UsageError(f"{args.fit} has no phi (law {fit.law}); fit with --law looped")
    if fit is not None:  # every parameter a finite number inside the fitter's box, as `advise` reads them
        check_record(fit)
    phi = fit.params["phi"] if fit is not None else args.phi
    if args.budget is not None and fit is None:
        raise UsageError("--budget needs --fit (E, A, alpha, B, beta come from the fit)")
    sizes = equivalent_sizes(args.r, args.n_once, args.n_rec, phi)
    print(f"r = {sizes.r:g}, phi = {phi:.4g}: unique parameters N_once + N_rec = {_m(sizes.N_unique)}")
    print(f"  N_eff = N_once + r^phi N_rec = {_m(sizes.N_eff)}: the non-looped size with the same loss")
    print(f"  N_once + r N_rec = {_m(sizes.N_cost)}: the non-looped size with the same training cost")
    if args.budget is not None:
        if args.budget <= 0:
            raise UsageError(f"--budget must be > 0; got {args.budget}")
        f = args.n_once / (args.n_once + args.n_rec)
        F, dense_F = args.flops_per_token, args.dense_flops_per_token
        for opt in optima_beside_dense(fit.params, args.budget, sizes, f, F, dense_F):
            print(
                f"  compute-optimal at C = {args.budget:.3g}, r = {opt.r:g}: N_cost* = {_m(opt.N_cost)}, "
                f"N_eff* = {_m(opt.N_eff)}, D* = {opt.D:.3g} tokens, L* = {opt.L:.4f}"
            )
    return 0


def _check_equiv_numbers(args: argparse.Namespace) -> None:
    """Every number `equiv` is given finite and of its sign: r >= 1, N_once, N_rec >= 0 (not both 0), phi
    finite (a NaN would print N_eff = nanM)."""
    for flag, value in (("--r", args.r), ("--n-once", args.n_once), ("--n-rec", args.n_rec), ("--phi", args.phi)):
        if value is not None and not math.isfinite(value):
            raise UsageError(f"{flag} must be a finite number; got {value}")
    if args.r < 1:
        raise UsageError(f"--r must be >= 1; got {args.r:g}")
    if args.n_once < 0 or args.n_rec < 0 or args.n_once + args.n_rec <= 0:
        raise UsageError(f"--n-once and --n-rec must be >= 0, not both 0; got {args.n_once:g}, {args.n_rec:g}")
    positive = {"--budget": args.budget, "--flops-per-token": args.flops_per_token}
    for flag, value in {**positive, "--dense-flops-per-token": args.dense_flops_per_token}.items():
        if value is not None and not (math.isfinite(value) and value > 0):
            raise UsageError(f"{flag} must be a positive number; got {value}")


def _m(n: float) -> str:
    return f"{n / 1e9:.3g}B" if n >= 1e9 else f"{n / 1e6:.3g}M"
