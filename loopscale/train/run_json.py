"""run.json: the one record a run leaves behind (RunRecord, its type), reading it, and whether a done record is
this run dir's (record_problem, is_finished; a dir another config claims has the earlier outputs set aside).
A sweep's records become the runs table in collect.py. Outputs come from the code that knows the values; nothing
here greps logs.

A run directory holds: run.json (written atomically when the run ends: done / failed / diverged),
checkpoints/last.ckpt, metrics.csv (the CSV logger), .hydra/ (the composed config).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from loopscale.config.dirs import save_job_config
from loopscale.errors import InputError
from loopscale.train.identity import claim, identity_file_problem, stored_hash

log = logging.getLogger("loopscale.train.run_json")

RUN_FILE = "run.json"
# The record of a forked sweep's stable parent (loopscale/train/forks.py): not a point of the law, so not run.json.
PARENT_FILE = "fork_parent.json"


class TableRow(TypedDict):
    """A row of the runs table (RunRecord.table_row), its columns in order (TABLE_COLUMNS); the first block is what
    `loopscale fit` reads by default. A record that lacks a value leaves it None."""

    r: int | None
    N_once: int | None
    N_rec: int | None
    N_pass: int | None
    N: int | None
    D: int | None
    C: float | None
    L: float | None
    recipe: str | None
    F: float | None
    width: int | None
    depth: int | None
    n_rec: int | None
    bptt_k: int | None
    injection: str | None
    C_budget: float | None
    steps: int | None
    seed: int | None
    tokens_per_s: float | None
    wall_time_s: float | None
    parent: str | None
    run_name: str | None
    run_dir: str | None
    # `loopscale validate`: an lr grid's multiplier (empty in the grid), the shapes its conventions recount with
    lr_scale: float | None
    lr_rule: float | None
    lr_loop: float | None  # optim.lr_loop: the loop's matrices' lr over the other matrices' (empty at 1)
    n_prelude: int | None
    n_coda: int | None
    seq_len: int | None
    vocab_size: int | None
    embedding: int | None
    lm_head: int | None


TABLE_COLUMNS = list(TableRow.__annotations__)


# The keys a record holds as soon as it is started (null when unknown), and those it holds once the run is planned
# (null until known: L before the final validation, bptt_k under full backprop, C_budget outside flops mode, a
# plain run's parent, ...). A forked run's own keys (FORK_KEYS) come right after the start, when it has them.
START_KEYS = ("status", "reason", "step", "run_name", "sweep", "run_dir", "point", "identity")


class ForkKeys(TypedDict, total=False):
    """A forked run's own keys (train/forks.py): a branch's parent run dir, fork step and role, or a stable parent's
    role, fork steps, branches' run names and the compute of its points trained independently / forked."""

    parent: str
    fork_step: int
    role: str  # stable-parent | branch
    fork_steps: list[int]
    branches: list[str]
    C_independent: float
    C_forked: float


FORK_KEYS = tuple(ForkKeys.__annotations__)
PLAN_KEYS = (
    *("r", "recipe", "width", "depth", "n_prelude", "n_rec", "n_coda", "bptt_k", "injection"),
    *("vocab_size", "vocab_padded", "seq_len", "N_once", "N_rec", "N_pass", "N", "embedding", "lm_head"),
    *("F", "D", "C", "C_budget", "steps", "batch_tokens", "L", "val_loss", "train_loss", "seed", "parent"),
    *("git_commit", "versions", "config"),
)


class RankPlacement(TypedDict):
    """Where one rank of a run ran (runner._rank_placement); SLURM's node id and name are None outside SLURM."""

    rank: int
    node_id: str | None
    node: str | None
    host: str
    pid: int
    resumed_from_step: int


class REvalScore(TypedDict):
    """The model scored at `r_eval` passes (testtime_eval.score_rows): nats per target token, forward FLOPs/token."""

    r_eval: int
    val_loss: float
    flops_per_token_eval: float


class CurvePoint(TypedDict):
    """One evaluation of the loss curve (LoopedLM.record_curve_point): after optimizer step `step`, the lr of the
    update that step made, the last training loss, the subset's val loss at the trained r, and with
    trainer.curve_r_eval on, the point scored at each of its pass counts."""

    step: int
    tokens: int
    lr: float
    lr_multiplier: float
    train_loss: float | None
    val_loss: float
    r_eval_scores: NotRequired[list[REvalScore]]


