"""Every checkpoint scored across r (loopscale/train/testtime_eval.py, model/transformer.py's r argument): scoring at
r_eval equals a model rebuilt at that r with the same weights, for every recipe; the default r_eval set; the FLOPs
at r_eval are the accounting's. A trained run's scores: tests/integration/test_testtime_run.py."""

from __future__ import annotations

import copy
import json

import pandas as pd
import pytest
import torch

from loopscale.config.checks import check_r_eval, r_eval_values
from loopscale.errors import ConfigError
from loopscale.model.accounting import eval_flops_at, eval_flops_per_token
from loopscale.model.transformer import LoopedTransformer
from loopscale.recipes import registry
from loopscale.train import testtime_eval
from loopscale.train.collect import runs_table, write_runs_table
from loopscale.train.collect import testtime_path as scores_csv_of  # a name starting "test" is collected as a test
from support.rebuilt import rebuilt_at
from support.train import tiny_model

R_TRAIN = 4


@pytest.mark.parametrize("r_eval", [1, 2, 8])
@pytest.mark.parametrize("recipe", registry.names())
def test_scoring_at_r_eval_equals_the_model_rebuilt_at_that_r(recipe, r_eval):
    if recipe == "hyper" and r_eval == 1:
        pytest.skip("hyper-connections are refused at r = 1: no model to rebuild (scoring at 1 still runs)")
    torch.manual_seed(0)
    model = LoopedTransformer(tiny_model(R_TRAIN, recipe))
    with torch.no_grad():  # every parameter moved off its init, so per-pass parameters differ pass to pass
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    other = rebuilt_at(model, r_eval)
    model.eval(), other.eval()
    x = torch.randint(0, 200, (2, 16))
    with torch.no_grad():
        torch.manual_seed(1)  # a random initial state (huginn, parcae): both evaluation streams from the loaded seed
        scored = model(x, r=r_eval)
        torch.manual_seed(1)
        rebuilt = other(x)
    assert other.cfg.r == r_eval and scored.shape == rebuilt.shape
    torch.testing.assert_close(scored, rebuilt, rtol=1e-6, atol=1e-6)
    if r_eval != R_TRAIN:  # and it is another function than the trained r's
        torch.manual_seed(1)
        assert not torch.allclose(model(x), scored)


def test_the_default_r_eval_set():
    assert r_eval_values("auto", 4) == [1, 2, 4, 8, 16]
    assert r_eval_values("auto", 1) == [1, 2, 4]
    assert r_eval_values("auto", 3) == [1, 2, 3, 6, 12]
    assert r_eval_values("auto", 8) == [1, 2, 4, 8, 16, 32]
    assert r_eval_values("off", 4) == [] and r_eval_values([8, 2, 2], 4) == [2, 8]
    assert check_r_eval([4, 1, 4.0]) == [1, 4] and check_r_eval("off") == "off" and check_r_eval([]) == "off"
    assert check_r_eval(None) == "off" and check_r_eval("AUTO") == "auto" and check_r_eval(3) == [3]
    for bad in ([0, 2], [1.5], "often", [float("nan")]):
        with pytest.raises(ConfigError, match="r_eval=.* must be auto, off, or whole numbers >= 1"):
            check_r_eval(bad)


def test_flops_at_r_eval_are_the_accountings():
    cfg = tiny_model(R_TRAIN, "baseline")
    assert eval_flops_at(cfg, R_TRAIN) == eval_flops_per_token(cfg)
    at8 = copy.copy(cfg)
    at8.r = 8
    assert eval_flops_at(cfg, 8) == eval_flops_per_token(at8) > eval_flops_per_token(cfg)
    assert cfg.r == R_TRAIN  # the config itself untouched


def test_the_testtime_tables_model_is_the_run_name_or_the_run_dir_where_two_runs_share_one(tmp_path):
    """`loopscale collect`'s test-time table (testtime_eval.testtime_rows): one row per run and r_eval, the model
    label the run name, the run dir where two runs share a name (two models must never be fitted as one); written
    beside the runs table."""
    rows = []
    for i, name in enumerate(["a", "a", "b"]):
        run_dir = tmp_path / f"sweep{i}" / name
        run_dir.mkdir(parents=True)
        scores = [{"r_eval": r, "val_loss": 3.0 - 0.1 * r - i, "flops_per_token_eval": 1e6 * r} for r in (1, 2)]
        (run_dir / "run.json").write_text(json.dumps({"status": "done", "r_eval_scores": scores}))
        rows.append({"run_name": name, "run_dir": str(run_dir), "r": 2, "recipe": "baseline"})
    table = testtime_eval.testtime_rows(rows)  # (imported as a name, pytest would collect it)
    assert table["model"].tolist() == [rows[0]["run_dir"]] * 2 + [rows[1]["run_dir"]] * 2 + ["b", "b"]
    assert table["L"].tolist() == pytest.approx([2.9, 2.8, 1.9, 1.8, 0.9, 0.8])
    assert table["r_sampling"].unique().tolist() == ["fixed"] and table["r_train"].unique().tolist() == [2]
    # collect writes it beside the runs table, with it (write_runs_table); none where no run was scored
    out = tmp_path / "runs.csv"
    write_runs_table(runs_table(rows), [], out, testtime=table)
    assert scores_csv_of(out) == tmp_path / "runs_testtime.csv"
    assert pd.read_csv(scores_csv_of(out))["L"].tolist() == pytest.approx(table["L"].tolist())
    write_runs_table(runs_table(rows), [], tmp_path / "none.csv", testtime=testtime_eval.testtime_rows(rows[:0]))
    assert (tmp_path / "none.csv").exists() and not scores_csv_of(tmp_path / "none.csv").exists()
