"""Reading and validating a runs table, with column mapping for tables written by other tools.

Canonical columns (the names `loopscale collect` writes): ``r``, ``N_once``, ``N_rec``, ``N``,
``D`` (tokens), ``C`` (training FLOPs), ``L`` (loss); optional ``recipe``, ``width``, ``seed``,
``run_dir`` and anything else are kept as they are. `ColumnMap` renames external columns to these
(e.g. ``N="Model Size", C="Training FLOP", L="loss"``). Which columns a law reads, and the N of C = 6 N D
with which D is derived when there is no D column, the law says (`loopscale.fit.laws.form.Law`: D = C / (6 N)
for the chinchilla law, D = C / (6 (N_once + r N_rec)) for the looped laws, the training cost of the looped
model, 6 FLOPs per parameter pass per token).

Every problem is a ValueError whose message names the column and the rows, so the CLI can print it
as one line. `budget_column` and `budget_clusters` give each run's compute budget and its group label,
the one rule by which the fitter's cluster bootstrap and holdout, the figures and the report group runs.
"""

from __future__ import annotations

import csv as csv_module
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from loopscale.errors import InputError
from loopscale.fit.laws.form import compute_from_tokens, tokens_from_compute
from loopscale.fit.laws.registry import law_class, make_law
from loopscale.fit.points import LR_LOOP_COLUMN, check_one_lr_loop


@dataclass(frozen=True)
class ColumnMap:
    """Name in the input table of each canonical column."""

    r: str = "r"
    N_once: str = "N_once"
    N_rec: str = "N_rec"
    N: str = "N"
    D: str = "D"
    C: str = "C"
    L: str = "L"

    def as_dict(self) -> dict[str, str]:
        return asdict(self)

    @classmethod
    def parse(cls, text: str | None) -> ColumnMap | None:
        """The map given as 'N=Model Size,C=Training FLOP,L=loss' (`plot` / `report --columns`; None: none), or
        an InputError naming the item that is not CANON=column, an unknown canonical name or one mapped twice."""
        if text is None:
            return None
        pairs: dict[str, str] = {}
        for item in (part.strip() for part in text.split(",")):
            canon, eq, column = (x.strip() for x in item.partition("="))
            if not eq or not canon or not column:
                raise InputError(f"--columns: {item!r} is not CANON=column (e.g. N=params)")
            if canon not in cls.__dataclass_fields__:
                raise InputError(f"--columns: {canon!r} is not one of {', '.join(cls.__dataclass_fields__)}")
            if canon in pairs:
                raise InputError(f"--columns: {canon} is mapped twice")
            pairs[canon] = column
        return cls(**pairs)


