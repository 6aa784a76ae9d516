"""Train one run in its run dir and write its record: `train_run` (Lightning fit, resuming from
checkpoints/last.ckpt, final validation, run.json), and the run dir's lock. Below both entry points: plain
runs (loopscale/train/entry.py) and forked runs' parents and branches (loopscale/train/forks.py) train through here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import socket
import sys
from pathlib import Path
from typing import Any

import lightning as L
import torch
import torch.distributed as dist
from lightning.fabric.utilities.rank_zero import rank_zero_only
from lightning.pytorch.callbacks import RichProgressBar, TQDMProgressBar
from lightning.pytorch.loggers import CSVLogger, WandbLogger
from lightning.pytorch.plugins.environments import SLURMEnvironment

from loopscale.config.schema import TrainConfig, with_vocab
from loopscale.data.run_data import RunData, make_datamodule, usable
from loopscale.signals import training_signals
from loopscale.train.checkpoint import AtomicLastCheckpoint, ForkCheckpoints, newest_checkpoint, refused_checkpoint
from loopscale.train.compiling import recompile_limit_hits
from loopscale.train.lightning_module import CurveEvaluations, DivergenceCheck, LoopedLM, SkipFinalStepValidation
from loopscale.train.lock import RunLock
from loopscale.train.plan import (
    CHECKPOINT,
    RunPlan,
    TrainingPlan,
    plan_run,
    plan_training,
)
from loopscale.train.recording import RecordedRun, first_record, record_plan, record_recompile_limit_hits
from loopscale.train.run_json import ForkKeys, RankPlacement, RunRecord, claim_run_dir, finished_record
from loopscale.train.step_progress import progress_callbacks
from loopscale.train.testtime_eval import score_r_eval

log = logging.getLogger("loopscale.train.entry")  # the training log, whichever entry point trains


def _print_plan(cfg: TrainConfig, plan: RunPlan, run_dir: Path) -> None:
    m = cfg.model
    log.info(
        "run %s: r=%d (%s, injection=%s, bptt_k=%s) d_model=%d L_eff=%d [p=%d k=%d c=%d] | N_once=%s N_rec=%s "
        "N=%s | F=%.4g FLOPs/token | D=%s tokens = %d steps x %d tokens | C=%.4g FLOPs | dir %s",
        cfg.run_name,
        m.r,
        m.recipe,
        m.injection,
        m.bptt_k,
        m.d_model,
        m.l_eff,
        m.n_prelude,
        m.n_rec,
        m.n_coda,
        f"{plan.N_once:,}",
        f"{plan.N_rec:,}",
        f"{plan.N:,}",
        plan.F,
        f"{plan.D:,}",
        plan.steps,
        plan.batch_tokens,
        plan.C,
        run_dir,
    )


# What a W&B run's summary carries: enough to draw a scaling plot in the W&B UI (L against N or C, by r and recipe)
WANDB_SUMMARY_KEYS = ("N_once", "N_rec", "N", "F", "D", "C", "L", "r", "recipe", "status", "steps")


def wandb_tags(cfg: TrainConfig) -> list[str]:
    """The W&B tags of a run: its recipe and r, as `recipe:<label>` and `r:<r>` (filters in the W&B UI)."""
    return [f"recipe:{cfg.model.recipe}", f"r:{cfg.model.r}"]


def wandb_summary(record: RunRecord) -> dict[str, Any]:
    """The run summary from the run's record (run.json): the accounting, the final loss L, r and recipe."""
    return {key: getattr(record, key) for key in WANDB_SUMMARY_KEYS}


def _loggers(cfg: TrainConfig, run_dir: Path) -> list:
    # metrics/version_<n>/metrics.csv: one version per attempt, so a resumed run keeps its earlier curve
    loggers = [CSVLogger(save_dir=str(run_dir), name="metrics")]
    if cfg.logger.wandb:
        try:
            loggers.append(
                WandbLogger(
                    project=cfg.logger.wandb_project,
                    entity=cfg.logger.wandb_entity,
                    name=f"{cfg.sweep}/{cfg.run_name}",
                    # one group per sweep, so the W&B UI groups and plots a sweep's runs together
                    group=cfg.sweep,
                    tags=wandb_tags(cfg),
                    save_dir=str(run_dir),
                    offline=cfg.logger.wandb_mode == "offline",
                    config=dataclasses.asdict(cfg),
                )
            )
        except Exception as err:  # W&B must never fail a run: the CSV and run.json are the source of truth
            log.warning("W&B logger disabled: %s", err)
    return loggers


