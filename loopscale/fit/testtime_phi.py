"""Test-time phi: a fitted test-time curve (`loopscale.fit.testtime`) in unique parameters, through a training-time
fit (its E, A, alpha, B, beta and the model's N_once, N_rec, D): what one more pass at inference is worth, and the
exponent r^phi would need to carry the curve (`fit --law testtime --train-fit`)."""

from __future__ import annotations

from typing import Any, TypedDict

import numpy as np
import pandas as pd

from loopscale.fit.laws.form import tokens_from_compute
from loopscale.fit.testtime import curve


def testtime_multiplier(L: np.ndarray, N_once: float, N_rec: float, D: float, train: dict[str, float]) -> np.ndarray:
    """m_tt at each test-time loss L: the multiplier of N_rec for which the training law gives L,
    E + A (N_once + m N_rec)^-alpha + B D^-beta = L (the model's N_once, N_rec, D). NaN where L is at or below
    what the law allows for any size (E + B D^-beta): the curve leaves the training law's reach."""
    floor = train["E"] + train["B"] * D ** -train["beta"]
    excess = np.asarray(L, dtype=float) - floor
    with np.errstate(invalid="ignore", divide="ignore"):
        n_eff = np.where(excess > 0, (excess / train["A"]) ** (-1.0 / train["alpha"]), np.nan)
    return (n_eff - N_once) / N_rec


class PhiModel(TypedDict):
    """One model of a test-time fit as `testtime_phi` prices it: label, r_scale, fixed r or not, N_once, N_rec, D."""

    model: str
    r_scale: float
    fixed: bool
    N_once: float
    N_rec: float
    D: float


class PassWorth(TypedDict):
    """`testtime_phi` at r passes: m_tt at r and r + 1, the unique parameters one more pass is worth, phi_tt(r)."""

    r: float
    m_tt: list[float]
    params_worth_next_pass: float
    phi_tt: float


def testtime_phi(params: dict[str, float], model: PhiModel, train: dict[str, float], r: float) -> PassWorth:
    """What one more pass at inference is worth, at r passes, for one model of a test-time fit (`params`, the
    fit's user parameters; `model`: its label, r_scale, fixed, N_once, N_rec, D): the unique
    parameters N_rec (m_tt(r + 1) - m_tt(r)) the training law trades for it, and phi_tt(r) = d ln m_tt / d ln r
    (by the step from r to r + 1): the exponent r^phi would need to carry the test-time curve. phi_tt = the
    training phi at r = r_train means inference passes are worth what training ones are."""
    L = curve(params, model["model"], model["r_scale"], model["fixed"], [r, r + 1])
    m = testtime_multiplier(L, model["N_once"], model["N_rec"], model["D"], train)
    worth = float(model["N_rec"] * (m[1] - m[0]))
    phi = float(np.log(m[1] / m[0]) / np.log((r + 1) / r)) if np.all(m > 0) else float("nan")
    return {"r": float(r), "m_tt": m.tolist(), "params_worth_next_pass": worth, "phi_tt": phi}


def phi_rows(table: pd.DataFrame, record, train: dict[str, float]) -> dict[str, Any]:
    """`testtime_phi` per model of a fitted test-time table with N_once, N_rec and D (or C), at its r_scale (r_train
    of a fixed model, a sampled one's mean r); a model without them is said so (`train`: the training fit's
    parameters)."""
    out = {}
    for model, rows in table.groupby("model"):
        first = rows.iloc[0]
        if not {"N_once", "N_rec"} <= set(rows.columns) or not ({"D"} & set(rows.columns) or "C" in rows.columns):
            out[str(model)] = {"reason": "the table has no N_once, N_rec and D (or C) for this model"}
            continue
        r_cost = first["r_scale"]
        D = (
            first["D"]
            if "D" in rows.columns
            else tokens_from_compute(first["C"], first["N_once"] + r_cost * first["N_rec"])
        )
        model_info = PhiModel(
            model=str(model),
            r_scale=float(first["r_scale"]),
            fixed=bool(first["fixed"]),
            N_once=float(first["N_once"]),
            N_rec=float(first["N_rec"]),
            D=float(D),
        )
        out[str(model)] = testtime_phi(
            record["per_model"][str(model)]["params"], model_info, train, float(first["r_scale"])
        )
    return out