@dataclass
class RunRecord:
    """One training attempt's record, run.json (or fork_parent.json): filled as facts become known
    (loopscale/train/recording.py) and read by `collect`. Its JSON is one flat object, a key per field, written
    in the order the facts are learnt (to_json_dict): START_KEYS always; FORK_KEYS when set; PLAN_KEYS once the
    run is planned (N known); memory_predicted once the device split is known; tokens_per_s once finished; every
    other key when known (not None). Keys this version does not know are kept in `extra` and written last."""

    # started (what a failure before the plan still says)
    status: str | None = None  # done | failed | diverged | interrupted | terminated; None while running
    reason: str | None = None  # why it did not finish
    step: int | None = None  # the optimizer step reached
    run_name: str | None = None
    sweep: str | None = None
    run_dir: str | None = None
    point: str | None = None  # the grid point label, C<budget>-d<width>
    identity: str | None = None  # identity.json's hash (loopscale/train/identity.py)
    # forked sweeps (loopscale/train/forks.py): a branch's parent and fork step, a stable parent's summary
    parent: str | None = None  # a forked branch: its stable parent's run dir
    fork_step: int | None = None
    role: str | None = None  # stable-parent | branch
    fork_steps: list[int] | None = None
    branches: list[str] | None = None
    C_independent: float | None = None
    C_forked: float | None = None
    # planned: the model, its accounting and the budget (RunPlan), the outcome, provenance
    r: int | None = None
    recipe: str | None = None
    width: int | None = None  # d_model
    depth: int | None = None  # L_eff = p + k r + c
    n_prelude: int | None = None
    n_rec: int | None = None
    n_coda: int | None = None
    bptt_k: int | None = None
    injection: str | None = None
    vocab_size: int | None = None  # the true vocabulary: the softmax runs over these ids
    vocab_padded: int | None = None  # rows of the embedding and head (the matmul's shape)
    seq_len: int | None = None
    N_once: int | None = None
    N_rec: int | None = None
    N_pass: int | None = None  # used once per pass (per-pass adapters); absent (0) in records before issue 40
    N: int | None = None
    embedding: int | None = None
    lm_head: int | None = None
    F: float | None = None  # training FLOPs per token
    D: int | None = None  # training tokens
    C: float | None = None  # F x D
    C_budget: float | None = None  # the budget asked for (flops mode)
    steps: int | None = None
    batch_tokens: int | None = None
    L: float | None = None  # the final validation loss, nats per token: the law's L
    val_loss: float | None = None
    train_loss: float | None = None
    seed: int | None = None
    git_commit: str | None = None
    versions: dict[str, str] | None = None
    config: dict[str, Any] | None = None  # the whole TrainConfig
    # training: the data read, the device split, the predicted memory, the optimizer
    data: dict[str, Any] | None = None
    device_batch: int | None = None
    grad_accum: int | None = None
    world: int | None = None
    memory_predicted: dict[str, Any] | None = None  # GPU runs; null on CPU
    optimizer: str | None = None
    lrs: dict[str, float] | None = None
    lr_scale: float | None = None  # optim.lr_scale of an lr-grid run (loopscale/launch/lr_grid.py); absent at 1
    lr_rule: float | None = None  # optim.lr_rule, the tuned rule's multiplier (`loopscale tune`); absent at 1
    lr_loop: float | None = None  # optim.lr_loop, the per-pass matrices' lr over the other matrices'; absent at 1
    ortho_dtype: str | None = None  # MuonH only
    compile: str | bool | None = None  # what trainer.compile (auto: resolved) trained with
    ranks: list[RankPlacement] | None = None  # where each rank ran
    # how it ended
    wall_time_s: float | None = None
    tokens_per_s: float | None = None  # null when this process trained no tokens
    resumed_from_step: int | None = None
    recompile_limit_hits: int | None = None  # compiled runs
    r_eval_scores: list[REvalScore] | None = None  # the finished model scored at other pass counts
    # variable-depth training (model/r_sampling.py): the scheme, and the ledger of expected / realised FLOPs
    r_sampling: str | None = None
    r_ledger: dict[str, Any] | None = None
    # the loss curve (issue 55; a forked branch's first rows are its parent's stable phase), and the FLOPs this
    # attempt spent on it, every r_eval at its own (the parent's rows are counted in the parent's record)
    curve: list[CurvePoint] | None = None
    C_curve: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # keys this version does not know

    def update(self, **values: Any) -> None:
        """Set these keys (unknown ones into `extra`)."""
        for key, value in values.items():
            if key in _FIELDS:
                setattr(self, key, value)
            else:
                self.extra[key] = value

    def to_json_dict(self) -> dict[str, Any]:
        """The record as run.json holds it (the rule in the class docstring). `parent` is a fork key when set
        and a plan key (null for a plain run) otherwise, where the record learns it."""
        out = {key: getattr(self, key) for key in START_KEYS}
        out.update({key: getattr(self, key) for key in FORK_KEYS if getattr(self, key) is not None})
        if self.N is not None:
            out.update({key: getattr(self, key) for key in PLAN_KEYS if key not in out})
        reached = {
            "memory_predicted": self.device_batch is not None,
            "tokens_per_s": self.resumed_from_step is not None,
        }
        for key in _LATER_KEYS:
            if getattr(self, key) is not None or reached.get(key, False):
                out[key] = getattr(self, key)
        return {**out, **self.extra}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunRecord:
        """A record from its JSON object, whatever version wrote it: unknown keys go to `extra`. Values are not
        checked here (record_problem says whether a done record can be trusted)."""
        record = cls()
        record.update(**d)
        return record

    @classmethod
    def from_json(cls, path: Path) -> RunRecord:
        """The record in the file at `path` (load_record's checks: BadRecord when it is not one)."""
        return cls.from_dict(load_record(path))

    def __getitem__(self, key: str) -> Any:
        """A value by its run.json key (a field, else a key this version does not know): for readers written
        against the JSON object (`record["L"]`); the package reads the fields."""
        return getattr(self, key) if key in _FIELDS else self.extra[key]

    def get(self, key: str, default: Any = None) -> Any:
        """As dict.get on the JSON object: the value of `key`, `default` where it is unset."""
        value = getattr(self, key) if key in _FIELDS else self.extra.get(key)
        return default if value is None else value

    def table_row(self) -> TableRow:
        """The runs table's columns of this record; N_pass 0 in a record from before it existed."""
        row = TableRow(**{col: getattr(self, col) for col in TABLE_COLUMNS})
        if row["N_pass"] is None and self.N_once is not None:
            row["N_pass"] = 0
        return row


