"""The LightningModule around LoopedTransformer: loss, the optimizer (AdamW, or MuonH with AdamW groups), the lr
schedule, and the metrics a scaling-law run needs (nats per token, tokens and FLOPs spent, lr, grad norm,
throughput, MFU on GPU).

The model itself (loopscale/model/transformer.py) knows nothing about Lightning; this file knows nothing about Hydra.
"""

from __future__ import annotations

import logging
import time

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback

from loopscale.config.model import ModelConfig
from loopscale.config.schema import OptimConfig, TrainerConfig
from loopscale.errors import ConfigError
from loopscale.model import r_sampling
from loopscale.model.transformer import LoopedTransformer
from loopscale.train.compile_cache import run_context
from loopscale.train.compiling import compile_model, eager_on_cpu, forward_recovering, resolve_compile
from loopscale.train.mfu import mfu, peak_flops
from loopscale.train.optim.groups import LOOP, MUON_GROUPS, adamw_param_groups, recipe_param_groups
from loopscale.train.optim.muonh import MuonH, arithmetic_for, resolve_ortho_dtype
from loopscale.train.optim.schedule import lr_multiplier
from loopscale.train.plan import TrainingPlan
from loopscale.train.run_json import CurvePoint, REvalScore
from loopscale.train.testtime_eval import score_rows

log = logging.getLogger("loopscale.train.entry")


class Diverged(RuntimeError):
    """The training loss became non-finite; the run stops and is recorded as diverged."""

    def __init__(self, step: int, loss: float):
        super().__init__(f"non-finite training loss {loss} at step {step}")
        self.step, self.loss = step, loss

    def __reduce__(self):  # pickled by worker pools: rebuilt from its own arguments, not from the message
        return type(self), (self.step, self.loss)


class InjectedFailure(RuntimeError):
    """Raised by trainer.fail_at_step: lets tests kill a run mid-way and resume it."""


def device_type(accelerator: str) -> str:
    """'cuda' or 'cpu': where a trainer.accelerator setting puts the model (auto: CUDA when there is one)."""
    if accelerator in ("gpu", "cuda") or (accelerator == "auto" and torch.cuda.is_available()):
        return "cuda"
    return "cpu"


def optimizer_record(optim: OptimConfig, trainer_cfg: TrainerConfig, lrs: dict[str, float]) -> dict:
    """What run.json records about the optimizer: its name, every group's peak lr (the plan's) and, for MuonH,
    the orthogonalisation dtype. The same values configure_optimizers uses."""
    if optim.optimizer == "adamw":
        return {"optimizer": "adamw", "lrs": lrs}
    if trainer_cfg.strategy == "fsdp":
        raise ConfigError(
            "optim.optimizer='muonh' needs whole matrices for its orthogonalisation, and "
            "trainer.strategy='fsdp' shards them; use trainer.strategy='ddp' (or optim=adamw)"
        )
    return {
        "optimizer": "muonh",
        "lrs": lrs,
        "ortho_dtype": resolve_ortho_dtype(optim.ortho_dtype, device_type(trainer_cfg.accelerator)),
    }


def peak_flops_per_device() -> float | None:
    """This process's CUDA device's dense bf16 peak (loopscale/train/mfu.py), None on CPU or an unknown device."""
    if not torch.cuda.is_available():
        return None
    return peak_flops(torch.cuda.get_device_name())


class SkipFinalStepValidation(Callback):
    """Lightning's in-fit validation at the last optimizer step is dropped: the runner's final validation of
    the whole set follows it. The training epoch loop's own skip flag (what Lightning sets after a resume
    mid-interval) is raised at the end of the last step's last micro-batch, before the loop checks it."""

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        epoch_loop = trainer.fit_loop.epoch_loop
        if trainer.global_step >= trainer.max_steps and hasattr(epoch_loop, "_skip_next_val"):
            epoch_loop._skip_next_val = True


class CurveEvaluations(Callback):
    """The loss curve (issue 55): after each optimizer step the module plans (`LoopedLM.curve_steps`,
    loopscale/data/heldout.py's curve_plan), one evaluation of the fixed validation subset appended to the
    module's `curve`. It must come before the checkpoint callbacks: a checkpoint of that step then holds the
    point (a resumed run or a forked branch carries its curve on)."""

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        step = trainer.global_step
        if step in pl_module.curve_steps and (not pl_module.curve or pl_module.curve[-1]["step"] < step):
            pl_module.record_curve_point(step)


