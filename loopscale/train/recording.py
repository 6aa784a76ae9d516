"""The record of one training attempt (run.json, or parent.json for a forked job's stable parent), written
whatever happens: the facts known when a run starts, those its plan adds, and how it ended — done with its loss,
or diverged / interrupted / terminated / failed with the step it reached and why.

    with RecordedRun(run_dir, "run.json", first_record(cfg, run_dir)) as run:
        ...                        # the body fills run.record and sets run.trainer once it exists
        run.finish(module, batch_tokens, val_loss)

The record is a RunRecord (loopscale/train/run_json.py: its fields, its JSON). Only the process of global rank 0
writes (every rank of a DDP run holds the same record).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from pathlib import Path
from typing import Any

from loopscale.atomic import write_json_atomic
from loopscale.config.schema import TrainConfig
from loopscale.provenance import git_commit, library_versions
from loopscale.signals import Terminated, stop_status
from loopscale.train.compiling import recompile_limit_hits
from loopscale.train.identity import identity_hash, identity_of, stored_hash
from loopscale.train.lightning_module import Diverged
from loopscale.train.plan import RunPlan
from loopscale.train.run_json import ForkKeys, RunRecord

log = logging.getLogger("loopscale.train.entry")
STOP_REASONS = {"interrupted": "interrupted (Ctrl-C / SIGINT)", "terminated": "terminated (SIGTERM)"}
# the RunPlan's numbers a run.json holds (its accounting and budget)
RECORDED_PLAN = (
    *("N_once", "N_rec", "N_pass", "N", "embedding", "lm_head"),
    *("F", "D", "C", "C_budget", "steps", "batch_tokens"),
)


def first_record(cfg: TrainConfig, run_dir: Path, extra: ForkKeys | None = None) -> RunRecord:
    """What a failure before the plan exists (a bad data path, a vocabulary too large, ...) still records;
    `extra`: what the caller adds (a forked branch's parent and fork step, a stable parent's summary)."""
    record = RunRecord(
        step=0,
        run_name=cfg.run_name,
        sweep=cfg.sweep,
        run_dir=str(run_dir),
        point=cfg.point,
        # identity.json's hash (the config and its data's content hash; identity.py), which the record repeats
        identity=stored_hash(run_dir) or identity_hash(identity_of(cfg)),
    )
    record.update(**(extra or {}))
    return record


def record_plan(record: RunRecord, cfg: TrainConfig, plan: RunPlan) -> None:
    """The planned run into its record: the model, its accounting and budget (the plan's), the seed and
    provenance. The outcome (L, val_loss, train_loss) stays unknown; a forked branch keeps its parent."""
    m = cfg.model
    record.update(
        r=m.r,
        recipe=m.recipe,
        width=m.d_model,
        depth=m.l_eff,
        n_prelude=m.n_prelude,
        n_rec=m.n_rec,
        n_coda=m.n_coda,
        bptt_k=m.bptt_k,
        injection=m.injection,
        vocab_size=m.vocab_size,
        vocab_padded=m.padded_vocab_size,
        seq_len=m.seq_len,
        **{key: getattr(plan, key) for key in RECORDED_PLAN},
        seed=cfg.seed,
        git_commit=git_commit(),
        versions=library_versions(),
        config=dataclasses.asdict(cfg),
    )
    if cfg.optim.lr_scale != 1.0:  # an lr-grid run says so; a grid run's record is as before
        record.update(lr_scale=cfg.optim.lr_scale)
    if cfg.optim.lr_rule != 1.0:  # a run of a tuned lr rule (`loopscale tune`) says so
        record.update(lr_rule=cfg.optim.lr_rule)
    if cfg.optim.lr_loop != 1.0:  # the loop's matrices at their own lr
        record.update(lr_loop=cfg.optim.lr_loop)
    if plan.r_ledger is not None:  # variable-depth training (model/r_sampling.py): its scheme and FLOPs ledger
        record.update(r_sampling=m.r_sampling, r_ledger=dict(plan.r_ledger))


class RecordedRun:
    """Context manager around one training attempt: on an exception the record says diverged, interrupted,
    terminated or failed (with the trainer's step) and the exception goes on; the record is written on the way
    out in every case once it has a status."""

    def __init__(self, run_dir: Path, record_file: str, record: RunRecord):
        self.path = run_dir / record_file
        self.record = record
        self.trainer = None
        self.module = None  # the LightningModule once built: its loss curve goes into the record, whatever happens
        self.started = time.perf_counter()

    def __enter__(self) -> RecordedRun:
        return self

    def __exit__(self, exc_type, err, tb) -> bool:
        try:
            if isinstance(err, Diverged):
                self.record.update(status="diverged", reason=str(err), step=err.step)
            elif err is not None:
                stopped = stop_status(err)  # Ctrl-C or SIGTERM: said as such, not as a failure (signals.py)
                step = self.trainer.global_step if self.trainer is not None else 0
                reason = STOP_REASONS.get(stopped) or f"{type(err).__name__}: {err}"
                self.record.update(status=stopped or "failed", reason=reason, step=step)
                if stopped == "terminated" and not isinstance(err, Terminated):
                    raise Terminated() from err  # Lightning's own SIGTERMException exits 0
        finally:
            if self.module is not None:
                record_curve(self.record, self.module)
            if (self.trainer is None or self.trainer.is_global_zero) and self.record.status is not None:
                if self.record.wall_time_s is None:
                    self.record.wall_time_s = time.perf_counter() - self.started
                write_record_or_log(self.path, self.record)
        return False

    def finish(self, module, batch_tokens: int, val) -> None:
        """The record of a run that trained to its end: its loss, steps and throughput."""
        wall = time.perf_counter() - self.started
        val = None if val is None else float(val)
        # steps this process trained; the rest came from the checkpoint it resumed (or forked) from. A resume
        # after the last step (killed in the final validation) trains none and leaves train_loss unknown.
        steps_trained = module.tokens_trained // batch_tokens
        train_loss = module.last_train_loss if math.isfinite(module.last_train_loss) else None
        step = self.trainer.global_step
        self.record.update(status="done", step=step, L=val, val_loss=val, train_loss=train_loss, wall_time_s=wall)
        # whole-run throughput of this process (a resumed run counts only what it trained itself)
        self.record.tokens_per_s = module.tokens_trained / wall if wall > 0 and module.tokens_trained else None
        self.record.resumed_from_step = step - steps_trained
        if self.record.r_ledger is not None:  # the passes trained (checkpointed with the weights) beside the plan's
            self.record.r_ledger = {**self.record.r_ledger, "trained": module.r_tally_record()}


def record_curve(record: RunRecord, module) -> None:
    """The module's loss curve (LoopedLM.curve: its evaluations, a forked branch's parent's first) and the
    FLOPs of the evaluations this attempt made, into the record."""
    record.curve = [dict(row) for row in module.curve] or None
    record.C_curve = module.curve_evaluated * module.curve_flops_per_point


def write_record_or_log(path: Path, record: RunRecord | dict[str, Any]) -> None:
    """Write a record (a RunRecord, or the JSON object of one); when even that fails (a full disk), say so
    without hiding the first error."""
    try:
        write_json_atomic(path, record.to_json_dict() if isinstance(record, RunRecord) else record)
    except OSError as err:
        log.error("could not write %s: %s", path, err)


def record_recompile_limit_hits(cfg: TrainConfig, record: RunRecord, since: int) -> None:
    """A compiled run that fell back to eager trained at eager speed: say so in the log and in run.json
    (the process's hits after the first `since`, i.e. during this run)."""
    if not cfg.trainer.compile:
        return

    hits = recompile_limit_hits()[since:]
    record.recompile_limit_hits = len(hits)
    for message in hits:
        log.error("compiled code fell back to eager: %s", message)
