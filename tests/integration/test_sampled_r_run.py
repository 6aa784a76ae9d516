"""A sampled-r run (model.r_sampling, loopscale/model/r_sampling.py) trained through loopscale-train's path: its
ledger of realised passes equals its plan's exactly, a run killed mid-way resumes to the same loss bit for bit (the
draws keyed by seed and step, the tally in the checkpoint), and compile=model becomes per-layer compiling."""

from __future__ import annotations

import pytest

from loopscale.model import r_sampling as rs
from loopscale.train.entry import run_training
from loopscale.train.lightning_module import InjectedFailure, LoopedLM
from loopscale.train.plan import plan_run, plan_training
from support.train import TINY, train_config

SAMPLED = [
    *TINY,
    "model.r=2",
    "model.r_sampling=uniform",
    "model.r_set=[1,2,3]",
    "model.r_sampling_per=sequence",
    "trainer.r_eval=off",
]


def test_sampled_run_ledger_is_exact_and_a_killed_run_resumes_bit_identically(tmp_path, data_dir):
    whole = train_config([*SAMPLED, f"data.data_dir={data_dir}", f"runs_dir={tmp_path / 'whole'}"])
    done = run_training(whole)
    assert done["status"] == "done" and done["r_sampling"] == "uniform"
    ledger = done["r_ledger"]
    planned = {int(k): v for k, v in ledger["histogram"].items()}
    trained = {int(k): v for k, v in ledger["trained"]["histogram"].items()}
    assert trained == planned and sum(trained.values()) == done["steps"] * whole.budget.batch_size
    assert ledger["trained"]["passes_realised"] == pytest.approx(ledger["passes_realised"], rel=1e-12)
    assert done["C"] == pytest.approx(ledger["C_realised"], rel=1e-12) == plan_run(whole).C
    assert ledger["F_expected"] == pytest.approx(rs.expected_flops(whole.model))

    killed = train_config([*SAMPLED, f"data.data_dir={data_dir}", f"runs_dir={tmp_path / 'killed'}"])
    with pytest.raises(InjectedFailure):
        run_training(
            train_config(
                [*SAMPLED, f"data.data_dir={data_dir}", f"runs_dir={tmp_path / 'killed'}", "trainer.fail_at_step=15"]
            )
        )
    resumed = run_training(killed)
    assert resumed["resumed_from_step"] == 10  # the checkpoint of step 10
    assert resumed["L"] == done["L"]  # bit for bit
    assert resumed["r_ledger"]["trained"] == ledger["trained"]  # the tally before the kill came back


def test_compile_model_becomes_blocks_under_sampled_r():
    cfg = train_config([*SAMPLED, "trainer.compile=model", "trainer.compile_backend=eager"])
    module = LoopedLM(cfg.model, cfg.optim, cfg.trainer, plan_training(cfg), seed=cfg.seed)
    assert module.compile_mode == "blocks"
    fixed = train_config([*TINY, "model.r=2", "trainer.compile=model", "trainer.compile_backend=eager"])
    assert LoopedLM(fixed.model, fixed.optim, fixed.trainer, plan_training(fixed)).compile_mode == "model"