@contextlib.contextmanager
def _wandb_closed(run: RecordedRun):
    """On the way out, whatever the outcome: the record's numbers into the W&B run summary, the W&B run
    finished (_close_wandb)."""
    try:
        yield
    finally:
        _close_wandb(run.trainer, run.record)


def _close_wandb(trainer, record: RunRecord) -> None:
    """Write the record's numbers into the W&B run summary and finish the W&B run.

    Finishing matters beyond flushing: Lightning's WandbLogger adopts any W&B run still open in the process,
    so without it every later run of an in-process sweep (hydra/launcher=basic) would log into the first."""
    if trainer is None or not trainer.is_global_zero:
        return
    for logger in trainer.loggers:
        if not isinstance(logger, WandbLogger):
            continue
        try:
            experiment = logger.experiment
            experiment.summary.update(wandb_summary(record))
            experiment.finish(exit_code=0 if record.status == "done" else 1)
        except Exception as err:  # W&B must never fail a run (see _loggers)
            log.warning("W&B run summary not written: %s", err)


def _callbacks(cfg: TrainConfig, run_dir: Path, fork_steps: list[int]) -> list:
    # fork checkpoints first: a kill between the two saves at a fork step then never leaves last.ckpt past
    # a fork that was not written
    # the divergence check first: no checkpoint of the same step may save diverged weights
    # the curve's evaluation before any checkpoint of its step: the checkpoint then holds the point
    callbacks = [DivergenceCheck(), CurveEvaluations(), SkipFinalStepValidation()]
    callbacks += [ForkCheckpoints(run_dir / CHECKPOINT.parent, fork_steps)] if fork_steps else []
    callbacks.append(
        AtomicLastCheckpoint(
            run_dir / CHECKPOINT,
            every_n_steps=cfg.trainer.ckpt_every_steps,
            every_minutes=cfg.trainer.ckpt_every_minutes,
            time_check_every=cfg.trainer.log_every_steps,
        )
    )
    if cfg.trainer.progress:
        callbacks.append(RichProgressBar() if sys.stdout.isatty() else TQDMProgressBar(refresh_rate=50))
    return callbacks + progress_callbacks()  # a pool worker's sweep bar (loopscale/train/step_progress.py)


def _plugins() -> list:
    """Under submitit on SLURM, submitit owns requeueing (timeouts, preemption): Lightning's own SLURM
    auto-requeue (SIGUSR1 -> scontrol requeue) stays off so a job is never requeued twice. Plain sbatch
    users (slurm/train.sbatch) keep Lightning's behaviour."""
    if os.environ.get("SUBMITIT_EXECUTOR") == "slurm" and SLURMEnvironment.detect():
        return [SLURMEnvironment(auto_requeue=False)]
    return []


def _rank_placement(trainer, resumed_from_step: int) -> list[RankPlacement]:
    """Where each rank ran and the step it resumed from, gathered from every rank (a collective: all ranks
    call it)."""
    mine = RankPlacement(
        rank=trainer.global_rank,
        node_id=os.environ.get("SLURM_NODEID"),
        node=os.environ.get("SLURMD_NODENAME"),
        host=socket.gethostname(),
        pid=os.getpid(),
        resumed_from_step=resumed_from_step,
    )
    if trainer.world_size == 1 or not (dist.is_available() and dist.is_initialized()):
        return [mine]
    placement: list[Any] = [None] * trainer.world_size
    dist.all_gather_object(placement, mine)
    return placement


def running_elsewhere(err: Exception, run_dir: Path) -> RunRecord:
    """The result of a launch that found its run dir locked by a live process: it trains nothing (a record
    handed back, never written)."""
    log.warning("%s", err)
    return RunRecord(status="running-elsewhere", reason=str(err), run_dir=str(run_dir))


# How this process's last launch ended when it trained nothing: "skipped (done)" or "running elsewhere"
# (None: it trained, or failed). A pool worker reads it to tell the sweep (launch/pool_launcher.py). It lives
# here, not in train/entry.py, which may run as __main__ and reach the worker as a copy (cloudpickle).
_LAST_OUTCOME: str | None = None


