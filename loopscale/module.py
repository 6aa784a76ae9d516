"""The LightningModule around LoopedTransformer: loss, the optimizer (AdamW, or MuonH with AdamW groups), the lr
schedule, and the metrics a scaling-law run needs (nats per token, tokens and FLOPs spent, lr, grad norm,
throughput, MFU on GPU).

The model itself (loopscale/model.py) knows nothing about Lightning; this file knows nothing about Hydra.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass

import lightning as L
import torch

from loopscale.config import ModelConfig, OptimConfig, TrainerConfig
from loopscale.lr_transfer import MATRIX, adamw_lrs, lrs_for, recipe_param_groups
from loopscale.model import LoopedTransformer, param_groups
from loopscale.muonh import MuonH, resolve_ortho_dtype
from loopscale.schedule import lr_multiplier

log = logging.getLogger("loopscale.train")

# Dense bf16 peak FLOP/s per device, for model-FLOPs utilisation (published datasheet figures).
PEAK_FLOPS_BF16 = {"H100": 989e12, "H200": 989e12, "A100": 312e12, "L40S": 362e12, "A10": 125e12}


class Diverged(RuntimeError):
    """The training loss became non-finite; the run stops and is recorded as diverged."""

    def __init__(self, step: int, loss: float):
        super().__init__(f"non-finite training loss {loss} at step {step}")
        self.step = step


class InjectedFailure(RuntimeError):
    """Raised by trainer.fail_at_step: lets tests kill a run mid-way and resume it."""


@dataclass(frozen=True)
class StepAccounting:
    """What one optimizer step costs, from accounting (not measured): used for the logged counters."""

    total_steps: int
    batch_tokens: int  # global tokens per optimizer step
    flops_per_token: float  # F, eq. in DESIGN.md "FLOPs per token"


def device_type(accelerator: str) -> str:
    """'cuda' or 'cpu': where a trainer.accelerator setting puts the model (auto: CUDA when there is one)."""
    if accelerator in ("gpu", "cuda") or (accelerator == "auto" and torch.cuda.is_available()):
        return "cuda"
    return "cpu"


def optimizer_record(model_cfg: ModelConfig, optim: OptimConfig, trainer_cfg: TrainerConfig,
                     accounting: StepAccounting) -> dict:
    """What run.json records about the optimizer: its name, every group's peak lr and, for MuonH, the
    orthogonalisation dtype. The same values configure_optimizers uses."""
    if optim.optimizer == "adamw":
        return {"optimizer": "adamw", "lrs": adamw_lrs(model_cfg, optim)}
    if trainer_cfg.strategy == "fsdp":
        raise ValueError("optim.optimizer='muonh' needs whole matrices for its orthogonalisation, and "
                         "trainer.strategy='fsdp' shards them; use trainer.strategy='ddp' (or optim=adamw)")
    D_tokens = accounting.total_steps * accounting.batch_tokens
    return {"optimizer": "muonh", "lrs": lrs_for(model_cfg, accounting.batch_tokens, D_tokens, optim),
            "ortho_dtype": resolve_ortho_dtype(optim.ortho_dtype, device_type(trainer_cfg.accelerator))}


def peak_flops_per_device() -> float | None:
    if not torch.cuda.is_available():
        return None
    name = torch.cuda.get_device_name()
    for key, value in PEAK_FLOPS_BF16.items():
        if key in name:
            return value
    return None


class LoopedLM(L.LightningModule):
    def __init__(self, model_cfg: ModelConfig, optim: OptimConfig, trainer_cfg: TrainerConfig,
                 accounting: StepAccounting):
        super().__init__()
        self.model_cfg = model_cfg
        self.optim_cfg = optim
        self.trainer_cfg = trainer_cfg
        self.accounting = accounting
        self.optimizer_record = optimizer_record(model_cfg, optim, trainer_cfg, accounting)
        self.model = LoopedTransformer(model_cfg)
        if trainer_cfg.compile:
            self.model.compile_blocks()
        self._last_step_time: float | None = None
        self._tokens_per_s = float("nan")
        self._peak_flops = None
        self.tokens_trained = 0  # by this process's fit (a resumed run starts at 0)
        self.last_train_loss = float("nan")
        self.resumed_from_step = 0

    # -- training ---------------------------------------------------------------------------------------
    def training_step(self, batch, batch_idx):
        x, y = batch  # [B, T], [B, T]
        step = self.global_step
        if self.trainer_cfg.fail_at_step is not None and step == self.trainer_cfg.fail_at_step:
            raise InjectedFailure(f"trainer.fail_at_step={step}")
        loss = self.model(x, y)
        if self.trainer_cfg.nan_at_step is not None and step == self.trainer_cfg.nan_at_step:
            loss = loss * float("nan")
        finite = bool(torch.isfinite(loss.detach()))
        if self.trainer.world_size > 1:  # every rank must stop together, or the others hang in all-reduce
            finite = bool(self.trainer.strategy.reduce_boolean_decision(finite, all=True))
        if not finite:
            raise Diverged(step, float(loss.detach()))
        self.last_train_loss = float(loss.detach())
        tokens_seen = (step + 1) * self.accounting.batch_tokens
        self.log("train/loss", loss.detach(), prog_bar=True, on_step=True, on_epoch=False)
        self.log("train/tokens", float(tokens_seen), on_step=True, on_epoch=False)
        self.log("train/flops", tokens_seen * self.accounting.flops_per_token, on_step=True, on_epoch=False)
        self.log("train/lr", self.lr_schedulers().get_last_lr()[0], on_step=True, on_epoch=False)
        return loss

    def on_before_optimizer_step(self, optimizer):
        # Lightning calls this before clipping, so this is the raw global norm.
        grads = [p.grad for p in self.parameters() if p.grad is not None]
        if grads:
            norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
            self.log("train/grad_norm", norm, on_step=True, on_epoch=False)

    def on_train_batch_end(self, outputs, batch, batch_idx):
        now = time.perf_counter()
        self.tokens_trained += batch[0].numel() * self.trainer.world_size
        if self._last_step_time is not None:
            dt = now - self._last_step_time
            # batch_idx counts micro-batches; a step's tokens arrive over grad_accum of them
            micro_tokens = batch[0].numel() * self.trainer.world_size
            rate = micro_tokens / max(dt, 1e-9)
            self._tokens_per_s = rate if math.isnan(self._tokens_per_s) else 0.9 * self._tokens_per_s + 0.1 * rate
            self.log("perf/tokens_per_s", self._tokens_per_s, prog_bar=True, on_step=True, on_epoch=False)
            if self._peak_flops:
                mfu = self._tokens_per_s * self.accounting.flops_per_token / (self._peak_flops * self.trainer.world_size)
                self.log("perf/mfu", mfu, on_step=True, on_epoch=False)
        self._last_step_time = now

    def on_train_start(self):
        self._peak_flops = peak_flops_per_device()
        self._last_step_time = None
        self.resumed_from_step = self.global_step

    # -- validation -------------------------------------------------------------------------------------
    def validation_step(self, batch, batch_idx):
        x, y = batch
        loss = self.model(x, y)
        # weight each batch by its real targets (packed rows mask their padding with -100, the loss's
        # ignore_index), so the epoch value is the mean loss per target token over exactly the val rows
        self.log("val/loss", loss, prog_bar=True, on_step=False, on_epoch=True, sync_dist=True,
                 batch_size=int((y != -100).sum()))
        return loss

    # -- optimizer ----------------------------------------------------------------------------------------
    def configure_optimizers(self):
        opt = self.optim_cfg
        lrs = self.optimizer_record["lrs"]
        if opt.optimizer == "muonh":
            # one Optimizer for the whole model (MuonH on matrices, AdamW groups inside it), so Lightning's
            # automatic optimization, gradient accumulation, checkpoints and the LambdaLR below work as for AdamW
            groups = [{"name": name, "params": params, "lr": lrs[name], "adamw": name != MATRIX}
                      for name, params in recipe_param_groups(self.model).items()]
            optimizer = MuonH(groups, momentum=opt.momentum, ortho_dtype=self.optimizer_record["ortho_dtype"],
                              betas=(opt.beta1, opt.beta2), eps=opt.eps, weight_decay=0.0)
        else:
            groups = [{**group, "lr": lrs[group["name"]]} for group in param_groups(self.model, opt.weight_decay)]
            optimizer = torch.optim.AdamW(groups, lr=opt.lr, betas=(opt.beta1, opt.beta2), eps=opt.eps)
        log.info("optimizer %s: peak lrs %s", opt.optimizer,
                 ", ".join(f"{g['name']}={g['lr']:.4g}" for g in optimizer.param_groups))
        total = self.accounting.total_steps
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: lr_multiplier(step, total, opt))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}