def read_table(path) -> pd.DataFrame:
    """CSV (default), Parquet (.parquet/.pq) or JSON lines (.jsonl); ValueError if unreadable, truncated
    (a text table whose last line is cut), header-only, or with a column name given twice."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"cannot read {path}: it is a directory, not a table file")
    if not path.is_file():
        raise InputError(f"cannot read {path}: no such file")
    suffix = path.suffix.lower()
    if suffix not in (".parquet", ".pq"):
        _check_complete_text(path, csv=suffix != ".jsonl")
    try:
        if suffix in (".parquet", ".pq"):
            table = pd.read_parquet(path)
        elif suffix == ".jsonl":
            table = _read_jsonl(path)
        else:
            table = pd.read_csv(path)
    except Exception as err:  # pandas raises many types; the user needs one line
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise InputError(f"cannot read {path} as a table: {first}") from None
    if table.columns.duplicated().any():
        raise InputError(
            f"{path}: column(s) {sorted(set(table.columns[table.columns.duplicated()]))} appear more than once"
        )
    if len(table) == 0:
        raise InputError(f"{path} has no rows (only a header)")
    if "variant" in table.columns and "recipe" not in table.columns:
        table = table.rename(columns={"variant": "recipe"})  # runs tables before 0.2 named the recipe `variant`
    if LR_LOOP_COLUMN in table.columns:  # collect leaves it empty at 1: a value to group by (`fit --group lr_loop`)
        table[LR_LOOP_COLUMN] = table[LR_LOOP_COLUMN].fillna(1.0)
    return table


def _read_jsonl(path: Path) -> pd.DataFrame:
    """JSON lines, one object per line; a key given twice in one object is refused (json and pandas would
    silently keep the last value)."""

    def no_repeats(pairs):
        keys = [k for k, _ in pairs]
        repeated = sorted({k for k in keys if keys.count(k) > 1})
        if repeated:
            raise InputError(f"key(s) {repeated} appear more than once in one object")
        return dict(pairs)

    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line, object_pairs_hook=no_repeats))
                except ValueError as err:
                    raise InputError(f"line {n}: {err}") from None
    if any(not isinstance(row, dict) for row in rows):
        raise InputError("every line must be a JSON object")
    return pd.DataFrame.from_records(rows)


def _check_complete_text(path: Path, csv: bool) -> None:
    """A text table cut by a full disk or a kill mid-write ends without a newline, or (CSV) its last line
    has fewer fields than the header; pandas would read the cut row as data. Also rejects a CSV header
    that names a column twice (pandas silently renames the second to NAME.1)."""
    size = path.stat().st_size
    if size == 0:
        return  # pandas reports the empty file
    with open(path, "rb") as f:
        f.seek(max(0, size - 65536))
        tail = f.read()
        f.seek(0)
        head = f.readline()
    if not tail.endswith(b"\n"):
        raise InputError(
            f"{path} is incomplete: its last line has no line ending (a cut write?); "
            "write the table again (e.g. rerun `loopscale collect`)"
        )
    if not csv:
        return
    header = next(csv_module.reader([head.decode("utf-8", "replace")]), [])
    dups = sorted({name for name in header if header.count(name) > 1})
    if dups:
        raise InputError(f"{path}: column(s) {dups} appear more than once in the header")
    lines = tail.rstrip(b"\r\n").splitlines()
    header_only = size <= len(tail) and len(lines) == 1
    if lines and not header_only:
        last = next(csv_module.reader([lines[-1].decode("utf-8", "replace")]), [])
        if len(last) != len(header):
            raise InputError(
                f"{path} is incomplete: its last line has {len(last)} fields, the header "
                f"{len(header)} (a cut write?); write the table again"
            )


def required_columns(law: str, has: set[str]) -> list[str]:
    """Canonical columns a law needs, given which canonical columns are present."""
    size = list(law_class(law).size_columns)
    tokens = ["D"] if "D" in has or "C" not in has else ["C"]
    return size + tokens + ["L"]


def law_columns(law: str | None, raw_columns, columns: ColumnMap) -> set[str]:
    """The canonical columns `law` can read from a table with these columns: its size columns (the chinchilla
    law N, or N_once + N_rec when the table has no N: `Law.derivable`; the looped laws r, N_once, N_rec), D or
    C, and L. Mappings of the others are not looked at (so `--law chinchilla --n-col N_once` is not ambiguous)."""
    if law is None:
        return set(ColumnMap.__dataclass_fields__)
    cls = law_class(law)
    wanted = set(cls.size_columns) | {"D", "C", "L"}
    source = columns.as_dict()
    for canon, parts in cls.derivable.items():
        if source[canon] not in set(raw_columns):
            wanted |= set(parts)
    return wanted


def resolve_columns(raw_columns, columns: ColumnMap, law: str | None = None) -> tuple[dict[str, str], list[str]]:
    """{source: canonical} renames for a table, and the columns an explicit mapping shadows.

    An explicit mapping wins: with `--loss-col loss` the table's own `L` column (if any) is ignored,
    not fitted. Errors (ValueError): an explicitly named column that is absent while the default one
    is present (the fit would silently use the column the user did not name); one source column
    mapped to two quantities; a column name that appears twice in the table (which one to fit?).
    """
    present = list(raw_columns)
    wanted = law_columns(law, present, columns)
    mapping = {canon: src for canon, src in columns.as_dict().items() if canon in wanted}
    for canon, src in mapping.items():
        if src != canon and src not in present and canon in present:
            raise InputError(
                f"column {src!r} (given by --{_opt(canon)}) is not in the table; it has "
                f"{canon!r}, which an explicit mapping does not fall back to"
            )
    used = {canon: src for canon, src in mapping.items() if src in present}
    by_source: dict[str, list[str]] = {}
    for canon, src in used.items():
        by_source.setdefault(src, []).append(canon)
    for src, canons in by_source.items():
        if len(canons) > 1:
            explicit = [c for c in canons if mapping[c] != c]
            raise InputError(
                f"ambiguous column mapping: column {src!r} is mapped to "
                f"{' and '.join(canons)} (check --{_opt(explicit[0] if explicit else canons[0])})"
            )
    for src in used.values():
        if present.count(src) > 1:
            raise InputError(f"ambiguous table: column {src!r} appears {present.count(src)} times")
    sources = set(used.values())
    ignored = [canon for canon, src in used.items() if src != canon and canon in present and canon not in sources]
    return {src: canon for canon, src in used.items()}, ignored


def canonical_table(raw: pd.DataFrame, law: str, columns: ColumnMap | None = None) -> pd.DataFrame:
    """Rename mapped columns, check them, and add D (from C) when missing. Raises ValueError.

    The returned table's `attrs["columns_used"]` maps each canonical column the law reads to the
    source column it came from (or how it was derived), and `attrs["columns_ignored"]` lists the
    columns an explicit mapping shadowed: what fit.json records.
    """
    columns = columns or ColumnMap()
    mapping, ignored = resolve_columns(raw.columns, columns, law)
    table = raw.drop(columns=ignored).rename(columns=mapping)
    table = table.loc[:, ~table.columns.duplicated()].copy()  # the columns the fit reads are unique
    cls = law_class(law)
    table = cls.rows_to_fit(table)
    present = set(table.columns)
    derived = {}
    for canon, parts in cls.derivable.items():  # e.g. the chinchilla law's N = N_once + N_rec
        if canon not in present and set(parts) <= present:
            table[canon] = sum(table[p] for p in parts)
            present.add(canon)
            derived[canon] = " + ".join(parts)
    need = required_columns(law, present)
    src_of = {**{c: c for c in need}, **columns.as_dict()}  # a law's own column (N_pass) is read by its name
    for canon in need:
        if canon not in present:
            hint = {"D": " (or a compute column C to derive D = C / 6N)"}.get(canon, "")
            how = f"map names with --{_opt(canon)}" if canon in ColumnMap.__dataclass_fields__ else "law " + law
            raise InputError(
                f"missing column {src_of[canon]!r} for {canon}{hint}; columns are {list(raw.columns)} ({how})"
            )
    _check_values(table, need, src_of, cls.zero_allowed)
    invalid = cls.invalid_rows(table)  # e.g. N_once + N_rec > 0
    if invalid is not None and invalid[0].any():
        raise InputError(f"{invalid[1]}; rows {_rows(invalid[0])} are not")
    cost_N = cls.cost_params(table)
    if "D" not in need:
        table["D"] = tokens_from_compute(table["C"], cost_N)
        cost = cls.cost_formula if " " not in cls.cost_formula else f"({cls.cost_formula})"
        derived["D"] = f"C / (6 {cost})"
    if "C" not in table.columns:
        table["C"] = compute_from_tokens(table["D"], cost_N)
    check_one_lr_loop(table)  # a loop-lr grid's runs are no seeds of one point (loopscale/fit/points.py)
    if not cls.per_recipe:  # a joint table is checked once the recipes' tables are merged
        check_fit_size(table, law)
    table = table.reset_index(drop=True)
    table.attrs["columns_used"] = {
        canon: derived.get(canon, src_of[canon]) for canon in list(need) + [c for c in derived if c not in need]
    }
    table.attrs["columns_ignored"] = ignored
    return table


def _check_values(table: pd.DataFrame, need, src_of: dict[str, str], zero_allowed=("N_once", "N_rec")) -> None:
    """Each column the law reads holds finite numbers within its range (the law's `zero_allowed`, e.g. N_once,
    N_rec, >= 0; r a whole number >= 1; the rest > 0), converted to float in place; a ValueError names the
    column and rows."""
    for canon in need:
        if not (
            pd.api.types.is_numeric_dtype(table[canon]) or pd.api.types.is_object_dtype(table[canon])
        ) or pd.api.types.is_bool_dtype(table[canon]):
            raise InputError(f"column {src_of[canon]!r} holds {table[canon].dtype} values, not numbers")
        values = pd.to_numeric(table[canon], errors="coerce").to_numpy(dtype=float)
        bad = ~np.isfinite(values)
        if bad.any():
            raise InputError(
                f"column {src_of[canon]!r} has {int(bad.sum())} missing, non-numeric "
                f"or infinite values (rows {_rows(bad)})"
            )
        table[canon] = values
        lower_ok = values >= 0 if canon in zero_allowed else values > 0
        if canon == "r":  # a recurrence count: a whole number of passes
            lower_ok = (values >= 1) & (values == np.round(values))
        if not lower_ok.all():
            rule = ">= 0" if canon in zero_allowed else "a whole number >= 1" if canon == "r" else "> 0"
            raise InputError(f"column {src_of[canon]!r} must be {rule}; rows {_rows(~lower_ok)} are not")


def check_fit_size(table: pd.DataFrame, law: str) -> None:
    """Enough rows (twice the parameter count) and what the law needs to be identified (`Law.check_table`:
    the looped laws two r values or more, looped-free r = 1 runs)."""
    if len(table) == 0:
        raise InputError(f"the table has no rows to fit with law {law!r}")
    law_class(law).check_table(table)
    n_params = make_law(law, table["r"] if "r" in table else None).n_params
    if len(table) < 2 * n_params:
        raise InputError(
            f"{len(table)} rows is too few for law {law!r} with {n_params} parameters (need at least {2 * n_params})"
        )


SEED_COLUMN = "seed"  # a run's seed: rows of one point with different seeds are replicates (`fit.noise`)
MAX_PLAUSIBLE = {"L": 100.0, "N_once": 1e30, "N_rec": 1e30, "N": 1e30, "D": 1e30, "C": 1e40}


def table_warnings(table: pd.DataFrame, law: str) -> list[str]:
    """What the fit should say about a canonical table it accepted: rows that repeat another row's point
    and loss exactly (a copied run counts twice and narrows every interval) or its point and seed (one run
    counted twice; other seeds are replicates), and values far outside any
    real run (a loss of 1e300 nats, 1e308 parameters), which the fit's arithmetic does not survive."""
    point = list(law_class(law).point_columns)
    out = []
    repeated = table.duplicated(subset=[c for c in point if c in table.columns], keep="first").to_numpy()
    if repeated.any():
        out.append(
            f"{int(repeated.sum())} rows repeat another row's {', '.join(point)} exactly (rows {_rows(repeated)}): "
            "a duplicated run counts twice and narrows every interval; drop the copies"
        )
    if SEED_COLUMN in table.columns:  # other seeds of a point are replicates; the same seed twice is one run
        inputs = [c for c in point if c in table.columns and c != "L"] + [SEED_COLUMN]
        rerun = table.duplicated(subset=inputs, keep="first").to_numpy() & table[SEED_COLUMN].notna().to_numpy()
        rerun &= ~repeated
        if rerun.any():
            out.append(
                f"{int(rerun.sum())} rows repeat another row's point and seed (rows {_rows(rerun)}): one seed's run "
                "counted twice narrows every interval; keep one (other seeds of a point are replicates)"
            )
    for col, limit in MAX_PLAUSIBLE.items():
        if col in table.columns:
            big = table[col].to_numpy(dtype=float) > limit
            if big.any():
                out.append(
                    f"column {col} reaches {table[col].max():.3g} (rows {_rows(big)}), beyond {limit:g}: not a "
                    f"real run's {'loss in nats' if col == 'L' else 'size'}; the fit's numbers mean nothing"
                )
    return out


