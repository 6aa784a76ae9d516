"""Reading and validating a runs table, with column mapping for tables written by other tools.

Canonical columns (the names `loopscale collect` writes): ``r``, ``N_once``, ``N_rec``, ``N``,
``D`` (tokens), ``C`` (training FLOPs), ``L`` (loss); optional ``variant``, ``width``, ``seed``,
``run_dir`` and anything else are kept as they are. `ColumnMap` renames external columns to these
(e.g. ``N="Model Size", C="Training FLOP", L="loss"``). When there is no D column, D = C / (6 N)
for the chinchilla law and D = C / (6 (N_once + r N_rec)) for the looped laws (the training cost of
the looped model, 6 FLOPs per parameter pass per token).

Every problem is a ValueError whose message names the column and the rows, so the CLI can print it
as one line.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .laws import make_law


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


def read_table(path) -> pd.DataFrame:
    """CSV (default), Parquet (.parquet/.pq) or JSON lines (.jsonl); ValueError if unreadable."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"cannot read {path}: no such file")
    try:
        suffix = path.suffix.lower()
        if suffix in (".parquet", ".pq"):
            return pd.read_parquet(path)
        if suffix == ".jsonl":
            return pd.read_json(path, lines=True)
        return pd.read_csv(path)
    except Exception as err:  # pandas raises many types; the user needs one line
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ValueError(f"cannot read {path} as a table: {first}") from None


def required_columns(law: str, has: set[str]) -> list[str]:
    """Canonical columns a law needs, given which canonical columns are present."""
    size = ["N"] if law == "chinchilla" else ["N_once", "N_rec", "r"]
    tokens = ["D"] if "D" in has or "C" not in has else ["C"]
    return size + tokens + ["L"]


def canonical_table(raw: pd.DataFrame, law: str, columns: ColumnMap | None = None) -> pd.DataFrame:
    """Rename mapped columns, check them, and add D (from C) when missing. Raises ValueError."""
    columns = columns or ColumnMap()
    mapping = {src: canon for canon, src in columns.as_dict().items() if src in raw.columns}
    table = raw.rename(columns=mapping)
    table = table.loc[:, ~table.columns.duplicated()].copy()
    present = set(table.columns)
    if law == "chinchilla" and "N" not in present and {"N_once", "N_rec"} <= present:
        table["N"] = table["N_once"] + table["N_rec"]
        present.add("N")
    need = required_columns(law, present)
    src_of = columns.as_dict()
    for canon in need:
        if canon not in present:
            hint = {"D": " (or a compute column C to derive D = C / 6N)"}.get(canon, "")
            raise ValueError(f"missing column {src_of[canon]!r} for {canon}{hint}; "
                             f"columns are {list(raw.columns)} (map names with --{_opt(canon)})")
    for canon in need:
        values = pd.to_numeric(table[canon], errors="coerce").to_numpy(dtype=float)
        bad = ~np.isfinite(values)
        if bad.any():
            raise ValueError(f"column {src_of[canon]!r} has {int(bad.sum())} missing, non-numeric "
                             f"or infinite values (rows {_rows(bad)})")
        table[canon] = values
        lower_ok = values >= 0 if canon in ("N_once", "N_rec") else values > 0
        if canon == "r":
            lower_ok = values >= 1
        if not lower_ok.all():
            rule = {"N_once": ">= 0", "N_rec": ">= 0", "r": ">= 1"}.get(canon, "> 0")
            raise ValueError(f"column {src_of[canon]!r} must be {rule}; rows {_rows(~lower_ok)} "
                             "are not")
    if law != "chinchilla":
        zero = (table["N_once"] + table["N_rec"]) <= 0
        if zero.any():
            raise ValueError(f"N_once + N_rec must be > 0; rows {_rows(zero.to_numpy())} are not")
    if "D" not in need:
        cost_N = table["N"] if law == "chinchilla" else table["N_once"] + table["r"] * table["N_rec"]
        table["D"] = table["C"] / (6.0 * cost_N)
    if "C" not in table.columns:
        cost_N = table["N"] if law == "chinchilla" else table["N_once"] + table["r"] * table["N_rec"]
        table["C"] = 6.0 * cost_N * table["D"]
    check_fit_size(table, law)
    return table.reset_index(drop=True)


def check_fit_size(table: pd.DataFrame, law: str) -> None:
    """Enough rows (twice the parameter count) and, for looped laws, at least two r values."""
    if law != "chinchilla":
        r_values = np.unique(table["r"].to_numpy(dtype=float))
        if len(r_values) < 2:
            raise ValueError(f"law {law!r} needs runs at two or more r values to identify phi; "
                             f"all rows have r = {r_values[0]:g} (use --law chinchilla)")
        if law == "looped-free" and 1.0 not in r_values:
            raise ValueError("law 'looped-free' needs r = 1 runs (k_1 = 1 anchors the multipliers)")
    n_params = make_law(law, table["r"] if "r" in table else None).n_params
    if len(table) < 2 * n_params:
        raise ValueError(f"{len(table)} rows is too few for law {law!r} with {n_params} parameters "
                         f"(need at least {2 * n_params})")


def load_runs_table(path, law: str, columns: ColumnMap | None = None) -> pd.DataFrame:
    """read_table + canonical_table."""
    return canonical_table(read_table(path), law, columns)


def _opt(canon: str) -> str:
    return {"N_once": "n-once-col", "N_rec": "n-rec-col", "N": "n-col", "D": "d-col",
            "C": "c-col", "L": "loss-col", "r": "r-col"}[canon]


def _rows(mask: np.ndarray, limit: int = 5) -> str:
    idx = np.flatnonzero(mask)
    shown = ", ".join(str(i) for i in idx[:limit])
    return shown + (f", ... ({len(idx)} in all)" if len(idx) > limit else "")
