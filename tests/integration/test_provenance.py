"""Provenance that tells the truth: the identity ignores what cannot change the result, a refused relaunch
rewrites nothing of the run (its .hydra/config.yaml included), `-m seed=...` with the default run name
trains one run per seed, a planted "done" record is not trusted, and submitit's job pickles live outside
the shared runs dir, in a folder only the user can write."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from loopscale.launch.launchers import UnsafeSubmititFolder, check_submitit_folder
from loopscale.train.entry import run_training
from loopscale.train.identity import IDENTITY_FILE, claim, identity_hash, identity_of
from loopscale.train.plan import run_dir_of
from loopscale.train.run_json import read_record
from support.procs import run_loopscale
from support.train import TINY, compose_cfg, train_config

SHORT = [*TINY, "budget.tokens=5120", "trainer.ckpt_every_steps=5"]


def test_identity_ignores_launch_estimates_and_wall_time_checkpoints():
    base = train_config(SHORT)
    same = train_config(
        [*SHORT, "trainer.ckpt_every_minutes=5", "trainer.assumed_mfu=0.25", "trainer.plan_device=NVIDIA H200"]
    )
    assert identity_hash(identity_of(base)) == identity_hash(identity_of(same))


def test_a_run_dir_from_before_still_resumes_with_a_wall_time_checkpoint(tmp_path):
    # identity.json written when trainer.ckpt_every_minutes was part of the identity
    cfg = train_config(SHORT)
    run_dir = tmp_path / "run"
    old = {**identity_of(cfg), "trainer.ckpt_every_minutes": 0.0, "trainer.assumed_mfu": 0.4}
    run_dir.mkdir()
    (run_dir / IDENTITY_FILE).write_text(json.dumps({"hash": identity_hash(old), "identity": old}))
    claim(run_dir, train_config([*SHORT, "trainer.ckpt_every_minutes=30"]))  # no IdentityMismatch


def _train_cli(tmp_path, data_dir, *extra):
    flags = [a for a in extra if a.startswith("-")]
    args = [*flags, *SHORT, f"runs_dir={tmp_path / 'runs'}", f"data.data_dir={data_dir}"]
    return run_loopscale(
        [*args, *(a for a in extra if not a.startswith("-"))], cwd=tmp_path, module="loopscale.train.entry"
    )


@pytest.mark.system
def test_a_refused_relaunch_leaves_the_runs_hydra_config_alone(tmp_path, data_dir):
    first = _train_cli(tmp_path, data_dir, "run_name=r")
    assert first.returncode == 0, first.stderr[-3000:]
    saved = tmp_path / "runs" / "default" / "r" / ".hydra"
    before = {p.name: p.read_bytes() for p in saved.iterdir()}
    assert set(before) == {"config.yaml", "hydra.yaml", "overrides.yaml"} and b"5120" in before["config.yaml"]
    refused = _train_cli(tmp_path, data_dir, "run_name=r", "budget.tokens=10240")
    assert refused.returncode == 1 and "holds a run of another config" in refused.stderr, refused.stderr[-3000:]
    assert {p.name: p.read_bytes() for p in saved.iterdir()} == before
    # the same refusal inside a sweep: the log and the exit code say nothing was written, not "recorded"
    swept = _train_cli(tmp_path, data_dir, "-m", "run_name=r", "budget.tokens=10240")
    assert swept.returncode == 1 and "failed (nothing written)" in swept.stderr, swept.stderr[-3000:]
    assert {p.name: p.read_bytes() for p in saved.iterdir()} == before


@pytest.mark.system
def test_a_seed_sweep_with_the_default_run_name_trains_every_seed(tmp_path, data_dir):
    proc = _train_cli(tmp_path, data_dir, "-m", "seed=0,1,2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = {p.parent.name: read_record(p.parent) for p in (tmp_path / "runs" / "default").glob("*/run.json")}
    assert sorted(r["seed"] for r in records.values()) == [0, 1, 2], sorted(records)
    assert {r["status"] for r in records.values()} == {"done"}
    assert sorted(n.rsplit("-", 1)[-1] for n in records) == ["D5.12e3", "seed1", "seed2"]


@pytest.mark.parametrize("planted", ["bare", "wrong identity"])
def test_a_planted_done_record_is_not_trusted_by_training(tmp_path, data_dir, planted):
    cfg = train_config([*SHORT, f"runs_dir={tmp_path / 'runs'}", f"data.data_dir={data_dir}", "run_name=r"])
    run_dir = run_dir_of(cfg)
    run_dir.mkdir(parents=True)
    fake = {"status": "done", "run_name": "r", "L": 0.01, "r": 1, "N_once": 1, "N_rec": 1, "N": 2, "D": 1, "C": 1}
    if planted == "wrong identity":
        claim(run_dir, cfg)  # a real identity.json, and a record that is not of it
        fake["identity"] = "0" * 16
    (run_dir / "run.json").write_text(json.dumps(fake))
    record = run_training(cfg)  # trains for real instead of returning the planted L
    assert record["status"] == "done" and record["L"] > 1.0
    assert record["identity"] == json.loads((run_dir / IDENTITY_FILE).read_text())["hash"]


@pytest.mark.parametrize("launcher", ["local", "slurm"])
def test_submitit_keeps_its_job_pickles_outside_the_runs_dir(tmp_path, launcher, monkeypatch):
    monkeypatch.delenv("LOOPSCALE_SUBMITIT_DIR", raising=False)
    hydra = compose_cfg([f"hydra/launcher={launcher}", f"runs_dir={tmp_path}"], return_hydra_config=True).hydra
    folder = Path(hydra.launcher.submitit_folder)
    assert folder.parent == Path(os.environ["HOME"]) / ".loopscale" / "submitit" and folder.name == "%j"
    assert not folder.is_relative_to(tmp_path)


def test_a_submitit_folder_others_can_write_is_refused(tmp_path):
    shared = tmp_path / "shared-runs"
    shared.mkdir()
    shared.chmod(0o777)  # a group's runs dir, writable by all: a planted job pickle would run as you
    with pytest.raises(UnsafeSubmititFolder, match="not private"):
        check_submitit_folder(f"{shared}/.submitit/%j")
    check_submitit_folder(f"{tmp_path}/mine/%j")  # a folder of your own: created private
    assert (tmp_path / "mine").stat().st_mode & 0o777 == 0o700