def note_outcome(outcome: str | None) -> None:
    global _LAST_OUTCOME
    _LAST_OUTCOME = outcome


def last_outcome() -> str | None:
    return _LAST_OUTCOME


def launching_rank() -> bool:
    """True in the process that launched the run; False in the processes Lightning (or srun) starts for
    the other ranks of a multi-device run, which rerun this script and must not take the lock again."""
    return getattr(rank_zero_only, "rank", 0) == 0


def run_dir_lock(run_dir: Path):
    """The run dir's lock in the launching process; nothing in the other ranks' processes."""
    return RunLock(run_dir) if launching_rank() else contextlib.nullcontext()


def claimed_record(run_dir: Path, cfg: TrainConfig, data: dict | None, task_cfg=None) -> RunRecord | None:
    """Under the run dir's lock: the dir claimed for `cfg` on the data `data` identifies (the launching rank; a
    run of this same config on the same data is resumed or skipped, another config's that trained nothing taken
    over, its record and metrics set aside: run_json.claim_run_dir), Hydra's composed `task_cfg` saved into its
    .hydra/, and its finished record: None while it is still to train."""
    if launching_rank():
        claim_run_dir(run_dir, cfg, task_cfg, restart=cfg.restart, data=data)
    return finished_record(run_dir)


def train_run(cfg: TrainConfig, run_dir: Path, run_data: RunData | Exception, **kwargs) -> RunRecord:
    """Train `cfg` in `run_dir` on `run_data` (opened before the run: `run_data.open_or_error`) and write its
    record (keyword arguments: `_fit_run`'s). Ctrl-C and SIGTERM stop it at once with a record saying
    "interrupted" / "terminated" (signals.py)."""
    with training_signals():
        return _fit_run(cfg, run_dir, run_data, **kwargs)


def _fit_run(
    cfg: TrainConfig,
    run_dir: Path,
    run_data: RunData | Exception,
    *,
    start_ckpt: Path | None = None,
    fork_steps: list[int] = (),
    record_file: str = "run.json",
    validate: bool = True,
    extra_record: ForkKeys | None = None,
) -> RunRecord:
    """Train `cfg` in `run_dir` and write its record (run.json unless `record_file` says otherwise); return it.

    Resumes from run_dir/checkpoints/last.ckpt when present, else starts from `start_ckpt` when given (a
    forked branch: the parent's weights, optimizer and global step), else from scratch. `fork_steps`: keep
    a checkpoint after each of these optimizer steps (a stable parent). `validate=False` skips the final
    validation (the record's L stays None). Whatever fails (bad data, divergence, a full disk, Ctrl-C), the
    record says so with what was known at that point (recording.RecordedRun)."""
    run = RecordedRun(run_dir, record_file, first_record(cfg, run_dir, extra_record))
    # the W&B run closes after RecordedRun's exit has made the record final (a failure's status included)
    with _wandb_closed(run), run:
        _set_threads(cfg)
        L.seed_everything(cfg.seed, workers=True, verbose=False)
        built = build_training(cfg, run_dir, usable(run_data), list(fork_steps), run.record)
        run.trainer, run.module = built.trainer, built.module
        # last.ckpt, or the hpc checkpoint Lightning saved on SIGUSR1 (slurm/train.sbatch) when that is newer
        resume_from = newest_checkpoint(run_dir / CHECKPOINT, run_dir) or start_ckpt
        hits_before = len(recompile_limit_hits())
        # weights_only=True: a checkpoint is tensors and plain containers; unpickling code from a planted
        # file is refused whatever torch's own default (torch < 2.6 defaults to full unpickling)
        try:
            built.trainer.fit(
                built.module,
                datamodule=built.datamodule,
                ckpt_path=str(resume_from) if resume_from else None,
                weights_only=True,
            )
        except Exception as err:  # torch's refusal of a pickle advises weights_only=False: say ours instead
            refused = refused_checkpoint(err, resume_from)
            if refused is None:
                raise
            raise refused from None
        run.record.ranks = _rank_placement(built.trainer, built.module.resumed_from_step)
        val = None
        if validate:
            val = built.trainer.validate(built.module, datamodule=built.datamodule, verbose=False)[0]["val/loss"]
            if built.plan.run.r_evals:  # the finished model at other r, on the same set (train/testtime_eval.py)
                run.record.r_eval_scores = score_r_eval(built.trainer, built.module, built.datamodule, val)
        run.finish(built.module, built.plan.run.batch_tokens, val)
        record_recompile_limit_hits(built.cfg, run.record, since=hits_before)
    return run.record


