"""What `loopscale plot` and `loopscale report` read, before anything is drawn: a table file mapped and checked for
the fit's law, a sweep directory collected, several sources merged into one table (a run found in several kept
once), the tables a joint fit recorded for recipes the sources lack, the fits (the --compare ones by their legend
names), the fit's verdict, a `loopscale validate` record, and every file they read (none may be an output)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from loopscale.analysis.conditioning import verdict
from loopscale.errors import InputError, LoopscaleError
from loopscale.fit.laws.registry import find_law
from loopscale.fit.result import load_fit
from loopscale.fit.runs_table import ColumnMap, drop_top_k
from loopscale.fit.validation.record import ValidationRecord
from loopscale.fit.verdict_record import Conditioning
from loopscale.plots.inputs import as_looped_table, free_multipliers, read_table
from loopscale.plots.recipes import fit_name
from loopscale.train.collect import collect
from loopscale.train.run_json import TABLE_COLUMNS


def named_fits(compare: dict) -> dict:
    """The --compare fits by the name their legend shows: their recipe, else the file's stem."""
    out = {}
    for path, f in compare.items():
        name = fit_name(f, Path(path).stem)
        out[name if name not in out else f"{name} ({Path(path).stem})"] = f
    return out


def read_fits(fit_path: str | None, compare_paths=(), free_path: str | None = None):
    """(the fit, the --compare fits by their legend names, the --free fit), each None or empty when not given; one
    line naming what cannot be read or used (--compare without --fit, a --compare fit without phi, a --free fit
    that is not looped-free)."""
    fit = load_fit(fit_path) if fit_path else None
    compare = {path: load_fit(path) for path in compare_paths}
    free = load_fit(free_path) if free_path else None
    if free is not None:
        free_multipliers(free)  # checks it is a looped-free fit
    if compare and fit is None:
        raise InputError("--compare needs --fit")
    for f in ([fit] if fit is not None else []) + list(compare.values()):
        if compare and "phi" not in f.params:
            raise InputError(f"--compare needs looped fits with phi; got a {f.law!r} fit")
    return fit, named_fits(compare), free


def input_files(tables, fit=None, compare=(), free=None, validation=None) -> list[tuple[str, Path]]:
    """The files plot / report read: the tables, the fit and the fits beside it, the validation record."""
    found = [("the input table", Path(t)) for t in tables if Path(t).is_file()]
    found += [("the fit", Path(fit))] if fit else []
    found += [("a --compare fit", Path(p)) for p in compare]
    found += [("the --free fit", Path(free))] if free else []
    found += [("the --validation record", Path(validation))] if validation else []
    return found


def plot_table(paths, columns, fit, fit_path, top_k: int = 0):
    """The table files `plot` reads as one (`merge_sources`), a joint fit's recorded tables for the recipes they
    lack, without the `top_k` highest-loss rows."""
    table, _ = merge_sources([(read_table_file(t, columns, fit.law), None) for t in paths])
    if per_recipe(fit):
        extra = joint_recorded_tables(fit, table, Path(fit_path))
        table = merge_sources([(table, None), *extra])[0] if extra else table
    return drop_top_k(table, top_k)


def report_table(sources, columns, fit, fit_path, top_k: int = 0):
    """(table, problems) of the sources `report` reads (sweep directories collected, table files read: `read_source`)
    as one, a joint fit's recorded tables for the recipes they lack, without the `top_k` highest-loss rows."""
    parts = [read_source(Path(s), columns, fit.law if fit is not None else None) for s in sources]
    table, problems = merge_sources(parts)
    if fit is not None and per_recipe(fit) and len(table):
        extra = joint_recorded_tables(fit, table, Path(fit_path))
        table, problems = merge_sources([(table, problems), *extra]) if extra else (table, problems)
    return (drop_top_k(table, top_k) if len(table) else table), problems


def read_table_file(path, columns=None, law=None):
    """A table file read for the figures: mapped and checked for the fit's law when a mapping is given or the
    law reads no looped columns (`Law.dense`: chinchilla)."""
    known = find_law(law) if law is not None else None
    canonical = columns is not None or (known is not None and known.dense)
    try:
        table = read_table(path, columns, law if canonical else None)
    except InputError as err:  # `fit`'s mapping options are --n-col etc.; here it is --columns
        hint = "map names with --columns, e.g. --columns 'N=Model Size,C=Training FLOP,L=loss'"
        raise InputError(re.sub(r"map names with --[a-z-]+", hint, str(err))) from None
    return table


def per_recipe(fit) -> bool:
    """Whether the fit is of a per-recipe law (`Law.per_recipe`: a joint fit, whose recipes' tables it recorded)."""
    law = find_law(fit.law)
    return law is not None and law.per_recipe