def _opt(canon: str) -> str:
    return {
        "N_once": "n-once-col",
        "N_rec": "n-rec-col",
        "N": "n-col",
        "D": "d-col",
        "C": "c-col",
        "L": "loss-col",
        "r": "r-col",
    }[canon]


def _rows(mask: np.ndarray, limit: int = 5) -> str:
    idx = np.flatnonzero(mask)
    shown = ", ".join(str(i) for i in idx[:limit])
    return shown + (f", ... ({len(idx)} in all)" if len(idx) > limit else "")


def budget_clusters(C: np.ndarray) -> np.ndarray:
    """Cluster label per row: the compute budget rounded to 3 significant digits."""
    C = np.asarray(C, dtype=float)
    return np.array([float(f"{c:.3g}") for c in C])


def budget_column(table) -> np.ndarray:
    """The compute budget each run was given: `C_budget` where a sweep recorded it (the spent C scatters
    around it by batch rounding, so grouping by C would split one budget), else the spent C."""
    C = table["C"].to_numpy(dtype=float)
    if "C_budget" in table.columns:
        asked = pd.to_numeric(table["C_budget"], errors="coerce").to_numpy(dtype=float)
        C = np.where(np.isfinite(asked) & (asked > 0), asked, C)
    return C


def budgets(table: pd.DataFrame) -> np.ndarray:
    """Compute budget per row, rounded to 3 significant digits (`budget_column`: the requested C_budget where a
    row has it, else the spent C): the one rule that groups runs by budget, for the bootstrap's --cluster C,
    validate's folds and lr grid, Approach 2, the figures and the report."""
    return budget_clusters(budget_column(table))


