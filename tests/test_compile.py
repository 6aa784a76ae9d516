"""torch.compile never falls back to eager silently: every compiled unit has a recompile limit sized for the
variants one process meets, and every limit hit is counted and reported (loopscale/compiling.py)."""

from __future__ import annotations

import pytest
import torch

from loopscale.compiling import recompile_limit_hits, watch_recompile_limit
from loopscale.train import run_training
from train_helpers import TINY, train_config


def test_a_recompile_limit_hit_is_detected():
    watch_recompile_limit()
    before = len(recompile_limit_hits())

    def double(x):
        return 2 * x

    compiled = torch.compile(double, backend="eager", recompile_limit=1)
    compiled(torch.ones(2))
    compiled(torch.ones(2, dtype=torch.float64))  # a second variant: over the limit of 1, runs eagerly
    hits = recompile_limit_hits()[before:]
    assert len(hits) == 1 and "double" in hits[0]


def test_invalid_compile_mode_is_rejected():
    with pytest.raises(ValueError, match="compile"):
        train_config(["trainer.compile=graph"])
    assert train_config(["trainer.compile=true"]).trainer.compile == "blocks"


@pytest.mark.slow
def test_two_compiled_runs_in_one_process_never_hit_the_recompile_limit(tmp_path, data_dir):
    """Train (truncated backprop: passes with and without grad) -> validation with a partial last batch ->
    train -> final validation, then a second, whole-model-compiled run in the same process. Under torch's
    default limit of 8 per code object the shared Block.forward cache overflowed here."""
    watch_recompile_limit()
    before = len(recompile_limit_hits())
    common = [*TINY, f"data.data_dir={data_dir}", "budget.tokens=10240", "trainer.val_every_steps=5",
              "data.val_tokens=1300"]  # 1300 // 65 = 20 windows: a last validation batch of 4 of 16
    first = run_training(train_config([*common, f"runs_dir={tmp_path / 'a'}", "model.r=2", "model.recipe=tbptt",
                                       "trainer.compile=blocks"]))
    second = run_training(train_config([*common, f"runs_dir={tmp_path / 'b'}", "model.r=4",
                                        "trainer.compile=model"]))
    assert recompile_limit_hits()[before:] == []
    assert first["recompile_limit_hits"] == second["recompile_limit_hits"] == 0
    assert first["status"] == second["status"] == "done"
