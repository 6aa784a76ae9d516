"""`loopscale fit`, `loopscale compare` and `loopscale equiv`.

fit      fit a law to a runs table; prints (parameter, estimate, 95% CI), writes a FitResult JSON
         (`--out`; with `--group COL` one file per group, `NAME.<group>.json`) and, with `--plot`,
         a predicted-vs-observed figure (`loopscale.plots.plot_fit`).
         `fit runs.csv runs_tbptt.csv ... --joint variant` fits one joint law over the recipes in
         column `variant` (shared E, A, alpha, B, beta; one phi per recipe; the r = 1 runs shared and
         kept once), with delta-phi tests and the shared-parameter check (`loopscale.joint`).
compare  delta = B - A of a parameter (default phi) of two fit JSONs, CI from their bootstraps;
         given a joint fit, its delta-phi (bootstrap, profile, LR test) next to the separate fits'.
equiv    N_eff and the cost-equivalent non-looped size of a looped model (and N*, D* at a budget).
Heavy imports stay inside the functions so `loopscale --help` is fast.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from . import UsageError


def register(subparsers) -> None:
    """The `fit` options: one add_argument per flag, a flat list that reads as the CLI's reference (hence
    over 60 lines)."""
    p = subparsers.add_parser(
        "fit",
        help="fit a scaling law (E, A, alpha, B, beta, phi) to a runs table",
        description="Fit a scaling law to a runs table (CSV/Parquet).",
    )
    p.add_argument(
        "tables", nargs="+", metavar="table", help="runs table (CSV, .parquet or .jsonl); several only with --joint"
    )
    p.add_argument("--law", default="looped", choices=["looped", "chinchilla", "looped-free"])
    p.add_argument("--group", metavar="COL", help="fit each value of COL (e.g. variant) separately")
    p.add_argument(
        "--joint",
        metavar="COL",
        help="one joint fit over the recipes in COL (e.g. variant): shared dense parameters, "
        "one phi per recipe, delta-phi vs the first recipe (looped law)",
    )
    p.add_argument("--bootstrap", type=int, default=0, metavar="N", help="bootstrap replicates")
    p.add_argument(
        "--cluster", metavar="COL", help="resample whole clusters: C (compute budgets), width, ... (needs --bootstrap)"
    )
    p.add_argument(
        "--holdout-largest", action="store_true", help="refit without the largest compute budget; report errors on it"
    )
    p.add_argument("--no-profile", action="store_true", help="skip the phi profile (looped law)")
    p.add_argument(
        "--loss", default="huber", choices=["huber", "l2"], help="huber (default) or l2 = plain least squares on log L"
    )
    p.add_argument("--delta", type=float, default=1e-3, help="Huber threshold in log units")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--starts", type=int, default=16, metavar="K", help="starts refined (default 16)")
    p.add_argument("--out", metavar="PATH", help="write the fit JSON here (e.g. fits/NAME.json)")
    p.add_argument("--plot", metavar="PATH", help="write a predicted-vs-observed figure (PNG)")
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
        ("--loss-col", "L"),
    ):
        cols.add_argument(opt, default=canon, metavar="NAME", help=f"column holding {canon}")
    p.set_defaults(func=run_fit)

    c = subparsers.add_parser("compare", help="delta-phi between two fits with a bootstrap CI")
    c.add_argument("fit_a", help="first fit JSON (A), or a joint fit (`fit --joint`) alone")
    c.add_argument("fit_b", nargs="?", help="second fit JSON (B); delta = B - A")
    c.add_argument("--param", default="phi", help="parameter to compare (default phi)")
    c.add_argument("--seed", type=int, default=0, help="seed for pairing bootstrap replicates")
    c.set_defaults(func=run_compare)

    e = subparsers.add_parser("equiv", help="equivalent non-looped sizes of a looped model")
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


# ----------------------------------------------------------------------------------------------
def run_fit(args: argparse.Namespace) -> int:
    import numpy as np

    from ..fit import fit_table
    from ..fit_result import file_sha256
    from ..objective import Loss
    from ..probes import check_dense_rows
    from ..tables import ColumnMap, canonical_table, read_table

    if args.bootstrap < 0:
        raise UsageError(f"--bootstrap must be >= 0; got {args.bootstrap}")
    if args.cluster and args.bootstrap == 0:
        raise UsageError("--cluster needs --bootstrap N (N > 0)")
    if args.starts < 1:
        raise UsageError(f"--starts must be >= 1; got {args.starts}")
    try:
        loss = Loss(args.loss, args.delta)
    except ValueError as err:
        raise UsageError(str(err)) from None
    columns = ColumnMap(
        r=args.r_col,
        N_once=args.n_once_col,
        N_rec=args.n_rec_col,
        N=args.n_col,
        D=args.d_col,
        C=args.c_col,
        L=args.loss_col,
    )
    if args.joint:
        return run_joint_fit(args, loss, columns)
    if len(args.tables) > 1:
        raise UsageError(
            f"{len(args.tables)} tables given: several tables need --joint COL (one joint fit over the recipes in COL)"
        )
    args.table = args.tables[0]
    try:
        raw = read_table(args.table)
    except ValueError as err:
        raise UsageError(str(err)) from None
    if args.group and args.group not in raw.columns:
        raise UsageError(f"--group column {args.group!r} is not in the table {list(raw.columns)}")
    groups = (
        [(None, raw)]
        if not args.group
        else [(g, raw[raw[args.group] == g]) for g in sorted(raw[args.group].unique(), key=str)]
    )
    tables = []
    for g, part in groups:
        try:
            table = canonical_table(part.reset_index(drop=True), args.law, columns)
            check_dense_rows(table, args.law, args.allow_no_dense)  # a probe without the baseline's r = 1 runs
        except ValueError as err:
            where = f" (group {args.group}={g})" if g is not None else ""
            raise UsageError(f"{err}{where}") from None
        if args.cluster and args.cluster not in table.columns:
            raise UsageError(f"--cluster column {args.cluster!r} is not in the table")
        if args.cluster and args.bootstrap and table[args.cluster].nunique() < 3:
            raise UsageError(f"--cluster column {args.cluster!r} has fewer than 3 distinct values")
        tables.append((g, table))

    out_paths, plot_paths = _output_paths(args, [g for g, _ in tables])
    input_info = {
        "path": str(args.table),
        "sha256": file_sha256(args.table),
        "n_rows": len(raw),
        **column_record(tables[0][1]),
    }
    results = []
    with np.errstate(all="ignore"):
        for g, table in tables:
            try:
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
                )
            except ValueError as err:
                raise UsageError(str(err)) from None
            result.input = dict(input_info, n_rows_used=len(table))
            if g is not None:
                result.group = {"column": args.group, "value": _plain(g)}
            results.append((g, table, result))

    _write(results, out_paths, plot_paths)
    return 0


def _write(results, out_paths, plot_paths) -> None:
    """Print each fit, then write figures first and each JSON last, atomically (loopscale/atomic.py): a
    failed plot leaves no fit.json behind, and a kill mid-write leaves no half file."""
    from ..atomic import atomic_path

    for g, _table, result in results:
        _print_result(result, g)
        if result.joint:
            for line in joint_lines(result.joint):
                print(line)
    for (_g, table, result), path in zip(results, plot_paths):
        if path is not None:
            from ..plots import plot_fit  # matplotlib only when a figure is asked for

            with atomic_path(path) as tmp:
                plot_fit(table, result, tmp)
            print(f"wrote {path}")
    for (_g, _table, result), path in zip(results, out_paths):
        if path is not None:
            with atomic_path(path) as tmp:
                result.write_json(tmp)
            print(f"wrote {path}")


def column_record(table) -> dict:
    """What fit.json records about the columns: the source column actually used for each canonical
    one, and the columns an explicit mapping shadowed (`tables.canonical_table` keeps both)."""
    return {
        "columns": dict(table.attrs.get("columns_used", {})),
        "ignored_columns": list(table.attrs.get("columns_ignored", [])),
    }


def run_joint_fit(args: argparse.Namespace, loss, columns) -> int:
    """`fit T1 T2 ... --joint COL`: one joint law over the recipes in COL (`loopscale.joint`)."""
    import numpy as np

    from ..fit_result import file_sha256
    from ..joint import fit_joint, joint_table
    from ..tables import canonical_table, read_table

    if args.law != "looped":
        raise UsageError(f"--joint fits the looped law (one phi per recipe); got --law {args.law}")
    if args.group:
        raise UsageError("--joint and --group exclude each other (--joint fits the groups together)")
    tables, inputs = [], []
    for path in args.tables:
        try:
            raw = read_table(path)
            table = canonical_table(raw, "looped-joint", columns)
        except ValueError as err:
            raise UsageError(f"{err} ({path})") from None
        tables.append(table)
        inputs.append({"path": str(path), "sha256": file_sha256(path), "n_rows": len(raw), **column_record(table)})
    out_paths, plot_paths = _output_paths(args, [None])
    try:
        table, recipes = joint_table(tables, args.joint)
        if args.cluster and args.cluster not in table.columns:
            raise ValueError(f"--cluster column {args.cluster!r} is not in the table")
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
            )
    except ValueError as err:
        raise UsageError(str(err)) from None
    result.input = {
        "tables": inputs,
        "n_rows_used": len(table),
        "n_duplicate_rows_dropped": sum(len(t) for t in tables) - len(table),
    }
    _write([(None, table, result)], out_paths, plot_paths)
    return 0


def joint_lines(j: dict) -> list[str]:
    """Plain-text lines for a joint fit's delta-phi (joint vs separate) and shared-parameter check."""
    fmt = lambda v: "open" if v is None else f"{v:+.4g}"  # noqa: E731
    lines = []
    ref = j["reference"]
    for g, d in j["delta_phi"].items():
        head = f"delta phi = phi[{g}] - phi[{ref}] = {d['estimate']:+.4g}"
        if d.get("bootstrap_ci"):
            lo, hi = d["bootstrap_ci"]
            head += f"; joint bootstrap 95% CI [{lo:+.4g}, {hi:+.4g}] (width {hi - lo:.4g}, se {d['se']:.3g})"
        lines.append(head)
        if d.get("profile_interval"):
            lo, hi = d["profile_interval"]
            lines.append(f"  joint profile 95% interval [{fmt(lo)}, {fmt(hi)}]")
        lr = d["lr_test"]
        lines.append(
            f"  LR test of delta phi = 0: statistic {lr['statistic']:.3g} (chi2, 1 df), p = {lr['p_value']:.3g}"
        )
        sep = d.get("separate")
        if sep:
            if sep.get("ci"):
                lo, hi = sep["ci"]
                lines.append(
                    f"  separate fits: delta phi = {sep['delta']:+.4g}, 95% CI [{lo:+.4g}, {hi:+.4g}] "
                    f"(width {hi - lo:.4g}, {sep['n_replicates']} randomly paired replicates)"
                )
            else:
                lines.append(f"  separate fits: delta phi = {sep['delta']:+.4g} (no CI without --bootstrap)")
    chk = j.get("shared_check")
    if chk:
        verdict = (
            "the recipes do NOT share the dense model"
            if chk["p_value"] < 0.05
            else "consistent with shared dense parameters"
        )
        lines.append(
            f"shared-parameter check (joint vs separate fits): LR statistic {chk['statistic']:.3g} "
            f"({chk['df']} df), p = {chk['p_value']:.3g}: {verdict}"
        )
    return lines


