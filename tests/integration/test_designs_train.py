"""Every recipe trains end to end on the tiny model with the designs grid's optimizer, MuonH (a few steps: run dir,
record, validation), and Parcae's largest
decay factor is logged at every evaluation and stays below 1 (loopscale/injections/parcae.py)."""

from __future__ import annotations

import csv

import pytest

from loopscale.recipes import registry
from loopscale.train.entry import run_training
from loopscale.train.plan import run_dir_of
from support.train import TINY, train_config

STEPS = 3  # of 16 x 64 tokens


@pytest.mark.slow  # ~10-20 s a recipe on 2 idle cores
@pytest.mark.parametrize("name", registry.names())
def test_every_recipe_trains_a_few_steps(name, tmp_path, data_dir):
    overrides = [*TINY, f"budget.tokens={STEPS * 16 * 64}", "trainer.val_every_steps=2", "model.r=2", "optim=muonh"]
    cfg = train_config([*overrides, f"model.recipe={name}", f"runs_dir={tmp_path}", f"data.data_dir={data_dir}"])
    record = run_training(cfg)
    assert record["status"] == "done" and record["recipe"] == name and record["step"] == STEPS
    assert record["N"] == record["N_once"] + record["N_pass"] + record["N_rec"]
    assert record["L"] == record["L"] and record["L"] < 10  # a finite loss in nats
    if name == "parcae":
        rows = list(csv.DictReader(open(next(run_dir_of(cfg).rglob("metrics.csv")))))
        decays = [float(r["design/max_decay"]) for r in rows if r.get("design/max_decay")]
        assert decays and all(0 < a < 1 for a in decays)
