"""Inference-time r as an axis of `loopscale advise`: for a budget of forward FLOPs per token, more passes of a
model or a bigger model at fewer passes? Read from a test-time fit (`loopscale fit --law testtime`: each model's
L(r_eval), loopscale/fit/testtime.py) and its table (the forward FLOPs per token of each model at each r_eval,
which `loopscale collect` writes from the accounting).

For each model the forward FLOPs per token are linear in the pass count, F(r) = a + b r (the passes of the recurrent
block add b each: `accounting.eval_flops_at`), so a and b come exactly from two of its rows. Every whole r from 1
to `reach` x its largest measured r_eval with F(r) <= the budget is a candidate, its loss the model's fitted curve;
the model's best is the fewest passes within TIE_REL (0.01%) of its lowest loss (a saturated curve still falls by
1e-9 a pass), the advice the best over models. A candidate beyond the
model's largest measured r_eval is extrapolated and marked so; a model whose fit is "not measured" carries that
verdict into its row. Pure: no fitting, no torch. `read_testtime_record` tells a test-time fit from others,
`recorded_table` reads the table it was fitted to, `inference_lines` is what `advise` prints.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from loopscale.errors import InputError
from loopscale.fit.laws.registry import find_law
from loopscale.fit.result import read_fit_json
from loopscale.fit.runs_table import read_table
from loopscale.fit.testtime import TestTimeColumns, curve, testtime_table

FLOPS_COLUMN = "flops_per_token_eval"  # what collect writes: forward FLOPs per token at r_eval
REACH = 2.0  # candidates up to this many times a model's largest measured r_eval
# a pass is worth running when it gains more than this share of the loss: on a saturated curve the loss still falls
# by 1e-9 a pass, and the fewest passes within this of the lowest are the model's best
TIE_REL = 1e-4


def read_testtime_record(path: str) -> dict | None:
    """The record at `path` when it is a test-time fit (its law reads a test-time table), else None."""
    try:
        record = read_fit_json(path)  # its size, value count and depth bounded as every fit record's
    except InputError:
        return None  # advise's own reading says what is wrong with it
    law = find_law(str(record.get("law"))) if isinstance(record, dict) else None
    return record if law is not None and law.table == "test-time" else None


def recorded_table(record: dict, path=None) -> tuple[Path, pd.DataFrame]:
    """(path, the test-time table at `path`, default the one the fit read, mapped with the columns the fit used)."""
    path = Path(path or record["input"]["path"])
    if not path.is_file():
        raise InputError(f"the test-time table {path} is not a file: give it with --table PATH")
    mapping = {k: v for k, v in record["input"].get("columns", {}).items() if v is not None}
    columns = TestTimeColumns(
        model=mapping.get("model", "model"),
        r_eval=mapping.get("r_eval", "r_eval"),
        r_train=mapping.get("r_train", "r_train"),
        L=mapping.get("L"),
    )
    return path, testtime_table(read_table(path), columns)


def flops_line(rows: pd.DataFrame) -> tuple[float, float]:
    """(a, b) of F(r) = a + b r through a model's rows (least squares; exact for the accounting's values)."""
    r = rows["r_eval"].to_numpy(float)
    F = rows[FLOPS_COLUMN].to_numpy(float)
    if len(np.unique(r)) < 2:
        return float(F[0]), 0.0
    b, a = np.polyfit(r, F, 1)
    return float(a), float(b)


def inference_advice(record: dict[str, Any], table: pd.DataFrame, inference_flops: float, reach: float = REACH):
    """{"per_model": [...], "best": {...}, "answer": str} for a budget of `inference_flops` forward FLOPs per token
    (`record`: a test-time fit's record; `table`: its canonical test-time table with FLOPS_COLUMN)."""
    if FLOPS_COLUMN not in table.columns:
        raise InputError(
            f"the test-time table has no {FLOPS_COLUMN!r} column (the forward FLOPs per token at each r_eval, "
            "which `loopscale collect` writes): the inference budget cannot be matched"
        )
    per_model = []
    for model, fit in record["per_model"].items():
        rows = table[table["model"].astype(str) == model]
        a, b = flops_line(rows)
        first = rows.iloc[0]
        measured_max = float(rows["r_eval"].max())
        r = np.arange(1, int(np.floor(reach * measured_max)) + 1, dtype=float)
        F = a + b * r
        feasible = F <= inference_flops
        size = float(first["N_once"] + first["N_rec"]) if {"N_once", "N_rec"} <= set(rows.columns) else None
        entry = {
            "model": model,
            "trained": "fixed r" if first["fixed"] else "sampled r",
            "N_unique": size,
            "flops_at_r1": float(a + b),
            "verdict": fit["conditioning"]["verdict"],
        }
        if not feasible.any():
            per_model.append({**entry, "feasible": False})
            continue
        L = curve(fit["params"], model, float(first["r_scale"]), bool(first["fixed"]), r[feasible])
        k = int(np.flatnonzero(L <= L.min() * (1 + TIE_REL))[0])  # the fewest passes within TIE_REL of the lowest
        per_model.append(
            {
                **entry,
                "feasible": True,
                "r": int(r[feasible][k]),
                "flops_per_token": float(F[feasible][k]),
                "L": float(L[k]),
                "extrapolated": bool(r[feasible][k] > measured_max),
            }
        )
    feasible = [m for m in per_model if m["feasible"]]
    if not feasible:
        cheapest = min(m["flops_at_r1"] for m in per_model)
        raise InputError(
            f"no model runs one pass within {inference_flops:.3g} FLOPs per token (the cheapest needs {cheapest:.3g})"
        )
    best = min(feasible, key=lambda m: m["L"])
    return {"inference_flops": inference_flops, "per_model": per_model, "best": best, "answer": _answer(best, feasible)}


def _answer(best: dict, feasible: list[dict]) -> str:
    """More passes or a bigger model: the best against the runner-up of another size (by unique parameters)."""
    others = [m for m in feasible if m is not best]
    head = f"best: {best['model']} at r = {best['r']} (L = {best['L']:.4g}, {best['flops_per_token']:.3g} FLOPs/token)"
    if not others:
        return head
    runner = min(others, key=lambda m: m["L"])
    gap = f"{runner['model']} at r = {runner['r']} gives L = {runner['L']:.4g}"
    if best["N_unique"] is None or runner["N_unique"] is None or best["N_unique"] == runner["N_unique"]:
        return f"{head}; next: {gap}"
    if best["N_unique"] < runner["N_unique"]:
        return f"{head}: more passes of the smaller model beat the bigger one ({gap})"
    return f"{head}: the bigger model at fewer passes beats more passes of the smaller one ({gap})"


def inference_lines(out: dict[str, Any], inference_flops: float, path) -> list[str]:
    """What `advise TT.json --max-inference-flops I` prints: each model's best pass count (or that one pass is over
    the budget), then the answer."""
    lines = [f"inference budget {inference_flops:.3g} forward FLOPs per token (test-time fit, {path}):"]
    for m in out["per_model"]:
        if not m["feasible"]:
            lines.append(f"  {m['model']}: one pass needs {m['flops_at_r1']:.3g} FLOPs per token, over the budget")
            continue
        note = " (extrapolated past its measured r_eval)" if m["extrapolated"] else ""
        lines.append(
            f"  {m['model']} ({m['trained']}): r = {m['r']}, L = {m['L']:.4g}, {m['flops_per_token']:.3g} "
            f"FLOPs per token{note}; {m['verdict']}"
        )
    return [*lines, out["answer"]]
