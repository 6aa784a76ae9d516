"""A sampled-r run (model.r_sampling, loopscale/model/r_sampling.py) trained through loopscale-train's path: its
ledger of realised passes equals its plan's exactly, a run killed mid-way resumes to the same loss bit for bit (the
draws keyed by seed and step, the tally in the checkpoint), and compile=model becomes per-layer compiling."""

from __future__ import annotations

import json

import pytest

from loopscale.model import r_sampling as rs
from loopscale.train.entry import run_training
from loopscale.train.lightning_module import InjectedFailure, LoopedLM
from loopscale.train.plan import plan_run, plan_training
from support.procs import run_loopscale
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


@pytest.mark.system
def test_a_sampled_run_over_two_ranks_killed_and_resumed_tallies_every_ranks_sequences_once(tmp_path, data_dir):
    """DDP over gloo (trainer=ddp_cpu), killed at step 15 and resumed from step 10: each rank trains its share of every
    step's draws, the record's tally is the sum over ranks (LoopedLM.r_tally_record, its counts sized by the plan's r
    cap) and the checkpoint holds that sum, so the resumed run's tally equals the plan's histogram. (The checkpoint
    held rank 0's tally alone, which each rank loaded: measured 164 sequences at r = 2 for 165 planned, 161 at 3 for
    160.) ~40 s: the one run of the multi-rank tally and its checkpoint."""
    args = [*SAMPLED, f"runs_dir={tmp_path / 'runs'}", f"data.data_dir={data_dir}", "trainer=ddp_cpu"]
    killed = run_loopscale([*args, "trainer.fail_at_step=15"], cwd=tmp_path, module="loopscale.train.entry")
    assert killed.returncode != 0
    proc = run_loopscale(args, cwd=tmp_path, module="loopscale.train.entry")
    assert proc.returncode == 0, proc.stderr[-3000:]
    (record_path,) = (tmp_path / "runs").glob("*/*/run.json")
    record = json.loads(record_path.read_text())
    assert record["status"] == "done" and record["world"] == 2 and record["resumed_from_step"] == 10
    ledger = record["r_ledger"]
    planned = {int(k): v for k, v in ledger["histogram"].items()}
    trained = {int(k): v for k, v in ledger["trained"]["histogram"].items()}
    assert trained == planned and sum(trained.values()) == record["steps"] * record["config"]["budget"]["batch_size"]
    assert max(trained) == ledger["r_max"] == 3  # the cap's own count is tallied (uniform over r_set 1, 2, 3)


def test_compile_model_becomes_blocks_under_sampled_r():
    cfg = train_config([*SAMPLED, "trainer.compile=model", "trainer.compile_backend=eager"])
    module = LoopedLM(cfg.model, cfg.optim, cfg.trainer, plan_training(cfg), seed=cfg.seed)
    assert module.compile_mode == "blocks"
    fixed = train_config([*TINY, "model.r=2", "trainer.compile=model", "trainer.compile_backend=eager"])
    assert LoopedLM(fixed.model, fixed.optim, fixed.trainer, plan_training(fixed)).compile_mode == "model"
