"""Run identity: which config a run directory trains, so a relaunch never resumes or skips the wrong run.

The identity of a run is its resolved config (TrainConfig as a dict) without the fields that do not change
what is trained: where it is written (runs_dir, sweep, run_name, data.data_dir), its labels (point), how it
is watched (progress bars, logging, validation and checkpoint intervals in steps or minutes, the r_eval scoring
of the finished model and of the curve's evaluations, the W&B
logger), how fast it runs (num_threads, num_proc, compile: a compiled step equals the eager one to fp32
rounding, and trainer.compile=auto may choose differently on a relaunch once the graph cache is warm), what
launch estimates assume (assumed_mfu, plan_device), which part of a forked job runs (budget.fork_stage), the
test-only fault injection, restart itself, and model.vocab_size (set from the tokenizer, which data.* already
fixes). Every other field counts,
including any field added to the config later; and so does DATA_FIELD, the content hash of the data the
run reads (`RunData.content_sha256`, opened before the run), so a run never resumes on a corpus or packed set that
changed.

`identity.json` in the run dir holds the identity and its hash, written before training starts; run.json
repeats the hash (run_json.record_problem checks that it does). A relaunch with a different identity
raises IdentityMismatch naming the fields; with restart=true the run's files are deleted and it starts over
(docs/operations.md, "Relaunching safely").
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from loopscale.atomic import write_json_atomic
from loopscale.config.model import with_moved_fields
from loopscale.config.schema import TrainConfig
from loopscale.errors import ConfigError

if TYPE_CHECKING:
    from loopscale.data.run_data import RunData

log = logging.getLogger("loopscale.train.identity")

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
        "trainer.ckpt_every_minutes",
        "trainer.val_every_steps",
        "trainer.val_subset",
        "trainer.r_eval",
        "trainer.curve_r_eval",
        "trainer.curve_points",
        "trainer.curve_share",
        "trainer.check_limits",
        "trainer.compile",
        "trainer.compile_backend",
        "trainer.assumed_mfu",
        "trainer.plan_device",
        "trainer.fail_at_step",
        "trainer.nan_at_step",
        "logger",
    }
)
# the data's content hash (`RunData.content_sha256`), part of the identity beside the config's fields
DATA_FIELD = "data.content_sha256"


def data_identity(run_data: RunData | Exception) -> dict[str, str] | None:
    """The part of a run's identity its config does not hold: {DATA_FIELD: content hash} of the data it opened
    (`run_data.open_or_error`); None for data that could not be opened (the run then records why it failed)."""
    return None if isinstance(run_data, Exception) else {DATA_FIELD: run_data.content_sha256}


# Fields added after runs were recorded, left out of the identity while at the value every earlier run had, so
# an earlier run dir keeps its hash (tests/unit/test_identity_defaults.py). model.options needs no entry: empty
# (every earlier design), it adds no key; model.block is the layer every earlier model had; optim.lr_scale 1 is
# the transferred lr itself (an lr grid, launch/lr_grid.py, moves it); optim.lr_rule 1 is no tuned rule.
ADDED_AT_DEFAULT = {
    "model.block": "prenorm",
    "optim.lr_scale": 1.0,
    "optim.lr_rule": 1.0,
    "optim.lr_loop": 1.0,  # the per-pass matrices at the other matrices' lr (one group), as every earlier run
    # variable-depth training (model/r_sampling.py): every earlier run trained at fixed r
    "model.r_sampling": "fixed",
    "model.r_sampling_per": "step",
    "model.r_sigma": 0.5,
    "model.r_set": None,
    "model.r_max": None,
    "model.r_grad": "bptt",
}
# files a restart keeps: Hydra's record and log of this very launch, the run's lock (loopscale/train/lock.py)
KEEP_ON_RESTART = frozenset({".hydra", ".lock"})
KEEP_SUFFIX_ON_RESTART = ".log"


class IdentityMismatch(ConfigError):
    """The run dir holds a run of another config."""


# A run's identity: {dotted config field: its JSON value}, flat (identity_of), the data's hash among them.
Identity = dict[str, str | int | float | bool | list | None]


class IdentityFile(TypedDict):
    """identity.json: the identity and its hash (identity_hash), which the run's records repeat."""

    hash: str
    identity: Identity


def _flatten(tree: dict[str, Any], prefix: str = "") -> Identity:
    flat = {}
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, path + "."))
        else:
            flat[path] = value
    return flat


def identity_of(config: Any) -> Identity:
    """The identity fields of a TrainConfig (or of its dict form, as run.json's "config" holds it), as a
    flat {dotted field: value} dict."""
    tree = dataclasses.asdict(config) if dataclasses.is_dataclass(config) else config
    tree = {**tree, "model": with_moved_fields(tree["model"])} if "model" in tree else tree
    flat = _flatten(json.loads(json.dumps(tree, default=str)))  # JSON types: tuples become lists, as on disk
    flat = {k: v for k, v in flat.items() if k not in ADDED_AT_DEFAULT or ADDED_AT_DEFAULT[k] != v}
    return {k: v for k, v in sorted(flat.items()) if k not in NOT_IDENTITY and k.split(".", 1)[0] not in NOT_IDENTITY}