@dataclass
class ForkedJob:
    """What a forked job hands back (loopscale/train/forks.py): its stable parent's record (fork_parent.json;
    None when there is none) and the record of each branch it was asked for (None: a branch that failed before
    writing one). Not a file: each record is its own."""

    parent: RunRecord | None
    branches: list[RunRecord | None]


_FIELDS = tuple(f.name for f in dataclasses.fields(RunRecord) if f.name != "extra")
_LATER_KEYS = tuple(k for k in _FIELDS if k not in (*START_KEYS, *FORK_KEYS, *PLAN_KEYS))  # learnt in training


class BadRecord(InputError):
    """A record file that is not a run record: cut, not JSON, not UTF-8, not a JSON object, or a link."""


def load_record(path: Path) -> dict[str, Any]:
    """The record at `path`; BadRecord (naming the file and what is wrong) when it is not one. A symlink is
    refused, not followed: a record pointing at another file is not this run's."""
    path = Path(path)
    if path.is_symlink():
        raise BadRecord(f"{path} is a link to {os.readlink(path)}, not a record")
    try:
        text = path.read_bytes().decode("utf-8")
        record = json.loads(text)
    except UnicodeDecodeError:
        raise BadRecord(f"{path} is not UTF-8 text") from None
    except ValueError as err:
        raise BadRecord(f"{path} is not valid JSON (cut by a full disk or a kill?): {err}") from None
    except OSError as err:
        raise BadRecord(f"cannot read {path}: {err.strerror or err}") from None
    if not isinstance(record, dict):
        raise BadRecord(f"{path} holds a JSON {type(record).__name__}, not a record (an object)")
    return record


def read_record(run_dir: Path, name: str = RUN_FILE) -> RunRecord | None:
    """The run's record (run.json, or `name` such as PARENT_FILE) as the RunRecord it was written as, or None
    when there is none yet; BadRecord when the file is not a record."""
    path = Path(run_dir) / name
    if not os.path.lexists(path):
        return None
    return RunRecord.from_json(path)


def read_record_or_none(path: Path) -> RunRecord | None:
    """The RunRecord at `path`, or None when it is missing or not a record."""
    try:
        return RunRecord.from_json(path) if os.path.lexists(path) else None
    except BadRecord:
        return None


