"""Issue 29 (11): a run dir re-used by another config (the earlier one failed before its first checkpoint, so
the dir is claimed afresh without restart=true) must not keep the earlier config's metrics or record beside
the new run's: they are moved aside into .replaced/<old identity>/, where collect does not look."""

from __future__ import annotations

import csv

import pytest

from loopscale.train.collect import collect
from loopscale.train.entry import run_training
from loopscale.train.identity import IDENTITY_FILE
from loopscale.train.lightning_module import InjectedFailure
from loopscale.train.plan import run_dir_of
from loopscale.train.run_json import read_record
from support.train import TINY, train_config

# 10 steps, a metrics row every step, the first checkpoint at step 8: a failure at step 4 trains "nothing"
SHORT = [*TINY, "budget.tokens=10240", "trainer.ckpt_every_steps=8", "trainer.log_every_steps=1", "run_name=same"]


def _cfg(tmp_path, data_dir, *extra):
    return train_config([*SHORT, f"runs_dir={tmp_path / 'runs'}", f"data.data_dir={data_dir}", *extra])


def _metric_rows(run_dir):
    return [
        row for path in sorted(run_dir.glob("metrics/version_*/metrics.csv")) for row in csv.DictReader(path.open())
    ]


def test_a_replaced_config_does_not_keep_the_old_metrics(tmp_path, data_dir):
    first = _cfg(tmp_path, data_dir, "optim.lr=1e-3", "trainer.fail_at_step=4")
    run_dir = run_dir_of(first)
    with pytest.raises(InjectedFailure):
        run_training(first)
    assert read_record(run_dir)["status"] == "failed" and _metric_rows(run_dir)
    old_hash = read_record(run_dir)["identity"]

    record = run_training(_cfg(tmp_path, data_dir, "optim.lr=2e-3"))  # another config, the same run dir
    assert record["status"] == "done" and record["identity"] != old_hash
    versions = sorted(p.parent.name for p in run_dir.glob("metrics/version_*/metrics.csv"))
    assert versions == ["version_0"], versions  # only the new run's curve, not the failed config's beside it
    assert {r["step"] for r in _metric_rows(run_dir) if r.get("train/loss")}  # the new run logged
    aside = run_dir / ".replaced" / old_hash
    assert read_record(aside)["status"] == "failed" and (aside / "metrics").is_dir()
    assert (run_dir / IDENTITY_FILE).is_file() and not (aside / IDENTITY_FILE).exists()
    rows, problems = collect(tmp_path / "runs")
    assert [r["run_name"] for r in rows] == ["same"] and problems == []