def evaluate_curve_point(module: LoopedLM) -> tuple[float, list[REvalScore] | None]:
    """One evaluation of the loss curve, the one place a curve point is measured: the val loss at the trained r
    (`subset_loss`, nats per target token) and, where trainer.curve_r_eval asks for more passes (the module's
    curve_r_evals, train/plan.py), what the model scores at each (train/testtime_eval.py's rows; the trained r's
    val_loss among them), else None."""
    r = module.model_cfg.r
    losses = {n: subset_loss(module, n) for n in module.curve_r_evals}
    return losses[r], score_rows(losses, module.plan.run.eval_flops) if len(losses) > 1 else None


def subset_loss(module: LoopedLM, r_eval: int) -> float:
    """The model at r_eval passes on the validation subset (the val loader inside fit reads the first
    trainer.val_subset share, in order), in eval mode, without gradient, with the random state restored after
    (a form that draws, like Huginn's initial state, leaves training's draws as they were, and every r_eval
    starts from the same state): nats per target token."""
    trainer = module.trainer
    loader = trainer.datamodule.val_dataloader()
    was_training = module.model.training
    module.model.eval()
    total = torch.zeros((), dtype=torch.float64, device=module.device)
    count = torch.zeros((), dtype=torch.float64, device=module.device)
    devices = [module.device] if module.device.type == "cuda" else []
    passes = None if r_eval == module.model_cfg.r else r_eval  # the trained r: the forward it always ran
    try:
        with (
            torch.no_grad(),
            torch.random.fork_rng(devices=devices),
            eager_on_cpu(module.train_device_type),
            trainer.precision_plugin.val_step_context(),
        ):
            for x, y in loader:  # x, y: [B, T]
                x, y = x.to(module.device), y.to(module.device)
                targets = (y != -100).sum()  # packed rows mask their padding
                total += module.model(x, y, r=passes).double() * targets
                count += targets
    finally:
        module.model.train(was_training)
    if trainer.world_size > 1:  # windows: every rank the whole subset; packed: a share each (sums are right)
        total = trainer.strategy.reduce(total, reduce_op="sum")
        count = trainer.strategy.reduce(count, reduce_op="sum")
    return float(total / count)


class DivergenceCheck(Callback):
    """Raises Diverged at the end of an optimizer step whose loss check is due (LoopedLM.check_due). It must
    come first among the callbacks: a checkpoint callback of the same step then never saves diverged weights."""

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if pl_module.check_due():
            pl_module.raise_if_diverged()