def finished_record(run_dir: Path) -> RunRecord | None:
    """The run dir's done record when it belongs to it (record_problem), else None: only such a run is skipped."""
    record = read_record_or_none(Path(run_dir) / RUN_FILE)
    if record is None or record.status != "done":
        return None
    problem = record_problem(Path(run_dir), record)
    if problem is not None:
        log.warning("%s: not taken as finished: %s", run_dir, problem)
    return record if problem is None else None


def is_finished(run_dir: Path) -> bool:
    return finished_record(run_dir) is not None


# what a done record must hold for the table: these columns as numbers (NUMERIC_REQUIRED finite ones, the
# others numbers or null), these as strings or null
NUMERIC_REQUIRED = ("r", "N_once", "N_rec", "N", "D", "C", "L")
NUMERIC_OPTIONAL = (
    "F",
    "width",
    "depth",
    "n_rec",
    "bptt_k",
    "C_budget",
    "steps",
    "seed",
    "tokens_per_s",
    "wall_time_s",
)
TEXT_COLUMNS = ("recipe", "injection", "parent", "run_name")
# Where the outputs of an earlier config of a run dir go when another config claims it (set_aside_replaced):
# not a run of this sweep, so find_run_dirs does not walk it.
REPLACED_DIR = ".replaced"
# What stays when a run dir changes config: the new identity, Hydra's record of this launch, logs, the lock.
KEPT_ON_REPLACE = frozenset({"identity.json", ".hydra", ".lock", REPLACED_DIR})


def record_problem(run_dir: Path, record: RunRecord) -> str | None:
    """Why a done record cannot be trusted as this run dir's, or None. It must name this folder's run (a
    copy `run005.bak` names run005), and match the dir's identity.json (loopscale/train/identity.py) by its
    identity hash or, for records from before the hash, its config; with no identity.json it must at least
    carry one of them (what loopscale-train writes). Its table columns must hold numbers / strings."""
    name = record.run_name
    if name is not None and name != run_dir.name:
        return f"its record is run {name!r}'s, not {run_dir.name!r}'s (a copy, or a record moved here?)"
    problem = identity_file_problem(run_dir, record.identity, record.config)
    if problem is not None:
        return problem
    for col in NUMERIC_REQUIRED + NUMERIC_OPTIONAL:
        value = getattr(record, col)
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not (number and math.isfinite(value)) and (col in NUMERIC_REQUIRED or value is not None):
            return f"its {col} is {value!r}, not a finite number"
    for col in TEXT_COLUMNS:
        value = getattr(record, col)
        if value is not None and not isinstance(value, str):
            return f"its {col} is {value!r}, not text"
    return None


def set_aside_replaced(run_dir: Path, old_identity: str) -> Path | None:
    """Another config has just claimed `run_dir` (its earlier config trained nothing worth keeping: no
    checkpoint): move what the earlier attempt left (its record, metrics/version_*, W&B files) into
    .replaced/<old_identity>/, so the new run's curve and record are not read together with the old ones.
    Returns that folder, or None when there was nothing to move."""
    run_dir = Path(run_dir)
    entries = [e for e in run_dir.iterdir() if e.name not in KEPT_ON_REPLACE and not e.name.endswith(".log")]
    if not entries:
        return None
    aside = run_dir / REPLACED_DIR / old_identity
    aside.mkdir(parents=True, exist_ok=True)
    for entry in entries:
        target = aside / entry.name
        if os.path.lexists(target):  # the same old config replaced twice: keep the latest attempt's
            target = aside / f"{entry.name}.{len(list(aside.iterdir()))}"
        os.replace(entry, target)
    log.warning("%s: claimed by another config; the earlier config's outputs moved to %s", run_dir, aside)
    return aside


def claim_run_dir(run_dir: Path, config: Any, task_cfg=None, **kwargs: Any) -> str:
    """identity.claim(run_dir, config, **kwargs); when another config has just taken the dir over, the earlier config's
    outputs moved aside (set_aside_replaced); Hydra's composed `task_cfg` saved into .hydra/. The identity hash."""
    before = stored_hash(run_dir)
    digest = claim(run_dir, config, **kwargs)
    if before is not None and digest != before:
        set_aside_replaced(run_dir, before)
    save_job_config(run_dir, task_cfg)
    return digest
