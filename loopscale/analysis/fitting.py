"""Runs-table files fitted as `loopscale fit` fits them: read, grouped (--group) or merged into one joint table
(--joint), every data-dependent precondition checked before the first solve (columns, r = 1 runs, --cluster,
--holdout-largest), then each fitted, each result recording its input (the file's path and hash, its rows, the
columns used) and its group."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

import numpy as np

from loopscale.analysis.probes import check_dense_rows
from loopscale.errors import InputError, LoopscaleError
from loopscale.fit.fit_table import check_fit_inputs, fit_table
from loopscale.fit.joint import check_joint_inputs, fit_joint, joint_table
from loopscale.fit.laws.looped_curve import rows_from_start
from loopscale.fit.laws.registry import law_class, law_names, per_recipe_form
from loopscale.fit.objective import Loss
from loopscale.fit.result import file_sha256
from loopscale.fit.runs_table import (
    PARENT_COLUMN,
    ColumnMap,
    canonical_table,
    check_fit_size,
    drop_top_k,
    is_forked,
    read_table,
)
from loopscale.fit.validation.lr_confound import lr_rows


@dataclass
class FitRequest:
    """What `loopscale fit` was asked (its options, checked by the command): the tables, the law, the groups or
    the joint column, the resampling (bootstrap, cluster: resolved by `bootstrap_cluster`), the noise model and
    the fitter's settings."""

    tables: list[str]
    law: str = "looped"
    loss: Loss = field(default_factory=Loss)
    columns: ColumnMap = field(default_factory=ColumnMap)
    group: str | None = None
    joint: str | None = None
    bootstrap: int = 0
    cluster: str | None = None
    jobs: int = 1
    holdout_largest: bool = False
    drop_top_k: int = 0
    no_profile: bool = False
    noise: str = "auto"
    seed_col: str = "seed"
    seed_bootstrap: str = "keep"
    seed: int = 0
    starts: int = 16
    allow_no_dense: bool = False
    curve_start: float = 0.0  # a curve law: each run's evaluations before this share of its steps left out
    curve_sigma: str = "off"  # a curve law: "position", its residuals weighed by position along the run


def bootstrap_cluster(req: FitRequest, table) -> str | None:
    """What the bootstrap resamples: --cluster COL; "rows" is None (single runs); without --cluster, a
    forked sweep's parent runs (its branches share their parent's stable phase), else a curves table's runs
    (a law of every evaluation: one curve is one draw), else runs."""
    if req.cluster == "rows":
        return None
    if req.cluster is None and req.bootstrap and is_forked(table):
        return PARENT_COLUMN
    if req.cluster is None and req.bootstrap and law_class(req.law).reads_curves and "run" in table.columns:
        return "run"
    return req.cluster


def check_seed_column(req: FitRequest, columns, where: str = "the table") -> None:
    """--seed-col NAME names a column of the table (the default `seed` may be absent: no seeds, no replicates)."""
    if req.seed_col != "seed" and req.seed_col not in columns:
        raise InputError(f"--seed-col {req.seed_col!r} is not a column of {where} {list(columns)}")


def _fit_keywords(req: FitRequest) -> dict:
    """The keywords `fit_table` and `fit_joint` share: resampling, profile, starts, workers, the noise model."""
    progress = sys.stderr if sys.stderr.isatty() else None  # bars on a terminal, nowhere otherwise (logs, tests)
    return dict(seed=req.seed, n_bootstrap=req.bootstrap, cluster=req.cluster, profile=not req.no_profile,
                n_refine=req.starts, jobs=req.jobs, progress=progress, noise=req.noise, seed_column=req.seed_col,
                inner=req.seed_bootstrap)  # fmt: skip


def group_tables(req: FitRequest) -> tuple:
    """(the table as read, [(group value, canonical table)]): one entry with value None without --group.
    Each group is checked here, before any fitting: its columns, its r = 1 runs, its --cluster labels and
    the rows --holdout-largest leaves (`fit_table.check_fit_inputs`)."""
    raw = drop_top_k(without_lr_grid(read_table(req.tables[0])), req.drop_top_k, loss=req.columns.L)
    check_seed_column(req, raw.columns)
    if req.group and req.group not in raw.columns:
        raise InputError(f"--group column {req.group!r} is not in the table {list(raw.columns)}")
    if req.group and raw[req.group].isna().any():
        rows = [int(i) for i in raw.index[raw[req.group].isna()][:5]]
        raise InputError(f"--group column {req.group!r} is empty in rows {rows}: give every row a group")
    groups = (
        [(None, raw)]
        if not req.group
        else [(g, raw[raw[req.group] == g]) for g in sorted(raw[req.group].unique(), key=str)]
    )
    req.cluster = bootstrap_cluster(req, raw)
    tables = []
    for g, part in groups:
        try:
            table = curve_rows(canonical_table(part.reset_index(drop=True), req.law, req.columns), req)
            check_dense_rows(table, req.law, req.allow_no_dense)  # a probe without the baseline's r = 1 runs
            check_fit_inputs(table, req.law, req.bootstrap, req.cluster, req.holdout_largest)
        except LoopscaleError as err:  # said with the group it came from
            where = f" (group {req.group}={g})" if g is not None else ""
            raise InputError(f"{err}{where}") from None
        tables.append((g, table))
    return raw, tables


