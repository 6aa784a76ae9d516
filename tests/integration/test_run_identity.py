"""A run dir trains one config, one process at a time: identity checks, restart, the lock (real processes),
safe run names, and the records of runs that fail before or after training."""

from __future__ import annotations

import json
import os
import pickle
import socket
import subprocess
import sys
import time

import pytest

from loopscale.train.entry import run_training
from loopscale.train.identity import DATA_FIELD, IDENTITY_FILE, IdentityMismatch, claim, identity_hash, identity_of
from loopscale.train.lock import LOCK_FILE, STALE_AFTER_S, RunLock, RunLocked
from loopscale.train.plan import CHECKPOINT, run_dir_of
from loopscale.train.run_json import read_record
from support.paths import REPO_ROOT
from support.procs import run_loopscale
from support.train import TINY, train_config

SHORT = [*TINY, "budget.tokens=10240", "trainer.ckpt_every_steps=5", "run_name=same"]  # 10 steps


def _cfg(tmp_path, data_dir, *extra):
    return train_config([*SHORT, f"runs_dir={tmp_path / 'runs'}", f"data.data_dir={data_dir}", *extra])


def _strict_json(path):
    """json.loads that refuses NaN / Infinity (not JSON, though Python writes them by default)."""

    def refuse(name):
        raise ValueError(f"{path} holds {name}, which is not JSON")

    return json.loads(path.read_text(), parse_constant=refuse)


# ------------------------------------------------------------------------------------------ identity


def test_identity_ignores_what_does_not_change_the_result():
    base = train_config(SHORT)
    same = train_config(
        [
            *SHORT,
            "trainer.progress=true",
            "trainer.num_threads=1",
            "trainer.compile=model",  # how fast, not what: compile=auto may choose otherwise on a relaunch
            "trainer.fail_at_step=3",
            "runs_dir=/elsewhere",
            "data.data_dir=/other",
            "trainer.ckpt_every_steps=7",
            "restart=true",
            "logger=wandb",
        ]
    )
    assert identity_hash(identity_of(base)) == identity_hash(identity_of(same))
    for change in ("budget.tokens=20480", "model.d_model=128", "seed=1", "optim.lr=1e-3", "data.vocab_size=1024"):
        other = train_config([*SHORT, change])
        assert identity_hash(identity_of(other)) != identity_hash(identity_of(base)), change


def test_changed_config_under_the_same_name_is_refused_then_restarted(tmp_path, data_dir):
    # a run killed mid-way (checkpoint at step 5, no record of done)
    with pytest.raises(Exception, match="fail_at_step"):
        run_training(_cfg(tmp_path, data_dir, "trainer.fail_at_step=7"))
    run_dir = run_dir_of(_cfg(tmp_path, data_dir))
    assert (run_dir / CHECKPOINT).exists()
    ckpt_mtime = (run_dir / CHECKPOINT).stat().st_mtime_ns

    # relaunched with another budget: refused, naming the field; nothing of the old run touched
    with pytest.raises(IdentityMismatch, match=r"budget\.tokens: 10240 in the run dir, 5120 now") as err:
        run_training(_cfg(tmp_path, data_dir, "budget.tokens=5120"))
    assert "restart=true" in str(err.value)
    assert (run_dir / CHECKPOINT).stat().st_mtime_ns == ckpt_mtime
    assert read_record(run_dir)["status"] == "failed"

    # the same config resumes and finishes; its record carries the identity
    done = run_training(_cfg(tmp_path, data_dir))
    assert done["status"] == "done" and done["resumed_from_step"] == 5 and done["D"] == 10240
    assert done["identity"] == json.loads((run_dir / IDENTITY_FILE).read_text())["hash"]

    # a finished run is not returned for another model either
    with pytest.raises(IdentityMismatch, match="model.d_model"):
        run_training(_cfg(tmp_path, data_dir, "model.d_model=128"))
    assert read_record(run_dir)["D"] == 10240

    # restart=true deletes the old run and trains the new config from scratch
    fresh = run_training(_cfg(tmp_path, data_dir, "budget.tokens=5120", "restart=true"))
    assert fresh["status"] == "done" and fresh["D"] == 5120 and fresh["resumed_from_step"] == 0
    assert read_record(run_dir)["D"] == 5120


def test_run_json_from_before_identity_files_is_checked_by_its_config(tmp_path):
    cfg = train_config(SHORT)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "run.json").write_text(
        json.dumps({"status": "done", "config": json.loads(json.dumps(__import__("dataclasses").asdict(cfg)))})
    )
    claim(run_dir, cfg)  # the same config: accepted, identity.json written
    assert (run_dir / IDENTITY_FILE).is_file()
    (run_dir / IDENTITY_FILE).unlink()
    with pytest.raises(IdentityMismatch, match="seed"):
        claim(run_dir, train_config([*SHORT, "seed=3"]))


# ------------------------------------------------------------------------------------------- the lock


