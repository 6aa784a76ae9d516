"""`loopscale fit` and `loopscale compare` (`equiv` is cli/equiv.py).

fit      fit a law to a runs table; prints (parameter, estimate, 95% CI) and the conditioning checks with
         their verdict ("phi measured" / "not measured: ..."), writes a FitResult JSON (`--out`; with
         `--group COL` one file per group, `NAME.<group>.json`) and then, with `--plot`, a
         predicted-vs-observed figure (`loopscale.plots.registry.plot_fit`). Every data-dependent precondition is
         checked before the first solve; bootstrap replicates run over `--jobs` worker processes.
         `fit runs.csv runs_tbptt.csv ... --joint recipe` fits one joint law over the recipes in
         column `recipe` (shared E, A, alpha, B, beta; one phi per recipe; the r = 1 runs shared and
         kept once), with delta-phi tests and the shared-parameter check (`loopscale.fit.joint`).
compare  delta = B - A of a parameter (default phi) of two fit JSONs, CI from their bootstraps;
         given a joint fit, its delta-phi (bootstrap, profile, LR test) next to the separate fits'; both
         end in one answer (`loopscale.fit.verdict.delta_answer`): real, no difference detected, or not
         measured with the design's minimum detectable delta-phi.
What `fit` prints is fit_output.py; the files it writes and their paths, `loopscale.analysis.fit_files`.
"""

from __future__ import annotations

import argparse
import dataclasses

from loopscale.analysis import fitting
from loopscale.analysis.fit_files import figure_table, output_paths
from loopscale.cli import COMMANDS, UsageError
from loopscale.cli.arguments import read_fit_arg
from loopscale.fit.curves.fit import check_curves_options
from loopscale.fit.curves.registry import curve_law_names
from loopscale.fit.laws.registry import law_class, single_laws
from loopscale.fit.objective import Loss
from loopscale.fit.resample import resolve_jobs
from loopscale.fit.result import compare_param
from loopscale.fit.result_text import joint_lines
from loopscale.fit.runs_table import ColumnMap
from loopscale.fit.verdict import compare_conditioning
from loopscale.fit.verdict_render import verdict_lines

from . import fit_curves
from .fit_output import write_results
from .fit_testtime import register_options, run_testtime_fit


