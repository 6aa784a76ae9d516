"""Optimizer steps vs micro-batches: with gradient accumulation, val_every_steps still counts optimizer steps,
the run records its device batch and accumulation, and a non-finite loss is caught at the next log step with
the step it happened at."""

from __future__ import annotations

import csv

import pytest

from loopscale.train.entry import run_training
from loopscale.train.lightning_module import Diverged, InjectedFailure
from loopscale.train.plan import run_dir_of
from loopscale.train.run_json import read_record
from support.train import TINY, train_config


def _cfg(tmp_path, data_dir, *extra):
    return train_config([*TINY, f"runs_dir={tmp_path / 'runs'}", f"data.data_dir={data_dir}", *extra])


def _val_steps(run_dir) -> list[int]:
    (metrics,) = (run_dir / "metrics").glob("version_*/metrics.csv")
    with open(metrics) as f:
        return [int(row["step"]) for row in csv.DictReader(f) if row.get("val/loss")]


def test_val_every_steps_counts_optimizer_steps_under_accumulation(tmp_path, data_dir):
    # 30 optimizer steps of 16 sequences, each 2 micro-batches of 8: validation after steps 10 and 20, then the
    # final one at 30 (once: Lightning's own at the last step is dropped, loopscale/data/heldout.py)
    cfg = _cfg(tmp_path, data_dir, "budget.grad_accum=2", "trainer.val_every_steps=10")
    record = run_training(cfg)
    assert record["status"] == "done" and record["step"] == 30
    assert (record["device_batch"], record["grad_accum"], record["world"]) == (8, 2, 1)
    # Lightning logs a validation under the 0-based index of the optimizer step it follows (counting
    # micro-batches it would validate 6 times, after steps 5, 10, ...); the last row is the final validate
    steps = _val_steps(run_dir_of(cfg))
    assert [step + 1 for step in steps[:-1]] == [10, 20] and len(steps) == 3


def test_divergence_is_caught_at_the_next_check_with_its_own_step(tmp_path, data_dir):
    cfg = _cfg(
        tmp_path,
        data_dir,
        "budget.grad_accum=2",
        "trainer.nan_at_step=3",
        "trainer.log_every_steps=5",
        "trainer.ckpt_every_steps=5",
    )
    with pytest.raises(Diverged):
        run_training(cfg)
    record = read_record(run_dir_of(cfg))
    assert record["status"] == "diverged" and record["step"] == 3
    # checked before the checkpoint of step 5: no diverged weights were saved
    assert not (run_dir_of(cfg) / "checkpoints" / "last.ckpt").exists()


def test_wall_time_checkpoint_is_what_a_killed_run_resumes_from(tmp_path, data_dir):
    # steps alone would checkpoint only at 1000; a (tiny) wall-time interval saves at every log step (5)
    timed = ["trainer.ckpt_every_steps=1000", "trainer.ckpt_every_minutes=1e-6", "trainer.log_every_steps=5"]
    cfg = _cfg(tmp_path, data_dir, *timed, "trainer.fail_at_step=7")
    with pytest.raises(InjectedFailure):
        run_training(cfg)
    resumed = run_training(_cfg(tmp_path, data_dir, *timed))
    assert resumed["status"] == "done" and resumed["resumed_from_step"] == 5
