"""Every recipe trains end to end on the tiny model with the designs grid's optimizer, MuonH (a few steps: run dir,
record, validation), Parcae's largest decay factor is logged at every evaluation and stays below 1
(loopscale/injections/parcae.py), and every recipe resumes bit-identically after a kill."""

from __future__ import annotations

import csv

import pytest
import torch

from loopscale.recipes import registry
from loopscale.train.entry import run_training
from loopscale.train.lightning_module import InjectedFailure
from loopscale.train.plan import CHECKPOINT, run_dir_of
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


def _same(x, y) -> bool:
    """Equal tensors, or equal containers of them (a module's extra state: Huginn's and Parcae's streams)."""
    if torch.is_tensor(x):
        return torch.is_tensor(y) and torch.equal(x, y)
    if isinstance(x, dict):
        return isinstance(y, dict) and x.keys() == y.keys() and all(_same(x[k], y[k]) for k in x)
    return x == y


def _weights(run_dir) -> dict:
    return torch.load(run_dir / CHECKPOINT, map_location="cpu", weights_only=True)["state_dict"]


@pytest.mark.slow  # ~30 s a recipe on 2 idle cores: three short runs
@pytest.mark.parametrize("name", registry.names())
def test_every_recipe_resumes_bit_identically_after_a_kill(name, tmp_path, data_dir):
    """A run stopped at step 5 and relaunched (from its step-4 checkpoint, validations at steps 2 and 4 on the way)
    ends with the very loss and weights of a run that was never stopped: Huginn's and Parcae's random initial
    state included (their streams are the module's own, saved in the checkpoint; validation draws from another)."""
    overrides = [*TINY, f"budget.tokens={6 * 16 * 64}", "trainer.val_every_steps=2", "trainer.ckpt_every_steps=2"]
    overrides += [
        "model.r=2",
        "optim=muonh",
        "trainer.num_threads=1",
        f"model.recipe={name}",
        f"data.data_dir={data_dir}",
    ]
    straight_cfg = train_config([*overrides, f"runs_dir={tmp_path / 'a'}"])
    straight = run_training(straight_cfg)
    stopped_cfg = train_config([*overrides, f"runs_dir={tmp_path / 'b'}", "trainer.fail_at_step=5"])
    with pytest.raises(InjectedFailure):
        run_training(stopped_cfg)
    resumed = run_training(train_config([*overrides, f"runs_dir={tmp_path / 'b'}"]))
    assert resumed["status"] == "done" and resumed["resumed_from_step"] == 4
    assert (resumed["L"], resumed["train_loss"]) == (straight["L"], straight["train_loss"])
    a, b = _weights(run_dir_of(straight_cfg)), _weights(run_dir_of(stopped_cfg))
    assert a.keys() == b.keys() and all(_same(a[key], b[key]) for key in a)