def register(subparsers) -> None:
    """The `fit` options: one add_argument per flag, a flat list that reads as the CLI's reference (hence
    over 60 lines)."""
    description = "Fit a scaling law to a runs table (CSV/Parquet)."
    p = subparsers.add_parser("fit", help=COMMANDS["fit"].help, description=description)
    tables_help = "runs table (CSV, .parquet or .jsonl); several only with --joint (--curves: tables or folders)"
    p.add_argument("tables", nargs="+", metavar="table", help=tables_help)
    p.add_argument(
        "--law",
        default=None,
        choices=LawChoices(),
        metavar="LAW",
        help="the law to fit: %(choices)s (default looped; with --joint: one phi per recipe; with --curves: "
        "multipower)",
    )
    p.add_argument("--group", metavar="COL", help="fit each value of COL (e.g. recipe) separately")
    p.add_argument(
        "--joint",
        metavar="COL",
        help="one joint fit over the recipes in COL (e.g. recipe): shared dense parameters, "
        "one phi per recipe, delta-phi vs the first recipe (looped law)",
    )
    p.add_argument("--bootstrap", type=int, default=0, metavar="N", help="bootstrap replicates")
    p.add_argument(
        "--cluster",
        metavar="COL",
        help="what the bootstrap resamples: whole clusters of rows that share COL: C (compute budgets), parent "
        "(the forked run each branch came from: the default when the table has forked branches, whose shared "
        "stable phase makes them one draw), width or any column; rows: single runs (the default otherwise)",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=None,
        metavar="N",
        help="worker processes for the bootstrap replicates (default: every core; the results are the same for any N)",
    )
    p.add_argument(
        "--holdout-largest", action="store_true", help="refit without the largest compute budget; report errors on it"
    )
    p.add_argument(
        "--drop-top-k",
        type=int,
        default=0,
        metavar="K",
        help="leave out the K highest-loss rows before fitting (with --joint: of the merged table), as "
        "Besiroglu et al. 2024 did",
    )
    p.add_argument("--no-profile", action="store_true", help="skip the phi profile (looped law)")
    p.add_argument(
        "--noise",
        default="auto",
        choices=["auto", "off"],
        help="auto (default): with seed repeats, measure the seed sigma of log L, weight the fit by it and "
        "bootstrap points and seeds; off: the unweighted fit (its intervals omit seed noise)",
    )
    p.add_argument(
        "--seed-col",
        default="seed",
        metavar="NAME",
        help="column naming each run's seed: rows of one point with different seeds are replicates (default seed)",
    )
    p.add_argument(
        "--seed-bootstrap",
        default="keep",
        choices=["keep", "resample"],
        help="two-stage bootstrap: a drawn point keeps its seeds (default) or draws them again",
    )
    p.add_argument(
        "--loss", default="huber", choices=["huber", "l2"], help="huber (default) or l2 = plain least squares on log L"
    )
    p.add_argument("--delta", type=float, default=1e-3, help="Huber threshold in log units")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--starts", type=int, default=16, metavar="K", help="starts refined (default 16)")
    p.add_argument("--out", metavar="PATH", help="write the fit JSON here (e.g. fits/NAME.json)")
    p.add_argument(
        "--plot",
        metavar="PATH",
        help="write a predicted-vs-observed figure: PATH, and for a .png or .pdf the other of the two beside it",
    )
    p.add_argument("--dpi", type=int, default=200, help="the --plot PNG's resolution (default 200; 10 to 1000)")
    p.add_argument(
        "--allow-no-dense",
        action="store_true",
        help="fit a looped law on a table with no r = 1 runs (a probe collected without --dense)",
    )
    cols = p.add_argument_group("column mapping (defaults: names written by `loopscale collect`)")
    for opt, canon in (
        ("--r-col", "r"),
        ("--n-once-col", "N_once"),
        ("--n-rec-col", "N_rec"),
        ("--n-col", "N"),
        ("--d-col", "D"),
        ("--c-col", "C"),
    ):
        cols.add_argument(opt, default=canon, metavar="NAME", help=f"column holding {canon}")
    cols.add_argument(
        "--loss-col", default=None, metavar="NAME", help="column holding L (default L; with --curves: val_loss)"
    )
    fit_curves.add_arguments(p)
    register_options(p)
    p.set_defaults(func=run_fit)

    c = subparsers.add_parser("compare", help=COMMANDS["compare"].help)
    c.add_argument("fit_a", help="first fit JSON (A), or a joint fit (`fit --joint`) alone")
    c.add_argument("fit_b", nargs="?", help="second fit JSON (B); delta = B - A")
    c.add_argument("--param", default="phi", help="parameter to compare (default phi)")
    c.add_argument("--seed", type=int, default=0, help="seed for pairing bootstrap replicates")
    c.set_defaults(func=run_compare)


class LawChoices:
    """The laws `--law` takes (`loopscale.fit.laws.registry.single_laws`), read from the registry each time
    argparse checks a value or prints them, so a law registered after the parser was built is taken too."""

    def _names(self) -> tuple[str, ...]:
        return single_laws() + curve_law_names()

    def __iter__(self):
        return iter(self._names())

    def __contains__(self, name) -> bool:
        return name in self._names()