def curve_rows(table, req: FitRequest):
    """The canonical table of a curve law without each run's evaluations before --curve-start of its steps
    (`looped_curve.rows_from_start`: the schedule's terms of the rows kept are summed from step 0 all the same);
    --curve-start with a law that reads no curves is refused."""
    if req.curve_sigma != "off" and not law_class(req.law).reads_curves:
        raise InputError(f"--curve-sigma weighs the evaluations of a loss curve: --law {req.law} fits final points")
    if not req.curve_start:
        return table
    if not law_class(req.law).reads_curves:
        raise InputError(f"--curve-start drops evaluations of a loss curve: --law {req.law} fits final points")
    kept = table.loc[rows_from_start(table, req.curve_start)].reset_index(drop=True)
    check_fit_size(kept, req.law)
    return kept


def without_lr_grid(raw):
    """The table without an lr grid's runs (lr_scale other than 1: trained off the transferred lr on purpose,
    hydra/sweeper=lr_grid); a note on stderr says how many were left out (`loopscale validate` reads them)."""
    lr = lr_rows(raw)
    if not lr.any():
        return raw
    print(f"note: {int(lr.sum())} lr-grid runs (lr_scale != 1) left out of the fit; loopscale validate reads them",
          file=sys.stderr)  # fmt: skip
    return raw[~lr].reset_index(drop=True)


def fit_groups(req: FitRequest, raw, tables: list) -> list:
    """[(group value, table, FitResult)]: `fit_table` on each group, each result recording its input
    (the file's path and hash, its rows, the columns used) and its group."""
    path = req.tables[0]
    input_info = {"path": str(path), "sha256": file_sha256(path), "n_rows": len(raw), **column_record(tables[0][1])}
    results = []
    with np.errstate(all="ignore"):
        for g, table in tables:
            result = fit_table(table, req.law, req.loss, holdout=req.holdout_largest, curve_sigma=req.curve_sigma,
                               **_fit_keywords(req))  # fmt: skip
            if req.curve_start:  # what `validate` drops again
                result.settings = result.settings.replace(curve_start=req.curve_start)
            result.input = dict(input_info, n_rows_used=len(table))
            if g is not None:
                result.group = {"column": req.group, "value": g.item() if hasattr(g, "item") else g}
            results.append((g, table, result))
    return results


def column_record(table) -> dict:
    """What fit.json records about the columns: the source column actually used for each canonical
    one, and the columns an explicit mapping shadowed (`runs_table.canonical_table` keeps both)."""
    return {
        "columns": dict(table.attrs.get("columns_used", {})),
        "ignored_columns": list(table.attrs.get("columns_ignored", [])),
    }


def joint_law(req: FitRequest):
    """The per-recipe form of --law that `fit --joint` fits, after the options a joint fit refuses."""
    law = per_recipe_form(req.law)
    if law is None:
        forms = [n for n in law_names() if per_recipe_form(n) is not None]
        raise InputError(f"--joint fits the {' or '.join(forms)} law (one phi per recipe); got --law {req.law}")
    if req.group:
        raise InputError("--joint and --group exclude each other (--joint fits the groups together)")
    if req.holdout_largest:  # refused, not ignored: the user would read a holdout that was never run
        raise InputError("--holdout-largest is not available with --joint (fit each recipe alone with --group)")
    return law


def read_joint_tables(req: FitRequest, law) -> tuple[list, list[dict]]:
    """(each table read canonical for the joint law, what the fit records of each file)."""
    tables, inputs = [], []
    for path in req.tables:
        try:
            raw = read_table(path)
            check_seed_column(req, raw.columns, str(path))
            table = canonical_table(raw, law.name, req.columns)
        except LoopscaleError as err:  # said with the table it came from
            raise InputError(f"{err} ({path})") from None
        tables.append(table)
        inputs.append({"path": str(path), "sha256": file_sha256(path), "n_rows": len(raw), **column_record(table)})
    return tables, inputs


def merged_joint_table(req: FitRequest, tables: list) -> tuple:
    """(the tables merged into one joint table, its recipes, the rows two tables shared), checked before the fit:
    a run shared by two tables counts once, --drop-top-k of the merged table, --cluster on it and per recipe."""
    table, recipes = joint_table(tables, req.joint)
    n_duplicates = sum(len(t) for t in tables) - len(table)
    table = drop_top_k(table, req.drop_top_k)
    req.cluster = bootstrap_cluster(req, table)
    check_joint_inputs(table, recipes, req.bootstrap, req.cluster)
    return table, recipes, n_duplicates


def fit_joint_table(req: FitRequest, law, table, recipes, inputs: list[dict], n_duplicates: int):
    """The joint fit of the merged table (`loopscale.fit.joint`), recording its input tables."""
    with np.errstate(all="ignore"):
        result = fit_joint(table, req.joint, recipes, req.loss, law_name=law.name, **_fit_keywords(req))
    result.input = {"tables": inputs, "n_rows_used": len(table), "n_duplicate_rows_dropped": n_duplicates}
    return result
