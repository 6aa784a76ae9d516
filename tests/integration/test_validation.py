"""Validation that costs what it should (loopscale/data/heldout.py): intermediate validations read a fixed
subset of the final set, the final validation reads all of it, once, also when the run's steps are a
multiple of the interval."""

from __future__ import annotations

import pandas as pd

from loopscale.data.heldout import intermediate_validations, subset_count
from loopscale.train.entry import run_training
from support.train import TINY, train_config


def test_subset_and_count_of_intermediate_validations():
    assert subset_count(34_560, 0.05) == 1_728 and subset_count(10, 0.01) == 1 and subset_count(7, 1.0) == 7
    assert intermediate_validations(30, 10) == 2  # at 10 and 20; the final validation covers step 30
    assert intermediate_validations(31, 10) == 3 and intermediate_validations(30, 0) == 0


def test_a_run_validates_the_subset_inside_fit_and_the_whole_set_once_at_the_end(tmp_path, data_dir):
    # 30 steps, a validation every 10: Lightning would validate at 10, 20 and 30, then the runner again
    cfg = train_config(
        [
            *TINY,
            f"data.data_dir={data_dir}",
            f"runs_dir={tmp_path}",
            "trainer.val_every_steps=10",
            "trainer.val_subset=0.25",
            "data.val_tokens=2080",  # 32 windows of 65 tokens: a subset of 8
        ]
    )
    record = run_training(cfg)
    assert record["status"] == "done" and record["steps"] == 30
    metrics = pd.concat(pd.read_csv(p) for p in (tmp_path / cfg.sweep / cfg.run_name / "metrics").rglob("metrics.csv"))
    val = metrics.dropna(subset=["val/loss"])
    assert val["val/sequences"].tolist() == [8.0, 8.0, 32.0]  # two subsets inside fit, the whole set once
    assert val["val/loss"].iloc[-1] == record["L"]