class LoopedLM(L.LightningModule):
    """`plan`: the run's TrainingPlan (loopscale/train/plan.py): steps, tokens per step, F and the causal F for the
    logged counters and MFU, the peak lrs; nothing here recomputes them from the config."""

    def __init__(
        self, model_cfg: ModelConfig, optim: OptimConfig, trainer_cfg: TrainerConfig, plan: TrainingPlan, seed: int = 0
    ):
        super().__init__()
        self.seed = seed  # keys a sampled-r run's draws (model/r_sampling.py)
        self.model_cfg = model_cfg
        self.optim_cfg = optim
        self.trainer_cfg = trainer_cfg
        self.plan = plan
        self.optimizer_record = optimizer_record(optim, trainer_cfg, plan.lrs)
        self.model = LoopedTransformer(model_cfg)
        self.train_device_type = device_type(trainer_cfg.accelerator)
        # the run's side of the graphs' key: precision, device batch, optimizer (compile_cache.run_context)
        run = run_context(trainer_cfg.precision, plan.batching.device_batch, optim.optimizer)
        self.compile_mode = resolve_compile(
            trainer_cfg.compile,
            model_cfg,
            plan.run.steps,
            plan.run.batch_tokens,
            plan.run.F,
            trainer_cfg.compile_backend,
            self.train_device_type,
            run,
        )
        if r_sampling.is_sampled(model_cfg) and self.compile_mode == "model":
            # one graph family whatever r is drawn: each layer compiled, the loop over passes in Python (a whole
            # compiled model would trace one graph per pass count: docs/design.md, "Variable-depth training")
            log.info("model.r_sampling=%s: trainer.compile=model becomes blocks", model_cfg.r_sampling)
            self.compile_mode = "blocks"
        compile_model(self.model, self.compile_mode, backend=trainer_cfg.compile_backend, run=run)
        self.r_tally: dict[int, int] = {}  # sampled r: sequences trained at each pass count (checkpointed)
        self._peak_flops = None
        self.tokens_trained = 0  # by this process's fit (a resumed run starts at 0)
        self.resumed_from_step = 0
        # On-device state, read on the host only at log steps (a .item() per micro-batch stalls the GPU queue)
        self._last_loss: torch.Tensor | None = None
        self._first_nonfinite_step: torch.Tensor | None = None  # -1 while every loss was finite
        self._mark: tuple[float, int] | None = None  # (time, tokens_trained) at the last throughput log
        self._steps_seen = -1  # the global step whose end was last handled
        self.eval_r: int | None = None  # validation at this many passes (r_eval scoring, train/testtime_eval.py)
        # the loss curve (CurveEvaluations): the steps to evaluate after (the plan's), the points so far (restored
        # from a checkpoint: a forked branch starts with its parent's), the FLOPs of one point, the points this
        # process evaluated (their FLOPs are the record's C_curve), the passes each point scores
        self.curve_steps = plan.curve_steps
        self.curve: list[CurvePoint] = []
        self.curve_flops_per_point = plan.curve_flops_per_point
        self.curve_evaluated = 0
        self.curve_r_evals = plan.run.curve_r_evals

    @property
    def last_train_loss(self) -> float:
        return float("nan") if self._last_loss is None else float(self._last_loss)

    # -- training ---------------------------------------------------------------------------------------
    def _log_now(self) -> bool:
        """True on the micro-batches whose metrics Lightning will write (every log_every_steps optimizer steps):
        Python numbers logged on other micro-batches would each cost a host-to-device copy and a sync."""
        return self.trainer._logger_connector.should_update_logs

    def training_step(self, batch, batch_idx):
        x, y = batch  # [B, T], [B, T]
        step = self.global_step
        if self.trainer_cfg.fail_at_step is not None and step == self.trainer_cfg.fail_at_step:
            raise InjectedFailure(f"trainer.fail_at_step={step}")
        if r_sampling.is_sampled(self.model_cfg):
            loss = self._sampled_loss(x, y, batch_idx)
        else:  # a corrupt cached kernel: set aside, compiled afresh (compiling.forward_recovering)
            loss = forward_recovering(self.model, x, y)
        if self.trainer_cfg.nan_at_step is not None and step == self.trainer_cfg.nan_at_step:
            loss = loss * float("nan")
        detached = loss.detach()
        if self._first_nonfinite_step is None:
            self._first_nonfinite_step = torch.full((), -1, dtype=torch.long, device=detached.device)
        # remember the first step with a non-finite loss, on the device (no sync); checked at log steps
        bad = ~torch.isfinite(detached) & (self._first_nonfinite_step < 0)
        self._first_nonfinite_step = torch.where(bad, step, self._first_nonfinite_step)
        self._last_loss = detached
        if self._log_now():
            tokens_seen = (step + 1) * self.plan.run.batch_tokens
            self.log("train/loss", detached, prog_bar=True, on_step=True, on_epoch=False)
            self.log("train/tokens", float(tokens_seen), on_step=True, on_epoch=False)
            self.log("train/flops", tokens_seen * self.plan.run.F, on_step=True, on_epoch=False)
            self.log("train/lr", self.lr_schedulers().get_last_lr()[0], on_step=True, on_epoch=False)
        return loss

    def _sampled_loss(self, x, y, batch_idx: int):
        """The loss of a micro-batch trained at drawn pass counts (model/r_sampling.py): this step's draws keyed by
        (seed, step), this micro-batch's sequences by their index in the step (micro-batch, rank, position); the
        sequences of one pass count run together and the loss is the mean over every target token."""
        b = self.plan.batching
        draws = r_sampling.step_draws(self.model_cfg, self.seed, self.global_step, b.batch_size)
        first = ((batch_idx % b.grad_accum) * b.world + self.global_rank) * b.device_batch
        mine = draws[first : first + x.shape[0]]
        total, weight = 0.0, (y != -100).sum()
        for n in sorted(set(mine.tolist())):
            rows = torch.as_tensor((mine == n).nonzero()[0], device=x.device)
            xs, ys = x.index_select(0, rows), y.index_select(0, rows)
            k = r_sampling.grad_passes_at(self.model_cfg, n)
            total = total + forward_recovering(self.model, xs, ys, r=n, n_grad=k) * (ys != -100).sum()
            self.r_tally[n] = self.r_tally.get(n, 0) + len(rows)
        return total / weight

    def _tally_over_ranks(self) -> dict[int, int]:
        """The sequences trained at each pass count, every rank's summed (a collective: every rank calls it)."""
        tally = dict(self.r_tally)
        if self.trainer is not None and self.trainer.world_size > 1:
            counts = torch.zeros(self.plan.run.r_ledger["r_max"] + 1, device=self.device)  # the plan's r cap
            for n, c in tally.items():
                counts[n] = c
            counts = self.trainer.strategy.reduce(counts, reduce_op="sum")
            tally = {n: int(c) for n, c in enumerate(counts.tolist()) if c}
        return tally

    def r_tally_record(self) -> dict:
        """What a sampled-r run trained: sequences at each pass count (every rank's, summed), realised passes."""
        tally = self._tally_over_ranks()
        sequences = sum(tally.values())
        mean = sum(n * c for n, c in tally.items()) / sequences if sequences else None
        return {"histogram": {int(n): int(c) for n, c in sorted(tally.items())}, "passes_realised": mean}

    def on_save_checkpoint(self, checkpoint):
        # a resumed sampled-r run's ledger counts what it trained before: every rank's tally, summed (every rank saves
        # a checkpoint together, train/checkpoint.py; the file is rank 0's dict, so its own tally alone would drop the
        # other ranks' sequences and, loaded by each rank, count rank 0's world times)
        checkpoint["r_tally"] = self._tally_over_ranks() if r_sampling.is_sampled(self.model_cfg) else {}
        checkpoint["loopscale_curve"] = list(self.curve)  # its loss curve so far (a forked branch starts with it)

    def on_load_checkpoint(self, checkpoint):
        # the tally over every rank so far, held by rank 0 alone (r_tally_record sums the ranks)
        tally = {int(n): int(c) for n, c in checkpoint.get("r_tally", {}).items()}
        self.r_tally = tally if self.global_rank == 0 else {}
        self.curve = list(checkpoint.get("loopscale_curve", []))

    def check_due(self) -> bool:
        """Whether this micro-batch ends an optimizer step whose divergence check is due: every
        log_every_steps and ckpt_every_steps steps (before a checkpoint can save the weights) and the last."""
        step = self.global_step
        if step == self._steps_seen:  # inside an accumulation, or this step was handled
            return False
        every = (self.trainer_cfg.log_every_steps, self.trainer_cfg.ckpt_every_steps)
        return any(step % n == 0 for n in every) or step >= self.trainer.max_steps

    def raise_if_diverged(self) -> None:
        """One host sync: raise Diverged if any loss since the start was non-finite (on every rank together,
        or the others would hang in the next all-reduce)."""
        if self._first_nonfinite_step is None:
            return
        first = int(self._first_nonfinite_step)
        diverged = first >= 0
        if self.trainer.world_size > 1:
            diverged = bool(self.trainer.strategy.reduce_boolean_decision(diverged, all=False))
        if diverged:
            raise Diverged(first if first >= 0 else self.global_step, float("nan"))

    def on_before_optimizer_step(self, optimizer):
        # Lightning calls this before clipping, so this is the raw global norm; one fused norm per tensor list
        if not self._log_now():
            return
        grads = [p.grad for p in self.parameters() if p.grad is not None]
        if grads:
            norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
            self.log("train/grad_norm", norm, on_step=True, on_epoch=False)

    def on_train_batch_end(self, outputs, batch, batch_idx):
        self.tokens_trained += batch[0].numel() * self.trainer.world_size
        step = self.global_step
        if step == self._steps_seen:  # inside an accumulation: a step's tokens arrive over grad_accum micro-batches
            return
        self._steps_seen = step
        if not self._log_now():
            return
        # throughput over the steps since the last log, measured after a sync (one per log step) so the
        # interval is the device's work, not how far ahead the host queued it
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        now = time.perf_counter()
        if self._mark is not None:
            then, tokens_then = self._mark
            tokens_per_s = (self.tokens_trained - tokens_then) / max(now - then, 1e-9)
            self.log("perf/tokens_per_s", tokens_per_s, prog_bar=True, on_step=True, on_epoch=False)
            if self._peak_flops:
                world = self.trainer.world_size
                self.log(
                    "perf/mfu",
                    mfu(tokens_per_s, self.plan.run.F, self._peak_flops, world),
                    on_step=True,
                    on_epoch=False,
                )
                self.log(
                    "perf/mfu_causal",
                    mfu(tokens_per_s, self.plan.run.F_causal, self._peak_flops, world),
                    on_step=True,
                    on_epoch=False,
                )
        self._mark = (now, self.tokens_trained)

    def on_fit_start(self):
        self.model.store_published_dtypes()  # model.precision=published on CUDA: the embedding in bf16

    def on_train_start(self):
        self._peak_flops = peak_flops_per_device()
        self._mark = None
        self._steps_seen = self.global_step
        self.resumed_from_step = self.global_step

    # -- the loss curve ----------------------------------------------------------------------------------
    def record_curve_point(self, step: int) -> None:
        """Evaluate after optimizer step `step` and append its row: step, tokens, the lr of the update that
        step made (the first group's peak times lr_multiplier(step - 1), as the scheduler applied it), the last
        training loss and `evaluate_curve_point`'s metrics."""
        val_loss, scores = evaluate_curve_point(self)
        multiplier = lr_multiplier(step - 1, self.plan.run.steps, self.optim_cfg)
        peak = next(iter(self.optimizer_record["lrs"].values()))
        self.curve = [row for row in self.curve if row["step"] < step]
        tokens = step * self.plan.run.batch_tokens
        point = CurvePoint(
            step=step,
            tokens=tokens,
            lr=peak * multiplier,
            lr_multiplier=multiplier,
            train_loss=self.last_train_loss,
            val_loss=val_loss,
        )
        if scores is not None:
            point["r_eval_scores"] = scores
        self.curve.append(point)
        self.curve_evaluated += 1

    # -- validation -------------------------------------------------------------------------------------
    def validation_step(self, batch, batch_idx):
        x, y = batch
        with eager_on_cpu(self.train_device_type):  # a few batches: not worth graphs of their own (compiling.py)
            loss = forward_recovering(self.model, x, y, r=self.eval_r)
        # weight each batch by its real targets (packed rows mask their padding with -100, the loss's
        # ignore_index), so the epoch value is the mean loss per target token over exactly the val rows
        self.log(
            "val/loss" if self.eval_r is None else f"testtime/val_loss_r{self.eval_r}",
            loss,
            prog_bar=True,
            on_step=False,
            on_epoch=True,
            sync_dist=True,
            batch_size=int((y != -100).sum()),
        )
        # how many sequences this validation read on this rank: the subset inside fit, all at the end
        if self.eval_r is None:
            self.log("val/sequences", float(x.shape[0]), on_step=False, on_epoch=True, reduce_fx="sum")
        return loss

    def on_validation_epoch_end(self):
        """What the model's forms report at every evaluation (`evaluation_metrics` of an injection or block form's
        module: Parcae's largest decay factor, which must stay < 1), logged as design/<name>. The weights are the
        same on every rank, so each logs its own value."""
        for name, value in self.model.evaluation_metrics().items():
            self.log(f"design/{name}", value, on_step=False, on_epoch=True)

    # -- optimizer ----------------------------------------------------------------------------------------
    def configure_optimizers(self):
        opt = self.optim_cfg
        lrs = self.optimizer_record["lrs"]
        if opt.optimizer == "muonh":
            # one Optimizer for the whole model (MuonH on matrices, AdamW groups inside it), so Lightning's
            # automatic optimization, gradient accumulation, checkpoints and the LambdaLR below work as for AdamW
            groups = [
                {"name": name, "params": params, "lr": lrs[name], "adamw": name not in MUON_GROUPS}
                for name, params in recipe_param_groups(self.model, loop_group=LOOP in lrs).items()
            ]
            optimizer = MuonH(
                groups,
                momentum=opt.momentum,
                ortho_dtype=self.optimizer_record["ortho_dtype"],
                arithmetic=arithmetic_for(self.model_cfg.precision),
                betas=(opt.beta1, opt.beta2),
                eps=opt.eps,
                weight_decay=0.0,
            )
        else:
            groups = [{**group, "lr": lrs[group["name"]]} for group in adamw_param_groups(self.model, opt.weight_decay)]
            optimizer = torch.optim.AdamW(groups, lr=opt.lr, betas=(opt.beta1, opt.beta2), eps=opt.eps)
        log.info(
            "optimizer %s: peak lrs %s",
            opt.optimizer,
            ", ".join(f"{g['name']}={g['lr']:.4g}" for g in optimizer.param_groups),
        )
        total = self.plan.run.steps
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: lr_multiplier(step, total, opt))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}
