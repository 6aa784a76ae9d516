"""The curves table scored across r (issue 56 item 1; loopscale/train/collect.py, curves_table): one row per
(step, r_eval) with the forward FLOPs per token there; a record from before (points without scores) still reads,
as the trained r; a curve law reads each run's trained-r rows alone (fit/curves/table.py, trained_r_rows). The
runs themselves: tests/integration/test_curve_r_eval.py."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from loopscale.config.model import ModelConfig, recorded_model
from loopscale.fit.curves.table import trained_r_rows
from loopscale.fit.laws.looped_curve import LoopedCurve
from loopscale.model.accounting import eval_flops_at, eval_flops_per_token
from loopscale.train.collect import CURVE_COLUMNS, curves_table, trained_eval_flops
from support.train import TINY, tiny_model, train_config


def point(step: int, val_loss: float, scores=None) -> dict:
    row = {"step": step, "tokens": 64 * step, "lr": 1e-3, "lr_multiplier": 1.0, "train_loss": val_loss + 0.1}
    return {**row, "val_loss": val_loss, **({"r_eval_scores": scores} if scores else {})}


def run_row(name: str, curve: list[dict], flops: float | None) -> dict:
    """A finished run as collect reads it (`_read_point`): its runs-table columns, curve and trained-r FLOPs."""
    model = {"recipe": "baseline", "r": 2, "N_once": 10, "N_rec": 20, "N_pass": 0, "N": 30, "width": 64, "seed": 0}
    run = {"run_name": name, "run_dir": f"/runs/{name}", "parent": None, "steps": 4, "D": 256, "C": 1e9, "L": 3.0}
    return {**model, **run, "curve": curve, "curve_eval_flops": flops, "fork_step": None}


def test_a_record_from_before_the_hyper_options_reads_its_lanes():
    """A record written when model.hyper_lanes / hyper_dynamic were fields (every design's config held them) still
    gives its trained-r FLOPs: the fields are read as the hyper form's options (config/model.recorded_model), the
    model it trained."""
    hyper = tiny_model(2, injection="hyper", options={"hyper_lanes": 3})
    old = {**dataclasses.asdict(hyper), "options": {}, "hyper_lanes": 3, "hyper_dynamic": False}
    assert trained_eval_flops({"model": old}) == eval_flops_per_token(hyper) > 0
    assert recorded_model(old) == hyper and recorded_model(dataclasses.asdict(hyper)) == hyper
    baseline = {**dataclasses.asdict(tiny_model(2)), "hyper_lanes": 2, "hyper_dynamic": False}  # the defaults
    assert trained_eval_flops({"model": baseline}) == eval_flops_per_token(tiny_model(2))


def test_a_record_from_before_reads_as_its_trained_r_and_a_scored_one_in_long_form():
    config = dataclasses.asdict(train_config(TINY))  # run.json's `config`
    model = ModelConfig(**config["model"])
    assert trained_eval_flops(config) == eval_flops_per_token(model) > 0
    assert trained_eval_flops(None) is None and trained_eval_flops({"model": {"no_such_field": 1}}) is None
    old = run_row("old", [point(1, 5.0), point(4, 4.0)], None)  # without a config: no FLOPs, still its rows
    scores = [
        {"r_eval": r, "val_loss": loss, "flops_per_token_eval": eval_flops_at(model, r)}
        for r, loss in ((1, 4.5), (2, 4.0), (4, 3.9))
    ]
    early = [{**s, "val_loss": 3.0 + s["r_eval"]} for s in scores]  # at r = 2: the point's val_loss
    new = run_row("new", [point(1, 5.0, early), point(4, 4.0, scores)], 7.0)
    table = curves_table([new, old])
    assert list(table.columns) == CURVE_COLUMNS
    olds = table[table["run"] == "old"]
    assert olds["r_eval"].tolist() == [2, 2] and olds["val_loss"].tolist() == [5.0, 4.0]
    assert olds["flops_per_token_eval"].isna().all()
    news = table[table["run"] == "new"]
    assert list(zip(news["r_eval"], news["step"])) == [(1, 1), (1, 4), (2, 1), (2, 4), (4, 1), (4, 4)]
    assert news["val_loss"].tolist() == [4.0, 4.5, 5.0, 4.0, 7.0, 3.9]
    assert news["flops_per_token_eval"].tolist() == [eval_flops_at(model, r) for r in (1, 1, 2, 2, 4, 4)]
    assert (news["train_loss"] == np.repeat([[5.1, 4.1]], 3, axis=0).ravel()).all()
    trained = run_row("plain", [point(1, 5.0)], 7.0)  # the default: the trained r's FLOPs from the config
    assert curves_table([trained])["flops_per_token_eval"].tolist() == [7.0]


def test_a_curve_law_reads_each_runs_trained_r_alone():
    rows = pd.DataFrame(
        {
            "run": ["a"] * 6 + ["b"] * 2,
            "r": [2] * 6 + [4] * 2,
            "r_eval": [1, 2, 4, 1, 2, 4, 4, np.nan],  # b's second row: written before r_eval (empty)
            "step": [1, 1, 1, 2, 2, 2, 1, 2],
            "lr_multiplier": 1.0,
        }
    )
    kept = trained_r_rows(rows)
    assert kept.index.tolist() == [1, 4, 6, 7]
    assert LoopedCurve.rows_to_fit(rows)[["run", "step"]].values.tolist() == [["a", 1], ["a", 2], ["b", 1], ["b", 2]]
    before = rows.drop(columns=["r_eval"])  # a table from before issue 56: as it is
    assert trained_r_rows(before) is before


def test_a_curves_table_groups_by_the_budget_its_runs_were_given():
    """Two runs given 2.5e11 FLOPs spend 2.496e11 and 2.511e11: their curves' rows are one budget (validate's budget
    folds on a curve fit, the bootstrap's --cluster C), as their rows of the runs table are."""
    from loopscale.fit.runs_table import budgets

    rows = [{**run_row(name, [point(1, 5.0), point(4, 4.0)], 7.0), "C": spent, "C_budget": 2.5e11}
            for name, spent in (("a", 2.496e11), ("b", 2.511e11))]  # fmt: skip
    table = curves_table(rows)
    assert table["C_budget"].tolist() == [2.5e11] * 4
    assert np.unique(budgets(table)).tolist() == [2.5e11]