# ----------------------------------------------------------------------------------------------
def run_fit(args: argparse.Namespace) -> int:
    """`fit TABLE` (or `fit T1 T2 ... --joint COL`): check the options and every data-dependent precondition
    (the groups' tables, --cluster, --holdout-largest, the figures' columns) before the first solve, fit
    each group (`loopscale.analysis.fitting`), then print and write the results (each fit JSON before any
    figure). With --curves: a curve law (`fit_curves.run_curve_fit`)."""
    if args.curves:
        return fit_curves.run_curve_fit(args)
    check_curves_options(vars(args))  # ignored without --curves: refused rather than fitting every row
    args.law = args.law or "looped"
    if args.law in curve_law_names():
        raise UsageError(f"--law {args.law} is a curve law: fit it to a curves table with --curves")
    if law_class(args.law).table == "test-time":  # one row per model and r_eval: cli/fit_testtime.py
        return run_testtime_fit(args)
    req = _fit_request(args)
    if args.joint and args.curve_sigma != "off":
        raise UsageError("--curve-sigma weighs one curve law's fit, not a joint fit (--joint)")
    if args.joint:
        law = fitting.joint_law(req)
        tables, inputs = fitting.read_joint_tables(req, law)
        out_paths, plot_paths = output_paths(args.out, args.plot, args.dpi, args.tables, [None])
        table, recipes, n_duplicates = fitting.merged_joint_table(req, tables)
        figures = [figure_table(table, plot_paths[0])]
        result = fitting.fit_joint_table(req, law, table, recipes, inputs, n_duplicates)
        return write_results([(None, table, result)], out_paths, plot_paths, figures, args.dpi)
    if len(args.tables) > 1:
        raise UsageError(
            f"{len(args.tables)} tables given: several tables need --joint COL (one joint fit over the recipes in COL)"
        )
    raw, tables = fitting.group_tables(req)
    out_paths, plot_paths = output_paths(args.out, args.plot, args.dpi, args.tables, [g for g, _ in tables])
    figures = [figure_table(table, path) for (_, table), path in zip(tables, plot_paths)]
    return write_results(fitting.fit_groups(req, raw, tables), out_paths, plot_paths, figures, args.dpi)


def _fit_request(args: argparse.Namespace) -> fitting.FitRequest:
    """The fit's request (`analysis.fitting.FitRequest`: its loss and column mapping built here), after checking
    the bootstrap, cluster, jobs and starts options."""
    if args.bootstrap < 0:
        raise UsageError(f"--bootstrap must be >= 0; got {args.bootstrap}")
    if args.cluster and args.cluster != "rows" and args.bootstrap == 0:
        raise UsageError("--cluster needs --bootstrap N (N > 0)")
    if args.starts < 1:
        raise UsageError(f"--starts must be >= 1; got {args.starts}")
    options = {f.name: getattr(args, f.name) for f in dataclasses.fields(fitting.FitRequest) if hasattr(args, f.name)}
    columns = ColumnMap(
        args.r_col, args.n_once_col, args.n_rec_col, args.n_col, args.d_col, args.c_col, args.loss_col or "L"
    )
    return fitting.FitRequest(**{**options, "jobs": resolve_jobs(args.jobs), "loss": Loss(args.loss, args.delta),
                         "columns": columns})  # fmt: skip


# ----------------------------------------------------------------------------------------------
def run_compare(args: argparse.Namespace) -> int:
    """`compare A B`: delta = B - A of a parameter with its paired-bootstrap interval, and one answer on it
    (`verdict.compare_conditioning`); `compare JOINT`: a joint fit's delta-phi lines and its verdict. Both
    printed by the one renderer of every verdict (`verdict.verdict_lines`)."""
    a = read_fit_arg(args.fit_a)
    if args.fit_b is None:
        if not a.joint:
            raise UsageError(
                f"{args.fit_a} is not a joint fit (`loopscale fit ... --joint COL`); give two fit JSONs to compare"
            )
        for line in joint_lines(a.joint) + verdict_lines(a.conditioning):
            print(line)
        return 0
    b = read_fit_arg(args.fit_b)
    out = compare_param(a, b, args.param, seed=args.seed)
    name = args.param
    print(f"{name}: A = {out.a:.4g} ({args.fit_a}), B = {out.b:.4g} ({args.fit_b})")
    if out.ci is None:
        print(f"delta {name} = B - A = {out.delta:+.4g}; 95% CI: n/a (refit both with --bootstrap N)")
    else:
        lo, hi = out.ci
        print(
            f"delta {name} = B - A = {out.delta:+.4g}, 95% CI [{lo:+.4g}, {hi:+.4g}] "
            f"(se {out.se:.3g}, {out.n_replicates} paired bootstrap replicates)"
        )
    for line in verdict_lines(compare_conditioning({args.fit_a: a, args.fit_b: b}, out)):
        print(line)
    return 0
