"""Run identity: which config a run directory trains, so a relaunch never resumes or skips the wrong run.

The identity of a run is its resolved config (TrainConfig as a dict) without the fields that do not change
what is trained: where it is written (runs_dir, sweep, run_name, data.data_dir), its labels (point), how it
is watched (progress bars, logging and checkpoint intervals, the W&B logger), how fast it runs
(num_threads, num_proc), which part of a forked job runs (budget.fork_stage), the test-only fault
injection, restart itself, and model.vocab_size (set from the tokenizer, which data.* already fixes).
Every other field counts, including any field added to the config later.

`identity.json` in the run dir holds the identity and its hash, written before training starts; run.json
repeats the hash. A relaunch with a different identity raises IdentityMismatch naming the fields; with
restart=true the run's files are deleted and it starts over (see README, "Changing a run's config").
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import shutil
from pathlib import Path
from typing import Any

log = logging.getLogger("loopscale.identity")

IDENTITY_FILE = "identity.json"
# dotted paths of TrainConfig fields that do not change the trained model or its record's numbers
NOT_IDENTITY = frozenset(
    {
        "runs_dir",
        "sweep",
        "run_name",
        "point",
        "restart",
        "data.data_dir",
        "data.num_proc",
        "model.vocab_size",
        "budget.fork_stage",
        "trainer.progress",
        "trainer.num_threads",
        "trainer.log_every_steps",
        "trainer.ckpt_every_steps",
        "trainer.val_every_steps",
        "trainer.val_subset",
        "trainer.check_limits",
        "trainer.compile_backend",
        "trainer.fail_at_step",
        "trainer.nan_at_step",
        "logger",
    }
)
# files a restart keeps: Hydra's record and log of this very launch, the run's lock (loopscale/runlock.py)
KEEP_ON_RESTART = frozenset({".hydra", ".lock"})
KEEP_SUFFIX_ON_RESTART = ".log"


class IdentityMismatch(ValueError):
    """The run dir holds a run of another config."""


def _flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat = {}
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, path + "."))
        else:
            flat[path] = value
    return flat


def identity_of(config: Any) -> dict[str, Any]:
    """The identity fields of a TrainConfig (or of its dict form, as run.json's "config" holds it), as a
    flat {dotted field: value} dict."""
    tree = dataclasses.asdict(config) if dataclasses.is_dataclass(config) else config
    flat = _flatten(json.loads(json.dumps(tree, default=str)))  # JSON types: tuples become lists, as on disk
    return {k: v for k, v in sorted(flat.items()) if k not in NOT_IDENTITY and k.split(".", 1)[0] not in NOT_IDENTITY}


def identity_hash(identity: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]


def stored_identity(run_dir: Path, record_file: str = "run.json") -> dict[str, Any] | None:
    """The identity the run dir was trained with: identity.json, else the config in its record (runs from
    before identity.json), else None (nothing trained there yet, or a record without a config)."""
    run_dir = Path(run_dir)
    path = run_dir / IDENTITY_FILE
    if path.is_file():
        return json.loads(path.read_text())["identity"]
    record = run_dir / record_file
    if record.is_file():
        config = json.loads(record.read_text()).get("config")
        if isinstance(config, dict):
            return identity_of(config)
    return None


def comparable(old: dict[str, Any], new: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(old, new) without the fields that a code change added or removed: a field the run dir does not
    know counts only when this launch sets it away from its default; a field the code no longer has is
    not compared. So updating loopscale does not orphan every run dir, while a real change still shows."""
    from loopscale.config import TrainConfig

    defaults = identity_of(TrainConfig())
    old = {k: v for k, v in old.items() if k in new}
    new = {k: v for k, v in new.items() if k in old or v != defaults.get(k, object())}
    return old, new


def differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    missing = object()
    return [
        f"{k}: {old.get(k, missing)!r} in the run dir, {new.get(k, missing)!r} now".replace(repr(missing), "(absent)")
        for k in sorted(old.keys() | new.keys())
        if old.get(k, missing) != new.get(k, missing)
    ]


def trained_anything(run_dir: Path, record_file: str = "run.json") -> bool:
    """False for a dir whose run failed before its first checkpoint (bad data path, ...): nothing to keep."""
    checkpoints = Path(run_dir) / "checkpoints"
    if checkpoints.is_dir() and any(checkpoints.iterdir()):
        return True
    record = Path(run_dir) / record_file
    if record.is_file():
        return json.loads(record.read_text()).get("status") in ("done", "diverged")
    return False


def claim(run_dir: Path, config: Any, restart: bool = False, record_file: str = "run.json") -> str:
    """Make sure `run_dir` is a run of `config`, and return the identity hash.

    Nothing there yet: writes identity.json. The same identity: nothing to do (the caller resumes or skips).
    Another identity: IdentityMismatch naming the differing fields, unless `restart`, which deletes the
    run's files (all but KEEP_ON_RESTART) and claims the dir afresh."""
    from loopscale.atomic import write_json_atomic

    run_dir = Path(run_dir)
    identity = identity_of(config)
    digest = identity_hash(identity)
    old = stored_identity(run_dir, record_file)
    if old is not None:
        old, identity = comparable(old, identity)
    if old is not None and old != identity and not trained_anything(run_dir, record_file):
        log.info("%s: claimed by a changed config (the earlier one trained nothing)", run_dir)
        old = None
    if old is not None and old != identity:
        diff = differences(old, identity)
        if not restart:
            shown = "; ".join(diff[:8]) + (f"; ... ({len(diff)} in all)" if len(diff) > 8 else "")
            raise IdentityMismatch(
                f"{run_dir} holds a run of another config ({shown}). Give this run another run_name, or "
                f"launch again with restart=true to delete that run and start over"
            )
        log.warning("restart=true: deleting %s, a run of another config (%s)", run_dir, "; ".join(diff))
        for entry in run_dir.iterdir():
            if entry.name not in KEEP_ON_RESTART and not entry.name.endswith(KEEP_SUFFIX_ON_RESTART):
                shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
        old = None
    if old is None or not (run_dir / IDENTITY_FILE).is_file():
        write_json_atomic(run_dir / IDENTITY_FILE, {"hash": digest, "identity": identity_of(config)})
    return digest