def drop_top_k(table: pd.DataFrame, k: int, loss: str = "L") -> pd.DataFrame:
    """The table without its k highest-loss rows (ties broken by row order), as Besiroglu et al. 2024 did
    with the Chinchilla points: the worst-trained, smallest runs sit far above the law and pull the fit.
    k = 0 returns the table as it is; k < 0 or k >= the number of rows is an InputError."""
    if k == 0:
        return table
    if k < 0:
        raise InputError(f"--drop-top-k must be >= 0; got {k}")
    if k >= len(table):
        raise InputError(f"--drop-top-k {k} would drop every row of a {len(table)}-row table")
    if loss not in table.columns:
        raise InputError(f"--drop-top-k needs the loss column {loss!r}; columns are {list(table.columns)}")
    values = pd.to_numeric(table[loss], errors="coerce").to_numpy(dtype=float)
    order = np.argsort(-np.nan_to_num(values, nan=-np.inf), kind="stable")  # highest first; NaN never dropped
    keep = np.ones(len(table), dtype=bool)
    keep[order[:k]] = False
    out = table[keep].reset_index(drop=True)
    out.attrs = dict(table.attrs, rows_dropped_top_k=int(k))
    return out


# The runs table's column naming a forked branch's parent run (loopscale/train/forks.py): branches of one
# parent share its stable phase, so they are one draw, not independent runs.
PARENT_COLUMN = "parent"
MIN_CLUSTERS = 3  # fewer clusters than this give a bootstrap with nothing to resample