def read_source(source: Path, columns=None, law=None):
    """(table, problems): a sweep directory is collected (problems = unfinished runs); a table file
    is read as is (problems = None: a bare table says nothing about missing runs)."""
    if source.is_dir():
        rows, problems = collect(source)
        if not rows and not problems:
            raise InputError(f"{source} holds no runs (no run.json, checkpoint or Hydra config below it)")
        table = pd.DataFrame(rows, columns=TABLE_COLUMNS)
        if rows:
            table = as_looped_table(table, source=f"runs collected from {source}")
        return table, problems
    if not source.exists():
        raise InputError(f"{source} does not exist")
    return read_table_file(source, columns, law), None


def merge_sources(parts):
    """(table, problems) of several sources read as one: a run found in several (the baseline's r = 1 runs
    in every recipe's table) is kept once, as `fit T1 T2 --joint` keeps it: same law inputs and, for r > 1,
    the same recipe. problems: every sweep's unfinished runs (None when every source is a bare table)."""
    tables = [t for t, _ in parts if len(t)]
    problems = None if all(p is None for _, p in parts) else [x for _, p in parts for x in (p or [])]
    if len(parts) == 1:
        return parts[0][0], problems
    if not tables:
        return parts[0][0], problems
    table = pd.concat(tables, ignore_index=True)
    key_cols = [c for c in ("N_once", "N_rec", "r", "D", "L") if c in table]
    key = table[key_cols].astype(float)
    if "recipe" in table:
        looped = table["r"].to_numpy(dtype=float) > 1
        key = key.assign(_recipe=np.where(looped, table["recipe"].astype(str), ""))
    return table[~key.duplicated().to_numpy()].reset_index(drop=True), problems


def joint_recorded_tables(fit, table, fit_path: Path) -> list:
    """The tables a joint fit recorded (`fit T1 T2 --joint`), read with the column mapping it recorded, for
    the recipes the given sources lack; [] when none is missing. A InputError names a recipe still missing."""
    j = fit.joint or {}
    col = j.get("column") or "recipe"

    def missing(t):
        have = set() if col not in t else set(t.loc[t["r"].to_numpy(dtype=float) > 1, col].astype(str))
        return [g for g in j.get("recipes", []) if g not in have]

    lacking = missing(table)
    if not lacking:
        return []
    found = []
    for record in (fit.input or {}).get("tables", []):
        where = [Path(record.get("path", "")), fit_path.parent / record.get("path", "")]
        path = next((p for p in where if p.name and p.is_file()), None)
        if path is None:
            continue
        fields = set(ColumnMap.__dataclass_fields__)
        mapping = {c: s for c, s in (record.get("columns") or {}).items() if c in fields and "(" not in s}
        try:
            found.append((read_table_file(path, ColumnMap(**mapping), fit.law), None))
        except (LoopscaleError, ValueError, OSError) as err:  # a recorded table that changed since the fit
            raise InputError(f"cannot read {path}, a table the joint fit recorded: {err}") from None
    still = missing(merge_sources([(table, None), *found])[0]) if found else lacking
    if still:
        raise InputError(
            f"the joint fit covers recipes {', '.join(j.get('recipes', []))}, but the runs given have no looped "
            f"runs of {', '.join(still)} (nor do the tables the fit recorded): give its sweep or table too, "
            "e.g. `loopscale report runs/baseline runs/mine --fit joint.json`"
        )
    return found


def fit_verdict(table, fit) -> Conditioning | None:
    """The fit's verdict (analysis/conditioning.py `verdict`): as the record stores it, or computed from the
    table for a looped fit written before fits carried it; a record it cannot be computed for says so."""
    if fit is None:
        return None

    try:
        return verdict(table, fit)
    except (InputError, KeyError, ValueError) as err:
        why = str(err).splitlines()[0] if str(err) else type(err).__name__
        line = f"not measured: {why}" if isinstance(err, InputError) else f"not measured: no checks ({why})"
        return Conditioning([], [], line, False)


def read_validation(path: str | None, fit=None, fit_path=None, allow_other_fit: bool = False):
    """(a `loopscale validate` record or None without --validation, a warning line or None); one line when it is
    not one, or when it validates another fit than `fit` (the report's --fit, at `fit_path`: its law and
    parameters differ) unless allow_other_fit: then the warning says so in the report."""
    if path is None:
        return None, None

    try:
        record = json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        raise InputError(f"cannot read --validation {path}: {str(err).splitlines()[0]}") from None
    if not isinstance(record, dict) or not {"verdict", "results", "forms", "folds"} <= record.keys():
        raise InputError(f"--validation {path} is not a `loopscale validate` record")
    of = record.get("fit") if isinstance(record.get("fit"), dict) else {}
    record = ValidationRecord.from_json(record)
    if fit is None or (of.get("law"), of.get("params")) == (fit.law, json.loads(json.dumps(fit.params))):
        return record, None
    which = f"{of.get('json')} " if of.get("json") else ""
    line = f"--validation {path} validates another fit ({which}{of.get('law')} law, other parameters) than --fit"
    if not allow_other_fit:
        raise InputError(f"{line} {fit_path}: validate this fit, or give --allow-other-fit to show it")
    return record, f"{line}: shown by --allow-other-fit; its checks are not of this fit"
