"""W&B, offline and real (conftest sets WANDB_MODE=offline): tiny runs trained with logger=wandb, their offline
run files read back (support/wandb_log.py). The summary carries what a scaling plot in the W&B UI needs,
the group is the sweep, the tags the recipe and r; two runs of one process are two W&B runs."""

from __future__ import annotations

import pytest

from loopscale.train.entry import run_training
from loopscale.train.plan import run_dir_of
from loopscale.train.run_json import read_record
from support.train import TINY, train_config
from support.wandb_log import offline_runs, read_offline_run

ACCOUNTING = ("N_once", "N_rec", "N", "F", "D", "C", "L", "r", "recipe")


def _cfg(tmp_path, data_dir, *extra):
    return train_config(
        [*TINY, f"runs_dir={tmp_path}", f"data.data_dir={data_dir}", "logger=wandb", "budget.tokens=10240", *extra]
    )


def _only_wandb_run(cfg):
    folders = offline_runs(run_dir_of(cfg))
    assert len(folders) == 1, folders
    return read_offline_run(folders[0])


def test_the_run_summary_group_and_tags_make_a_scaling_plot(tmp_path, data_dir):
    # two runs of one sweep in one process, as hydra/launcher=basic runs a sweep
    configs = [_cfg(tmp_path, data_dir, "sweep=mine", f"model.r={r}") for r in (1, 2)]
    records = [run_training(cfg) for cfg in configs]
    runs = [_only_wandb_run(cfg) for cfg in configs]
    assert runs[0].run_id != runs[1].run_id  # the second run did not log into the first's W&B run
    for cfg, record, run in zip(configs, records, runs):
        assert record["status"] == "done" and record["L"] is not None
        assert run.summary["status"] == "done" and run.exit_code == 0
        assert {k: run.summary[k] for k in ACCOUNTING} == {k: read_record(run_dir_of(cfg))[k] for k in ACCOUNTING}
        assert run.group == "mine" and run.name == f"mine/{cfg.run_name}"
        assert run.tags == [f"recipe:{cfg.model.recipe}", f"r:{cfg.model.r}"]
    assert [run.tags for run in runs] == [["recipe:baseline", "r:1"], ["recipe:baseline", "r:2"]]
    assert runs[1].summary["N_rec"] > 0 and runs[1].summary["r"] == 2


def test_a_failed_run_says_so_in_its_summary(tmp_path, data_dir):
    cfg = _cfg(tmp_path, data_dir, "trainer.fail_at_step=3")
    with pytest.raises(Exception, match="fail_at_step"):
        run_training(cfg)
    run = _only_wandb_run(cfg)
    assert run.summary["status"] == "failed" and run.summary["L"] is None and run.exit_code == 1
    assert run.summary["N"] == read_record(run_dir_of(cfg))["N"] and run.group == "default"