def is_forked(table) -> bool:
    """Whether some row is a branch of a forked run (a non-empty `parent`)."""
    if PARENT_COLUMN not in table.columns:
        return False
    parent = table[PARENT_COLUMN]
    return bool((parent.notna() & (parent.astype(str).str.strip() != "")).any())


def cluster_labels(table, cluster: str) -> np.ndarray:
    """The bootstrap's cluster label per row for `--cluster COL`: "C" groups rows by compute budget
    (`budget_clusters`), "parent" by the forked run a branch came from (a row without a parent, e.g. an
    unforked run, is a cluster of its own), any other column by its value. InputError (one line) for a
    missing column or empty values."""
    if cluster == "C":
        return budgets(table)
    if cluster not in table.columns:
        raise InputError(f"--cluster column {cluster!r} is not in the table (columns: {list(table.columns)})")
    values = table[cluster]
    if cluster == PARENT_COLUMN:
        own = table["run_dir"] if "run_dir" in table.columns else pd.Series(np.arange(len(table)), index=table.index)
        present = values.notna() & (values.astype(str).str.strip() != "")
        return np.where(present, "parent " + values.astype(str), "run " + own.astype(str)).astype(str)
    empty = values.isna().to_numpy()
    if empty.any():
        raise InputError(
            f"--cluster column {cluster!r} is empty in rows {_rows(empty)}: give every row a cluster, "
            "or resample rows (--cluster rows)"
        )
    return values.astype(str).to_numpy()


def check_clusters(labels: np.ndarray, cluster: str, where: str = "") -> None:
    """InputError unless the labels name at least MIN_CLUSTERS clusters (`where`: e.g. " in recipe X")."""
    n = len(np.unique(labels))
    if n < MIN_CLUSTERS:
        raise InputError(
            f"--cluster {cluster}: {n} cluster{'s' if n != 1 else ''}{where}, too few to resample "
            f"(need at least {MIN_CLUSTERS}); choose another column or resample rows (--cluster rows)"
        )