def _output_paths(args: argparse.Namespace, groups: list) -> tuple[list, list]:
    """--out and --plot for each fit (one per group; [None] for a single fit), checked writable before any
    fitting starts, so an unwritable path fails in a second rather than after the whole fit."""
    out_paths = _out_paths(args.out, groups) if args.out else [None] * len(groups)
    plot_paths = _out_paths(args.plot, groups) if args.plot else [None] * len(groups)
    _check_writable(out_paths, "--out")
    _check_writable(plot_paths, "--plot")
    return out_paths, plot_paths


def _check_writable(paths: list, what: str) -> None:
    from ..atomic import check_writable

    for path in paths:
        if path is not None:
            try:
                check_writable(path, what)
            except ValueError as err:
                raise UsageError(str(err)) from None


def _out_paths(path: str, groups: list) -> list[Path]:
    """PATH for a single fit; PATH with .<group> before the suffix per group."""
    base = Path(path)
    if groups == [None]:
        return [base]
    return [base.with_name(f"{base.stem}.{_safe(g)}{base.suffix}") for g in groups]


def _safe(value) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", str(value)) or "group"


def _plain(value):
    return value.item() if hasattr(value, "item") else value


def _print_result(result, group=None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    title = f"{result.law} fit" + (f" — {result.group['column']} = {group}" if group is not None else "")
    t = Table(title=title)
    t.add_column("parameter")
    t.add_column("estimate", justify="right")
    t.add_column("95% CI", justify="right")
    for name, value in result.params.items():
        ci = result.ci95.get(name)
        t.add_row(escape(name), f"{value:.6g}", f"[{ci[0]:.4g}, {ci[1]:.4g}]" if ci else "—")
    console = Console()
    console.print(t)
    lines = [
        f"rows {result.n_rows}; objective {result.objective:.6g} ({result.settings['loss']}"
        + (f", delta {result.settings['delta']:g}" if result.settings.get("delta") else "")
        + f"); |grad| {result.grad_norm:.2e}; {result.n_best_basin} of {result.n_refined} "
        f"refined starts reached the best optimum ({result.n_starts} screened)"
    ]
    if result.bootstrap:
        how = f"clusters of {result.bootstrap['cluster']}" if result.bootstrap.get("cluster") else "rows"
        lines.append(f"bootstrap: {result.bootstrap['n_replicates']} replicates resampling {how}")
    if result.profile_phi:
        lo, hi = result.profile_phi["interval"]
        fmt = lambda v: "open" if v is None else f"{v:.4g}"  # noqa: E731
        lines.append(f"phi profile interval (robust LR, 95%): [{fmt(lo)}, {fmt(hi)}]")
    if result.holdout:
        h = result.holdout
        lines.append(
            f"holdout (budget {h['held_out_budget']:.3g}, {h['n_holdout']} runs): mean |rel "
            f"err| {h['mean_abs_rel_error']:.3%}, max {h['max_abs_rel_error']:.3%}"
        )
    for line in lines:
        console.print(line, highlight=False)
    for w in result.warnings:
        console.print(f"[yellow]warning:[/yellow] {w}", highlight=False)


# ----------------------------------------------------------------------------------------------
def _load_fit(path: str):
    from ..fit_result import FitResult

    try:
        return FitResult.from_json(path)
    except (OSError, ValueError, TypeError) as err:
        raise UsageError(f"cannot read fit JSON {path}: {str(err).splitlines()[0]}") from None


def run_compare(args: argparse.Namespace) -> int:
    from ..fit_result import compare_param

    a = _load_fit(args.fit_a)
    if args.fit_b is None:
        if not a.joint:
            raise UsageError(
                f"{args.fit_a} is not a joint fit (`loopscale fit ... --joint COL`); give two fit JSONs to compare"
            )
        for line in joint_lines(a.joint):
            print(line)
        return 0
    b = _load_fit(args.fit_b)
    try:
        out = compare_param(a, b, args.param, seed=args.seed)
    except ValueError as err:
        raise UsageError(str(err)) from None
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
    return 0


def run_equiv(args: argparse.Namespace) -> int:
    from ..derived import compute_optimal, equivalent_sizes

    fit = _load_fit(args.fit) if args.fit else None
    if fit is not None and "phi" not in fit.params:
        raise UsageError(f"{args.fit} has no phi (law {fit.law}); fit with --law looped")
    phi = fit.params["phi"] if fit is not None else args.phi
    if args.budget is not None and fit is None:
        raise UsageError("--budget needs --fit (E, A, alpha, B, beta come from the fit)")
    try:
        sizes = equivalent_sizes(args.r, args.n_once, args.n_rec, phi)
    except ValueError as err:
        raise UsageError(str(err)) from None
    print(f"r = {sizes.r:g}, phi = {phi:.4g}: unique parameters N_once + N_rec = {_m(sizes.N_unique)}")
    print(f"  N_eff = N_once + r^phi N_rec = {_m(sizes.N_eff)}: the non-looped size with the same loss")
    print(f"  N_once + r N_rec = {_m(sizes.N_cost)}: the non-looped size with the same training cost")
    if args.budget is not None:
        if args.budget <= 0:
            raise UsageError(f"--budget must be > 0; got {args.budget}")
        f = args.n_once / (args.n_once + args.n_rec)
        per_param = {1.0: 6.0, args.r: 6.0}  # F / (N_once + r N_rec) per r: each r's own FLOPs per token
        for r, F, N in (
            (1.0, args.dense_flops_per_token, sizes.N_unique),
            (args.r, args.flops_per_token, sizes.N_cost),
        ):
            if F is not None:
                if not F > 0:
                    raise UsageError(f"FLOPs per token must be > 0; got {F}")
                per_param[r] = F / N
        for r, frac in ((1.0, 1.0), (args.r, f)):
            opt = compute_optimal(fit.params, args.budget, r, frac, per_param[r])
            print(
                f"  compute-optimal at C = {args.budget:.3g}, r = {r:g}: N_cost* = {_m(opt.N_cost)}, "
                f"N_eff* = {_m(opt.N_eff)}, D* = {opt.D:.3g} tokens, L* = {opt.L:.4f}"
            )
    return 0


def _m(n: float) -> str:
    return f"{n / 1e9:.3g}B" if n >= 1e9 else f"{n / 1e6:.3g}M"
