"""Lightning overhead: tokens/s of the real training step (LoopedLM inside a Lightning Trainer, configured the
way loopscale-train configures it) vs a bare PyTorch loop doing the same work on the same model and batches,
at r = 1, 2, 4, 8 on the iso-depth CPU grid (d = 128, L_eff = 12, T = 128, batch 16).

    .venv/bin/python benchmarks/bench_train.py [--steps 24] [--repeats 2]

Both sides: forward + cross-entropy, backward, grad-norm clipping at 1.0, AdamW (same param groups), the lr
schedule, one step per batch, batches from loopscale.data.windows.batch_at. Times exclude the first 4 steps (warm-up).
Target: Lightning within 5% of the bare loop.
"""

from __future__ import annotations

import argparse
import time

import lightning as L
import torch

from loopscale.config.model import ModelConfig
from loopscale.config.schema import BudgetConfig, DataConfig, OptimConfig, TrainConfig, TrainerConfig
from loopscale.data.shards import prepare
from loopscale.data.windows import TokenDataModule, batch_at
from loopscale.model.transformer import LoopedTransformer
from loopscale.train.lightning_module import LoopedLM
from loopscale.train.optim.groups import adamw_param_groups
from loopscale.train.optim.schedule import lr_multiplier
from loopscale.train.plan import plan_training

WARMUP_STEPS = 4
SEQ_LEN, BATCH = 128, 16


class StepTimes(L.Callback):
    def __init__(self):
        self.times = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.times.append(time.perf_counter())


def model_config(r: int, vocab: int) -> ModelConfig:
    return ModelConfig(
        vocab_size=vocab, d_model=128, head_dim=32, n_prelude=2, n_coda=2, depth=12, r=r, seq_len=SEQ_LEN
    )


def tokens_per_s(times: list[float]) -> float:
    timed = times[WARMUP_STEPS:]
    return (len(timed) - 1) * BATCH * SEQ_LEN / (timed[-1] - timed[0])


def bare_loop(cfg: ModelConfig, tokens, steps: int, optim: OptimConfig) -> float:
    torch.manual_seed(0)
    model = LoopedTransformer(cfg)
    opt = torch.optim.AdamW(
        adamw_param_groups(model, optim.weight_decay), lr=optim.lr, betas=(optim.beta1, optim.beta2)
    )
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_multiplier(s, steps, optim))
    times = []
    for step in range(steps):
        x, y = batch_at(tokens, step, 0, 0, BATCH, SEQ_LEN)
        loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), optim.grad_clip)
        opt.step()
        sched.step()
        times.append(time.perf_counter())
    return tokens_per_s(times)


def lightning_loop(cfg: ModelConfig, prepared, steps: int, optim: OptimConfig) -> float:
    torch.manual_seed(0)
    budget = BudgetConfig(mode="tokens", tokens=steps * BATCH * SEQ_LEN, batch_size=BATCH)
    train_cfg = TrainConfig(model=cfg, optim=optim, budget=budget, trainer=TrainerConfig(progress=False))
    module = LoopedLM(cfg, optim, train_cfg.trainer, plan_training(train_cfg))
    timer = StepTimes()
    trainer = L.Trainer(
        accelerator="cpu",
        devices=1,
        max_steps=steps,
        max_epochs=-1,
        precision="32-true",
        gradient_clip_val=optim.grad_clip,
        gradient_clip_algorithm="norm",
        val_check_interval=steps + 1,
        check_val_every_n_epoch=None,
        num_sanity_val_steps=0,
        logger=False,
        callbacks=[timer],
        enable_checkpointing=False,
        enable_model_summary=False,
        enable_progress_bar=False,
    )
    trainer.fit(module, datamodule=TokenDataModule(prepared, SEQ_LEN, BATCH, seed=0, val_tokens=SEQ_LEN + 1))
    return tokens_per_s(timer.times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=24)
    parser.add_argument("--repeats", type=int, default=2, help="alternating repeats; the best of each is kept")
    args = parser.parse_args()
    prepared = prepare(DataConfig(), progress=False)
    tokens = prepared.tokens("train")
    optim = OptimConfig()
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, batch {BATCH} x {SEQ_LEN}, "
        f"{args.steps} steps ({WARMUP_STEPS} warm-up) x {args.repeats} repeats"
    )
    print(f"{'r':>3} {'bare tok/s':>12} {'lightning tok/s':>16} {'lightning / bare':>17}")
    for r in (1, 2, 4, 8):
        cfg = model_config(r, prepared.vocab_size)
        bare, lit = [], []
        for _ in range(args.repeats):  # alternate so slow drifts of a shared machine hit both sides
            bare.append(bare_loop(cfg, tokens, args.steps, optim))
            lit.append(lightning_loop(cfg, prepared, args.steps, optim))
        print(f"{r:>3} {max(bare):>12,.0f} {max(lit):>16,.0f} {max(lit) / max(bare):>17.3f}")


if __name__ == "__main__":
    main()