@pytest.mark.system
def test_second_launcher_reports_running_elsewhere_and_touches_nothing(tmp_path, data_dir):
    cfg = _cfg(tmp_path, data_dir)
    run_dir = run_dir_of(cfg)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from loopscale.train.lock import RunLock\n"
            f"with RunLock({str(run_dir)!r}):\n    print('held', flush=True); time.sleep(600)",
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        owner = json.loads((run_dir / LOCK_FILE).read_text())
        assert owner["pid"] == holder.pid and owner["host"] == socket.gethostname()
        proc = run_loopscale(
            [
                *SHORT,
                f"runs_dir={tmp_path / 'runs'}",
                f"data.data_dir={data_dir}",
                "hydra.output_subdir=null",
                "hydra/job_logging=none",
                "hydra/hydra_logging=none",
            ],
            cwd=tmp_path,
            module="loopscale.train.entry",
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "running elsewhere" in proc.stderr + proc.stdout and f"pid {holder.pid}" in proc.stderr + proc.stdout
        assert sorted(p.name for p in run_dir.iterdir()) == [LOCK_FILE]  # no record, no checkpoint, no identity
    finally:
        holder.kill()
        holder.wait()
    # the holder died without releasing: its lock is stale (dead pid on this host) and is taken over
    assert (run_dir / LOCK_FILE).exists()
    record = run_training(cfg)
    assert record["status"] == "done" and not (run_dir / LOCK_FILE).exists()


def test_stale_and_live_locks_of_other_hosts(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    lock = run_dir / LOCK_FILE
    lock.write_text(
        json.dumps({"host": "node-that-is-not-this-one", "pid": 1, "slurm_job_id": "77_3", "started": time.time()})
    )
    with pytest.raises(RunLocked, match="host node-that-is-not-this-one, pid 1, SLURM job 77_3"):
        RunLock(run_dir).acquire()
    old = time.time() - STALE_AFTER_S - 60  # no heartbeat for longer than STALE_AFTER_S: its node is gone
    os.utime(lock, (old, old))
    with RunLock(run_dir) as held:
        assert json.loads(lock.read_text())["pid"] == os.getpid() == held.owner["pid"]
        with pytest.raises(RunLocked):  # and now it is ours: a second taker is refused
            RunLock(run_dir).acquire()
    assert not lock.exists()


@pytest.mark.system
@pytest.mark.slow
def test_two_launches_of_one_run_train_it_once(tmp_path, data_dir):
    args = [*SHORT, f"runs_dir={tmp_path / 'runs'}", f"data.data_dir={data_dir}"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "loopscale.train.entry", *args],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    run_dir = run_dir_of(_cfg(tmp_path, data_dir))
    assert read_record(run_dir)["status"] == "done"
    assert len(list((run_dir / "metrics").glob("version_*"))) == 1, outs  # trained once
    assert sum("running elsewhere" in o or "already finished" in o for o in outs) == 1, outs


# ------------------------------------------------------------------------------------ names and values


@pytest.mark.system
@pytest.mark.parametrize(
    "override",
    [
        "run_name=../../../escape",
        "run_name=/tmp/abs",
        "sweep=a/b",
        "point=C1e9-d32-x/../../../../escape2",
        "run_name=..",
    ],
)
def test_unsafe_names_are_refused_and_write_nothing_outside_runs_dir(tmp_path, data_dir, override):
    runs = tmp_path / "deep" / "runs"
    for hydra_dir in ([], ["hydra.run.dir=" + str(tmp_path / "hydra")]):  # Hydra's own check, then ours
        proc = run_loopscale(
            [*SHORT, f"runs_dir={runs}", f"data.data_dir={data_dir}", override, *hydra_dir],
            cwd=tmp_path,
            module="loopscale.train",
        )
        assert proc.returncode != 0
        assert "is not a safe name" in proc.stderr
    outside = [p for p in tmp_path.rglob("*") if p.is_file() and runs not in p.parents and "hydra" not in p.parts]
    assert outside == []
    # at most the run dir of the safe run name (an unsafe point under run_name=same): Hydra's files, the record
    assert all(runs / "default" / "same" in p.parents for p in runs.rglob("*") if p.is_file())


@pytest.mark.parametrize(
    "override, message",
    [
        ("optim.lr=nan", "lr=nan must be a finite number"),
        ("optim.lr=inf", "lr=inf must be a finite number"),
        ("seed=-1", r"seed=-1 must be in \[0, 2\*\*32 - 1\]"),
    ],
)
def test_bad_numbers_fail_validation_with_a_record(tmp_path, data_dir, override, message):
    from support.train import compose_cfg

    cfg = compose_cfg([*SHORT, f"runs_dir={tmp_path}", f"data.data_dir={data_dir}", override])
    with pytest.raises(ValueError, match=message):
        run_training(cfg)
    record = _strict_json(tmp_path / "default" / "same" / "run.json")
    assert record["status"] == "failed" and "invalid config" in record["reason"]


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["data.source=text", "data.path=/no/such/corpus.txt"], "does not exist"),
        (["data.vocab_size=70000", "data.token_dtype=uint16"], "does not fit token_dtype"),
    ],
)
def test_data_failures_before_training_leave_a_failed_record(tmp_path, overrides, message):
    cfg = train_config([*SHORT, f"runs_dir={tmp_path}", f"data.data_dir={tmp_path / 'cache'}", *overrides])
    with pytest.raises(ValueError, match=message):
        run_training(cfg)
    record = _strict_json(run_dir_of(cfg) / "run.json")
    assert record["status"] == "failed" and message in record["reason"] and record["step"] == 0
    # fixing the data is not "another config" when nothing was trained: the fixed config claims the dir
    assert not (run_dir_of(cfg) / "checkpoints").exists()
    claim(run_dir_of(cfg), train_config([*SHORT, f"runs_dir={tmp_path}"]))