def _set_threads(cfg: TrainConfig) -> None:
    if cfg.trainer.num_threads > 0:
        torch.set_num_threads(cfg.trainer.num_threads)
        # Lightning's DDP launcher resets torch's threads to (CPUs / processes per node) unless
        # OMP_NUM_THREADS is set, even for srun-started ranks: measured ~10x slower 2-node steps here.
        os.environ["OMP_NUM_THREADS"] = str(cfg.trainer.num_threads)


@dataclasses.dataclass
class Built:
    """What build_training makes for one run: the config with the data's vocabulary, its plan, the data, the
    LightningModule and the Trainer."""

    cfg: TrainConfig
    plan: TrainingPlan
    datamodule: Any
    module: Any
    trainer: Any


def build_training(
    cfg: TrainConfig, run_dir: Path, run_data: RunData, fork_steps: list[int], record: RunRecord
) -> Built:
    """Plan the run on its data, build the module and the Trainer; `record` learns each fact as it is known (the
    plan, the data, the batch split, the predicted memory, the optimizer), so a failure part-way is recorded with
    what was known. The plan is worked out once here and handed on: nothing below recomputes it from the config."""
    cfg = with_vocab(cfg, run_data.vocab_size)
    run_plan = plan_run(cfg)
    _print_plan(cfg, run_plan, run_dir)
    record_plan(record, cfg, run_plan)
    # planned on its data before anything is built (plan_training: lrs, split, memory, what it reads, the curve; a
    # batch that does not split or a packed set too small for D fails here), then its data module, then the record
    plan = plan_training(cfg, run_plan, run_data, fork_steps)
    split = plan.batching
    datamodule = make_datamodule(
        run_data, cfg.data, cfg.model.seq_len, split.device_batch, cfg.seed, cfg.trainer.val_subset
    )
    record.update(data=plan.data, device_batch=split.device_batch, grad_accum=split.grad_accum, world=split.world)
    record.memory_predicted = plan.memory_record(cfg.trainer.plan_device)
    module = LoopedLM(cfg.model, cfg.optim, cfg.trainer, plan, seed=cfg.seed)
    record.update(**module.optimizer_record)
    record.compile = module.compile_mode  # what trainer.compile (auto: resolved) trained with
    return Built(cfg, plan, datamodule, module, _trainer(cfg, run_dir, plan, fork_steps))


def _trainer(cfg: TrainConfig, run_dir: Path, plan: TrainingPlan, fork_steps: list[int]):
    """The Lightning Trainer of one run: steps, accumulation, precision, validation cadence, loggers, callbacks."""
    steps, grad_accum = plan.run.steps, plan.batching.grad_accum

    return L.Trainer(
        accelerator=cfg.trainer.accelerator,
        devices=cfg.trainer.devices,
        num_nodes=cfg.trainer.num_nodes,
        strategy=cfg.trainer.strategy,
        precision=cfg.trainer.precision,
        max_steps=steps,
        max_epochs=-1,
        accumulate_grad_batches=grad_accum,
        gradient_clip_val=cfg.optim.grad_clip or None,
        gradient_clip_algorithm="norm",
        # Lightning counts training batches, i.e. micro-batches: val_every_steps counts optimizer steps
        val_check_interval=(cfg.trainer.val_every_steps or steps + 1) * grad_accum,
        check_val_every_n_epoch=None,
        num_sanity_val_steps=0,
        log_every_n_steps=cfg.trainer.log_every_steps,
        logger=_loggers(cfg, run_dir),
        callbacks=_callbacks(cfg, run_dir, fork_steps),
        enable_checkpointing=False,
        enable_model_summary=False,
        enable_progress_bar=cfg.trainer.progress,
        default_root_dir=str(run_dir),
        plugins=_plugins(),
        # every rank validates the whole val set (TokenDataModule.val_dataloader says why)
        use_distributed_sampler=False,
    )
