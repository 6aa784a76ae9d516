"""A trained run scored across r (loopscale/train/testtime_eval.py): run.json records each r_eval's loss and forward
FLOPs, the trained r's score is the run's L, `collect` writes the long-form test-time table and `fit --law
testtime` reads it."""

from __future__ import annotations

import pandas as pd

from loopscale.model.accounting import eval_flops_at
from loopscale.train.entry import run_training
from support.cli import run_cli
from support.train import TINY, train_config


def test_a_run_records_its_scores_and_collect_writes_the_testtime_table(tmp_path, data_dir):
    cfg = train_config(
        [*TINY, f"data.data_dir={data_dir}", f"runs_dir={tmp_path}", "model.r=2", "trainer.r_eval=[1,2,4]"]
    )
    record = run_training(cfg)
    assert record["status"] == "done"
    scores = {s["r_eval"]: s for s in record["r_eval_scores"]}
    assert sorted(scores) == [1, 2, 4]
    assert scores[2]["val_loss"] == record["L"]  # the trained r: the run's own L, not validated again
    assert scores[1]["val_loss"] != record["L"] and scores[4]["val_loss"] != record["L"]
    assert scores[4]["flops_per_token_eval"] == eval_flops_at(cfg.model, 4)
    res = run_cli(["collect", tmp_path / cfg.sweep])
    assert res.returncode == 0, res.stderr
    table = pd.read_csv(tmp_path / cfg.sweep / "runs_testtime.csv")
    assert table["r_eval"].tolist() == [1, 2, 4] and (table["r_train"] == 2).all()
    assert (table["r_sampling"] == "fixed").all() and table["L"].tolist() == [scores[r]["val_loss"] for r in (1, 2, 4)]
    res = run_cli(["fit", tmp_path / cfg.sweep / "runs_testtime.csv", "--law", "testtime"])
    assert res.returncode == 0, res.stderr
    assert "model " in res.stdout and "(fixed r = 2)" in res.stdout