# -------------------------------------------------------------------------------------- records


def test_kill_during_final_validation_then_resume_writes_valid_json(tmp_path, data_dir):
    cfg = _cfg(tmp_path, data_dir)
    first = run_training(cfg)
    run_dir = run_dir_of(cfg)
    assert oct((run_dir / "run.json").stat().st_mode & 0o777) == oct(0o666 & ~_umask())
    # the state a kill during the final validation leaves: last.ckpt at the final step, no run.json
    (run_dir / "run.json").unlink()
    again = run_training(cfg)
    record = _strict_json(run_dir / "run.json")
    assert record["status"] == "done" and record["resumed_from_step"] == first["steps"] == record["step"]
    assert record["train_loss"] is None and record["tokens_per_s"] is None  # nothing trained in this process
    assert abs(record["L"] - first["L"]) < 1e-6 and again["L"] == record["L"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


class _Planted:
    def __reduce__(self):
        return (os.system, (f"touch {os.environ['PLANTED_MARKER']}",))


@pytest.mark.system
def test_a_planted_checkpoint_runs_no_code(tmp_path, data_dir):
    cfg = _cfg(tmp_path, data_dir)
    run_dir = run_dir_of(cfg)
    claim(run_dir, cfg)
    marker = tmp_path / "code-ran"
    (run_dir / CHECKPOINT).parent.mkdir(parents=True)
    os.environ["PLANTED_MARKER"] = str(marker)  # read by _Planted.__reduce__ while pickling only
    try:
        (run_dir / CHECKPOINT).write_bytes(pickle.dumps({"state_dict": _Planted()}))
    finally:
        del os.environ["PLANTED_MARKER"]
    # TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 gives torch >= 2.6 the full-unpickling default of torch < 2.6
    proc = run_loopscale(
        [*SHORT, f"runs_dir={tmp_path / 'runs'}", f"data.data_dir={data_dir}"],
        cwd=tmp_path,
        env={"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"},
        module="loopscale.train.entry",
    )
    assert proc.returncode != 0
    assert not marker.exists(), "the planted checkpoint ran code"
    reason = read_record(run_dir)["reason"]
    assert reason.startswith(f"CheckpointRefused: {run_dir / CHECKPOINT} holds more than tensors"), reason
    assert "weights_only=True only and refused it" in reason and "weights_only=False" not in reason, reason
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("loopscale-train: error: ") and "refused it" in last and "Traceback" not in proc.stderr


def test_a_field_added_by_a_code_update_does_not_orphan_old_runs(tmp_path):
    cfg = train_config(SHORT)
    run_dir = tmp_path / "run"
    claim(run_dir, cfg)
    (run_dir / "checkpoints").mkdir()
    (run_dir / CHECKPOINT).write_bytes(b"trained")  # something to protect
    stored = json.loads((run_dir / IDENTITY_FILE).read_text())
    # as written by a loopscale without optim.grad_clip, and with a field this version no longer has
    del stored["identity"]["optim.grad_clip"]
    stored["identity"]["model.retired_option"] = 3
    (run_dir / IDENTITY_FILE).write_text(json.dumps(stored))
    claim(run_dir, cfg)  # the new field at its default: the same run
    with pytest.raises(IdentityMismatch, match=r"optim.grad_clip: \(absent\) in the run dir, 0.5 now"):
        claim(run_dir, train_config([*SHORT, "optim.grad_clip=0.5"]))


def test_a_run_dir_from_before_the_data_hash_resumes_and_one_that_recorded_it_is_held_to_it(tmp_path):
    """train/identity.comparable: the data's content hash (a field no config has) counts only when the run dir
    recorded it: a trained run dir claimed by a loopscale from before it resumes under this one; a run dir that
    recorded a hash refuses other data."""
    cfg = train_config(SHORT)
    old, new = tmp_path / "old", tmp_path / "new"
    for run_dir, data in ((old, None), (new, {DATA_FIELD: "a" * 64})):
        claim(run_dir, cfg, data=data)
        (run_dir / "checkpoints").mkdir()
        (run_dir / CHECKPOINT).write_bytes(b"trained")  # something to protect
    assert DATA_FIELD not in json.loads((old / IDENTITY_FILE).read_text())["identity"]
    claim(old, cfg, data={DATA_FIELD: "a" * 64})  # the same run: resumed, not refused
    claim(new, cfg, data={DATA_FIELD: "a" * 64})
    with pytest.raises(IdentityMismatch, match=DATA_FIELD.replace(".", r"\.")):
        claim(new, cfg, data={DATA_FIELD: "b" * 64})
