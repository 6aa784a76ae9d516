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
What `fit` prints and writes, and its output paths, are in fit_output.py.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from loopscale.analysis.probes import check_dense_rows
from loopscale.cli import COMMANDS, UsageError
from loopscale.cli.arguments import read_fit_arg
from loopscale.errors import LoopscaleError
from loopscale.fit.curves.registry import curve_law_names
from loopscale.fit.fit_table import check_fit_inputs, fit_table
from loopscale.fit.joint import check_joint_inputs, fit_joint, joint_table
from loopscale.fit.laws.registry import law_names, per_recipe_form, single_laws
from loopscale.fit.objective import Loss
from loopscale.fit.resample import resolve_jobs
from loopscale.fit.result import compare_param, file_sha256
from loopscale.fit.runs_table import PARENT_COLUMN, ColumnMap, canonical_table, drop_top_k, is_forked, read_table
from loopscale.fit.validation.lr_confound import lr_rows
from loopscale.fit.verdict import compare_conditioning
from loopscale.fit.verdict_render import verdict_lines

from . import fit_curves
from .fit_output import figure_table, joint_lines, output_paths, write_results


def register(subparsers) -> None:
    """The `fit` options: one add_argument per flag, a flat list that reads as the CLI's reference (hence
    over 60 lines)."""
    p = subparsers.add_parser(
        "fit",
        help=COMMANDS["fit"].help,
        description="Fit a scaling law to a runs table (CSV/Parquet).",
    )
    p.add_argument(
        "tables", nargs="+", metavar="table", help="runs table (CSV, .parquet or .jsonl); several only with --joint"
    )
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
    each group, then print and write the results (each fit JSON before any figure). With --curves: a curve law
    (`fit_curves.run_curve_fit`)."""
    if args.curves:
        return fit_curves.run_curve_fit(args)
    args.law = args.law or "looped"
    if args.law in curve_law_names():
        raise UsageError(f"--law {args.law} is a curve law: fit it to a curves table with --curves")
    loss, columns = _fit_options(args)
    if args.joint:
        return run_joint_fit(args, loss, columns)
    if len(args.tables) > 1:
        raise UsageError(
            f"{len(args.tables)} tables given: several tables need --joint COL (one joint fit over the recipes in COL)"
        )
    args.table = args.tables[0]
    raw, tables = _group_tables(args, columns)
    out_paths, plot_paths = output_paths(args, [g for g, _ in tables])
    figures = [figure_table(table, path) for (_, table), path in zip(tables, plot_paths)]
    results = _fit_groups(args, loss, raw, tables)
    return write_results(results, out_paths, plot_paths, figures, args.dpi)


def _fit_options(args: argparse.Namespace):
    """The fit's loss (`objective.Loss`) and column mapping (`tables.ColumnMap`), after checking the
    bootstrap, cluster, jobs and starts options."""
    if args.bootstrap < 0:
        raise UsageError(f"--bootstrap must be >= 0; got {args.bootstrap}")
    if args.cluster and args.cluster != "rows" and args.bootstrap == 0:
        raise UsageError("--cluster needs --bootstrap N (N > 0)")
    if args.starts < 1:
        raise UsageError(f"--starts must be >= 1; got {args.starts}")
    args.jobs = resolve_jobs(args.jobs)
    loss = Loss(args.loss, args.delta)
    columns = ColumnMap(
        r=args.r_col,
        N_once=args.n_once_col,
        N_rec=args.n_rec_col,
        N=args.n_col,
        D=args.d_col,
        C=args.c_col,
        L=args.loss_col or "L",
    )
    return loss, columns


def bootstrap_cluster(args: argparse.Namespace, table) -> str | None:
    """What the bootstrap resamples: --cluster COL; "rows" is None (single runs); without --cluster, a
    forked sweep's parent runs (its branches share their parent's stable phase), else runs."""
    if args.cluster == "rows":
        return None
    if args.cluster is None and args.bootstrap and is_forked(table):
        return PARENT_COLUMN
    return args.cluster


def check_seed_column(args: argparse.Namespace, columns, where: str = "the table") -> None:
    """--seed-col NAME names a column of the table (the default `seed` may be absent: no seeds, no replicates)."""
    if args.seed_col != "seed" and args.seed_col not in columns:
        raise UsageError(f"--seed-col {args.seed_col!r} is not a column of {where} {list(columns)}")


def _noise_options(args: argparse.Namespace) -> dict:
    """The seed-noise keywords of `fit_table` / `fit_joint` from --noise, --seed-col and --seed-bootstrap."""
    return {"noise": args.noise, "seed_column": args.seed_col, "inner": args.seed_bootstrap}


def _progress_stream():
    """Where bootstrap progress bars go: stderr when it is a terminal, nowhere otherwise (logs, tests)."""
    return sys.stderr if sys.stderr.isatty() else None


def _group_tables(args: argparse.Namespace, columns) -> tuple:
    """(the table as read, [(group value, canonical table)]): one entry with value None without --group.
    Each group is checked here, before any fitting: its columns, its r = 1 runs, its --cluster labels and
    the rows --holdout-largest leaves (`fit_table.check_fit_inputs`)."""
    raw = drop_top_k(without_lr_grid(read_table(args.table)), args.drop_top_k, loss=columns.L)
    check_seed_column(args, raw.columns)
    if args.group and args.group not in raw.columns:
        raise UsageError(f"--group column {args.group!r} is not in the table {list(raw.columns)}")
    if args.group and raw[args.group].isna().any():
        rows = [int(i) for i in raw.index[raw[args.group].isna()][:5]]
        raise UsageError(f"--group column {args.group!r} is empty in rows {rows}: give every row a group")
    groups = (
        [(None, raw)]
        if not args.group
        else [(g, raw[raw[args.group] == g]) for g in sorted(raw[args.group].unique(), key=str)]
    )
    args.cluster = bootstrap_cluster(args, raw)
    tables = []
    for g, part in groups:
        try:
            table = canonical_table(part.reset_index(drop=True), args.law, columns)
            check_dense_rows(table, args.law, args.allow_no_dense)  # a probe without the baseline's r = 1 runs
            check_fit_inputs(table, args.law, args.bootstrap, args.cluster, args.holdout_largest)
        except LoopscaleError as err:  # said with the group it came from
            where = f" (group {args.group}={g})" if g is not None else ""
            raise UsageError(f"{err}{where}") from None
        tables.append((g, table))
    return raw, tables


def without_lr_grid(raw):
    """The table without an lr grid's runs (lr_scale other than 1: trained off the transferred lr on purpose,
    hydra/sweeper=lr_grid); a note on stderr says how many were left out (`loopscale validate` reads them)."""
    lr = lr_rows(raw)
    if not lr.any():
        return raw
    print(f"note: {int(lr.sum())} lr-grid runs (lr_scale != 1) left out of the fit; loopscale validate reads them",
          file=sys.stderr)  # fmt: skip
    return raw[~lr].reset_index(drop=True)


def _fit_groups(args: argparse.Namespace, loss, raw, tables: list) -> list:
    """[(group value, table, FitResult)]: `fit_table` on each group, each result recording its input
    (the file's path and hash, its rows, the columns used) and its group."""
    input_info = {
        "path": str(args.table),
        "sha256": file_sha256(args.table),
        "n_rows": len(raw),
        **column_record(tables[0][1]),
    }
    results = []
    with np.errstate(all="ignore"):
        for g, table in tables:
            result = fit_table(
                table,
                args.law,
                loss,
                seed=args.seed,
                n_bootstrap=args.bootstrap,
                cluster=args.cluster,
                holdout=args.holdout_largest,
                profile=not args.no_profile,
                n_refine=args.starts,
                jobs=args.jobs,
                progress=_progress_stream(),
                **_noise_options(args),
            )
            result.input = dict(input_info, n_rows_used=len(table))
            if g is not None:
                result.group = {"column": args.group, "value": _plain(g)}
            results.append((g, table, result))
    return results


def column_record(table) -> dict:
    """What fit.json records about the columns: the source column actually used for each canonical
    one, and the columns an explicit mapping shadowed (`runs_table.canonical_table` keeps both)."""
    return {
        "columns": dict(table.attrs.get("columns_used", {})),
        "ignored_columns": list(table.attrs.get("columns_ignored", [])),
    }


def run_joint_fit(args: argparse.Namespace, loss, columns) -> int:
    """`fit T1 T2 ... --joint COL`: one joint law over the recipes in COL (`loopscale.fit.joint`), its
    preconditions (--cluster on the joint table and on each recipe's rows, the figure) checked first."""
    joint_law = per_recipe_form(args.law)
    if joint_law is None:
        forms = [n for n in law_names() if per_recipe_form(n) is not None]
        raise UsageError(f"--joint fits the {' or '.join(forms)} law (one phi per recipe); got --law {args.law}")
    if args.group:
        raise UsageError("--joint and --group exclude each other (--joint fits the groups together)")
    if args.holdout_largest:  # refused, not ignored: the user would read a holdout that was never run
        raise UsageError("--holdout-largest is not available with --joint (fit each recipe alone with --group)")
    tables, inputs = [], []
    for path in args.tables:
        try:
            raw = read_table(path)
            check_seed_column(args, raw.columns, str(path))
            table = canonical_table(raw, joint_law.name, columns)
        except LoopscaleError as err:  # said with the table it came from
            raise UsageError(f"{err} ({path})") from None
        tables.append(table)
        inputs.append({"path": str(path), "sha256": file_sha256(path), "n_rows": len(raw), **column_record(table)})
    out_paths, plot_paths = output_paths(args, [None])
    table, recipes = joint_table(tables, args.joint)
    n_duplicates = sum(len(t) for t in tables) - len(table)
    table = drop_top_k(table, args.drop_top_k)  # of the merged table: a run shared by two tables counts once
    args.cluster = bootstrap_cluster(args, table)
    check_joint_inputs(table, recipes, args.bootstrap, args.cluster)
    figures = [figure_table(table, plot_paths[0])]
    with np.errstate(all="ignore"):
        result = fit_joint(
            table,
            args.joint,
            recipes,
            loss,
            seed=args.seed,
            n_bootstrap=args.bootstrap,
            cluster=args.cluster,
            profile=not args.no_profile,
            n_refine=args.starts,
            jobs=args.jobs,
            progress=_progress_stream(),
            law_name=joint_law.name,
            **_noise_options(args),
        )
    result.input = {
        "tables": inputs,
        "n_rows_used": len(table),
        "n_duplicate_rows_dropped": n_duplicates,
    }
    return write_results([(None, table, result)], out_paths, plot_paths, figures, args.dpi)


def _plain(value):
    return value.item() if hasattr(value, "item") else value


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
    print(f"{name}: A = {out['a']:.4g} ({args.fit_a}), B = {out['b']:.4g} ({args.fit_b})")
    if out["ci"] is None:
        print(f"delta {name} = B - A = {out['delta']:+.4g}; 95% CI: n/a (refit both with --bootstrap N)")
    else:
        lo, hi = out["ci"]
        print(
            f"delta {name} = B - A = {out['delta']:+.4g}, 95% CI [{lo:+.4g}, {hi:+.4g}] "
            f"(se {out['se']:.3g}, {out['n_replicates']} paired bootstrap replicates)"
        )
    for line in verdict_lines(compare_conditioning({args.fit_a: a, args.fit_b: b}, out)):
        print(line)
    return 0
