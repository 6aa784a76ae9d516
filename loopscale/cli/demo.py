"""`loopscale demo`: the whole pipeline on the embedded corpus (see loopscale/demo.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hydra.errors import HydraException

from loopscale.cli import COMMANDS, UsageError, usage_error
from loopscale.demo import DEMO_LAWS, DEMO_SEEDS, DemoSettings, run_demo
from loopscale.launch.local_workers import JobFailed


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo",
        help=COMMANDS["demo"].help,
        description="Runs the iso-depth CPU sweep (16 forked jobs, r in {1,2,4,8} x 4 widths, 44 "
        "points of the law, at two seeds: 88 runs) on the embedded Shakespeare corpus, fits L = E + A (N_once "
        "+ m N_rec)^-alpha + B D^-beta with m = r^(phi + psi ln(N_c/N_ref)) (phi at the reference size N_ref; "
        "`--law looped`: m = r^phi) with bootstrap intervals, checks that phi is well-conditioned, validates the "
        "law where it was not fitted, and writes figures, a Markdown report and demo.json (~13 min on 2 cores). "
        "Rerunning reuses finished runs. `--seeds 3` (`make demo-measured`, ~20 min) is the design "
        "`loopscale power` expects within the verdict's width (docs/results.md).",
    )
    p.add_argument("--out", type=Path, default=Path("runs/demo"), help="output directory (default runs/demo)")
    p.add_argument("--bootstrap", type=int, default=200, help="bootstrap replicates for the CIs (default 200)")
    p.add_argument("--seed", type=int, default=0, help="seed of the fit's starts and bootstrap (default 0)")
    seeds_help = f"training seeds of every point, seed=0..K-1 (default {DEMO_SEEDS}); the fit weighs rows by seed sigma"
    p.add_argument("--seeds", type=int, default=DEMO_SEEDS, metavar="K", help=seeds_help)
    law_help = "the law fitted: looped-logn (r^(phi + psi ln(N_c/N_ref)), phi at N_ref; default) or looped (r^phi)"
    p.add_argument("--law", default=DEMO_LAWS[0], choices=DEMO_LAWS, help=law_help)
    p.add_argument(
        "--workers",
        type=int,
        default=0,
        help="training processes side by side (default: min(CPUs, 2)); 1 trains in this process",
    )
    p.add_argument("--threads", type=int, default=0, help="torch threads per training process (default 1)")
    p.add_argument("--data-dir", default=None, help="token cache directory (default data/cache)")
    p.add_argument(
        "overrides", nargs="*", help="extra Hydra overrides for the sweep, e.g. model.r=1,2 'point=C2.5e11_3.54e11-d16'"
    )
    p.set_defaults(func=run)


def demo_settings(args: argparse.Namespace) -> DemoSettings:
    """The demo's settings from its parsed options."""
    return DemoSettings(
        out_dir=args.out,
        overrides=args.overrides,
        n_bootstrap=args.bootstrap,
        seed=args.seed,
        data_dir=args.data_dir,
        workers=args.workers,
        threads_per_worker=args.threads,
        seeds=args.seeds,
        law=args.law,
    )


def run(args: argparse.Namespace) -> int:
    if args.bootstrap < 0:
        raise UsageError(f"--bootstrap {args.bootstrap} must be >= 0")
    if args.workers < 0 or args.threads < 0:
        raise UsageError(f"--workers {args.workers} and --threads {args.threads} must be >= 0 (0: the default)")
    try:
        run_demo(demo_settings(args))
    except JobFailed as err:  # the demo stops at a failed or diverged job: one line, exit 1
        print(f"loopscale demo: error: {err}; the other jobs were stopped and resume on the next call", file=sys.stderr)
        return 1
    except HydraException as err:
        raise usage_error(err) from err
    return 0
