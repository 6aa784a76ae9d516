"""`loopscale advise TT.json --max-inference-flops I` (loopscale/analysis/advise/testtime.py): inference-time r as
an axis, more passes or a bigger model, against a brute-force search over the fitted curves and the accounting's
linear FLOPs in r."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import loopscale.fit.testtime as tt  # the module: its testtime_* functions are not tests
from loopscale.analysis.advise.testtime import flops_line, inference_advice
from loopscale.errors import InputError
from loopscale.fit.laws.testtime import TestTime
from support.cli import run_cli

PARAMS = {  # a small sampled-r model that keeps gaining and a bigger fixed-r one trained at r = 2
    "small": {"tau": 3.0, "L_inf[small]": 3.0, "A[small]": 0.6},
    "big": {"tau": 0.5, "L_inf[big]": 2.9, "A[big]": 0.05, "delta[big]": 0.3},
}
SIZE = {"small": (1e5, 9e5, 1e6, 2e5), "big": (4e5, 3.6e6, 4e6, 8e5)}  # N_once, N_rec, F(0), F per pass


def table() -> pd.DataFrame:
    rows = []
    for model, (n_once, n_rec, a, b) in SIZE.items():
        fixed = model == "big"
        for r in (1, 2, 4, 8):
            grid = pd.DataFrame(
                {"r_eval": [float(r)], "model": model, "r_scale": 2.0 if fixed else 1.0, "fixed": fixed}
            )
            L = TestTime.predict_table(PARAMS[model], grid)[0]
            rows.append(
                {
                    "model": model,
                    "r_train": 2 if fixed else "sampled",
                    "r_eval": r,
                    "L": L,
                    "flops_per_token_eval": a + b * r,
                    "N_once": n_once,
                    "N_rec": n_rec,
                }
            )
    return pd.DataFrame(rows)


def record() -> dict:
    verdict = {"conditioning": {"verdict": "test-time law measured: ..."}}
    return {"law": "testtime", "per_model": {m: {"params": p, **verdict} for m, p in PARAMS.items()}}


def brute_force(budget: float) -> tuple[str, int, float]:
    """Every model's pass counts 1-16 (2 x its largest measured r_eval) within the budget: its fewest passes within
    0.01% of its lowest loss; then the model with the lowest loss."""
    best = None
    for model, (_, _, a, b) in SIZE.items():
        fixed = model == "big"
        options = []
        for r in range(1, 17):
            if a + b * r <= budget:
                grid = pd.DataFrame(
                    {"r_eval": [float(r)], "model": model, "r_scale": 2.0 if fixed else 1.0, "fixed": fixed}
                )
                options.append((r, TestTime.predict_table(PARAMS[model], grid)[0]))
        if not options:
            continue
        lowest = min(L for _, L in options)
        r, L = next((r, L) for r, L in options if L <= lowest * (1 + 1e-4))
        if best is None or L < best[2]:
            best = (model, r, L)
    return best


@pytest.mark.parametrize("budget", [2.5e6, 4.9e6, 5.7e6, 8e6])
def test_the_advice_is_the_brute_force_optimum(budget):
    out = inference_advice(record(), tt.testtime_table(table()), budget)
    model, r, L = brute_force(budget)
    assert (out["best"]["model"], out["best"]["r"]) == (model, r)
    assert out["best"]["L"] == pytest.approx(L, rel=1e-12)
    for m in out["per_model"]:
        if m["feasible"]:
            assert m["flops_per_token"] <= budget
            assert m["extrapolated"] == (m["r"] > 8)


def test_more_passes_or_a_bigger_model_is_said():
    out = inference_advice(record(), tt.testtime_table(table()), 8e6)
    small = next(m for m in out["per_model"] if m["model"] == "small")
    assert small["r"] == 16 and small["extrapolated"]  # it keeps gaining (0.05% from 15 to 16 passes): all it can
    assert "the bigger model at fewer passes beats more passes of the smaller one" in out["answer"]  # big at r = 2
    tight = inference_advice(record(), tt.testtime_table(table()), 4.9e6)  # big affords one pass, off its r_train
    assert "more passes of the smaller model beat the bigger one" in tight["answer"]
    assert flops_line(table()[table()["model"] == "big"]) == pytest.approx((4e6, 8e5))
    with pytest.raises(InputError, match="no model runs one pass within 1e\\+06"):
        inference_advice(record(), tt.testtime_table(table()), 1e6)


def test_the_command_reads_a_test_time_fit(tmp_path):
    path = tmp_path / "tt.csv"
    table().to_csv(path, index=False)
    fit = tmp_path / "tt.json"
    assert run_cli(["fit", path, "--law", "testtime", "--out", fit]).returncode == 0
    res = run_cli(["advise", fit, "--max-inference-flops", "5.7e6", "--json", tmp_path / "a.json"])
    assert res.returncode == 0, res.stderr
    assert "inference budget 5.7e+06 forward FLOPs per token" in res.stdout and "best: " in res.stdout
    advice = json.loads((tmp_path / "a.json").read_text())
    assert (advice["best"]["model"], advice["best"]["r"]) == brute_force(5.7e6)[:2]
    res = run_cli(["advise", fit])
    assert res.returncode == 2 and "give --max-inference-flops I" in res.stderr
    assert np.isfinite(advice["best"]["L"])


def test_a_saturated_model_runs_the_fewest_passes_within_a_hundredth_of_a_percent_of_its_lowest_loss():
    """docs/design.md, advise on a test-time fit: a saturated curve still falls by ~1e-9 a pass, so a model's best
    is the fewest passes within 0.01% of its lowest loss, not the most its budget affords."""
    params = {"tau": 0.5, "L_inf[flat]": 3.0, "A[flat]": 0.5}
    a, b = 1e6, 2e5
    rows = pd.DataFrame(
        {
            "model": "flat",
            "r_train": "sampled",
            "r_eval": [1, 2, 4, 8],
            "flops_per_token_eval": [a + b * r for r in (1, 2, 4, 8)],
            "N_once": 1e5,
            "N_rec": 9e5,
        }
    )
    rows["L"] = [3.0 + 0.5 * np.exp(-(r - 1) / 0.5) for r in rows["r_eval"]]  # L_inf + A exp(-(r - 1) / tau)
    rec = {"law": "testtime", "per_model": {"flat": {"params": params, "conditioning": {"verdict": "measured"}}}}
    L = {r: 3.0 + 0.5 * np.exp(-(r - 1) / 0.5) for r in range(1, 17)}  # every pass count 1..16 is affordable
    expected = min(r for r in L if L[r] <= min(L.values()) * (1 + 1e-4))
    assert 2 < expected < 16  # the rule decides: neither the first pass nor the budget's last
    out = inference_advice(rec, tt.testtime_table(rows), a + b * 16)
    assert out["best"]["r"] == expected
    assert out["best"]["flops_per_token"] == pytest.approx(a + b * expected)