def identity_hash(identity: Identity) -> str:
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]


def read_identity_file(run_dir: Path) -> IdentityFile | None:
    """identity.json's content ({"hash", "identity"}), None when there is none; IdentityMismatch when it is
    not an identity file (a cut write, garbage, a link), which no launch may take for this config's."""
    path = Path(run_dir) / IDENTITY_FILE
    if not os.path.lexists(path):
        return None
    try:
        if path.is_symlink():
            raise ValueError("a link")
        content = json.loads(path.read_bytes().decode("utf-8"))
        if not (isinstance(content, dict) and isinstance(content.get("identity"), dict)):
            raise ValueError("no identity in it")
    except (OSError, ValueError) as err:
        raise IdentityMismatch(
            f"{path} is not an identity file ({err}); delete it, or relaunch with restart=true to start over"
        ) from None
    return content


def _record_fields(path: Path) -> dict[str, Any]:
    """A run's record as a dict; {} when there is none or it is not one (run_json.py, which builds on this
    module, reports such records; here they only count as holding nothing)."""
    try:
        record = None if path.is_symlink() else json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, ValueError):
        record = None
    return record if isinstance(record, dict) else {}


def stored_identity(run_dir: Path, record_file: str = "run.json") -> Identity | None:
    """The identity the run dir was trained with: identity.json, else the config in its record (runs from
    before identity.json), else None (nothing trained there yet, or a record without a config)."""
    content = read_identity_file(run_dir)
    if content is not None:
        return content["identity"]
    config = _record_fields(Path(run_dir) / record_file).get("config")
    return identity_of(config) if isinstance(config, dict) else None


def stored_hash(run_dir: Path) -> str | None:
    """identity.json's hash (what the run's records repeat), or None."""
    try:
        content = read_identity_file(run_dir)
    except IdentityMismatch:
        return None
    return None if content is None else content.get("hash")


def identity_file_problem(run_dir: Path, identity: str | None, config: Any) -> str | None:
    """Why a done record with this identity hash and config does not belong to the run dir's identity, or None
    (run_json.record_problem)."""
    try:
        content = read_identity_file(run_dir)
    except IdentityMismatch as err:
        return str(err)
    if content is None:
        ok = identity or isinstance(config, dict)
        return None if ok else "its record has neither an identity nor a config (not written by loopscale-train)"
    if identity:
        if identity != content.get("hash"):
            return f"its record's identity {identity} is not identity.json's {content.get('hash')}"
        return None
    if isinstance(config, dict):
        old, new = comparable(content["identity"], identity_of(config))
        return (
            None
            if old == new
            else f"its record's config differs from identity.json ({'; '.join(differences(old, new)[:3])})"
        )
    return "its record has neither an identity nor a config, but the run dir has an identity.json"


def comparable(old: Identity, new: Identity) -> tuple[Identity, Identity]:
    """(old, new) without the fields that a code change added or removed: a field the run dir does not
    know counts only when this launch sets it away from its default; a field the code no longer has is
    not compared. So updating loopscale does not orphan every run dir, while a real change still shows."""
    defaults = identity_of(TrainConfig())
    old = {k: v for k, v in old.items() if k in new}
    # a field no config has (the data's content hash) counts only when the run dir recorded it too
    new = {k: v for k, v in new.items() if k in old or (k in defaults and v != defaults[k])}
    return old, new


def differences(old: Identity, new: Identity) -> list[str]:
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
    return _record_fields(Path(run_dir) / record_file).get("status") in ("done", "diverged")


def claim(
    run_dir: Path, config: Any, restart: bool = False, record_file: str = "run.json", data: dict | None = None
) -> str:
    """Make sure `run_dir` is a run of `config` on the data `data` identifies ({DATA_FIELD: content hash},
    `RunData.content_sha256` of the data the run opened), and return the identity hash.

    Nothing there yet: writes identity.json. The same identity: nothing to do (the caller resumes or skips).
    Another identity: IdentityMismatch naming the differing fields, unless `restart`, which deletes the
    run's files (all but KEEP_ON_RESTART) and claims the dir afresh."""
    run_dir = Path(run_dir)
    identity = whole = {**identity_of(config), **(data or {})}  # whole: what identity.json holds
    digest = identity_hash(identity)
    try:
        old = stored_identity(run_dir, record_file)
    except IdentityMismatch:  # identity.json is garbage: only restart=true may clear it
        if not restart:
            raise
        old = {IDENTITY_FILE: "unreadable"}
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
        write_json_atomic(run_dir / IDENTITY_FILE, IdentityFile(hash=digest, identity=whole))
        return digest
    return stored_hash(run_dir) or digest
