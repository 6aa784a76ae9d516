"""What one training run promises step by step, read off a real fit (build_training + Lightning's Trainer) on packed
rows with padding: the gradient is clipped to its global norm (optim.grad_clip, the whole vector rescaled by
c / ||g||, not each element clamped); a loss-curve point records the lr of the update its step made (the lr the
optimizer used, peak x lr_multiplier(step - 1)); and its val loss is nats per target token over the validation
subset (the batches weighted by their real targets, packed rows' padding not counted)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from lightning.pytorch.callbacks import Callback

from loopscale.data.run_data import open_run_data
from loopscale.train.run_json import RunRecord
from loopscale.train.runner import build_training
from support.corpus import packed_text, word_corpus
from support.train import TINY, train_config

CLIP = 1e-3  # far below a tiny model's raw gradient norm: every step is clipped
STEPS = 8  # budget.tokens / (4 rows x 64 tokens)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A small local text corpus whose documents pack into rows with padding of many lengths (best fit)."""
    words = "when shall we three meet again in thunder lightning or in rain"
    return word_corpus(tmp_path_factory.mktemp("step_corpus"), words, seed=1, lengths=(3, 70))


class Observed(Callback):
    """The optimizer's updates as it made them (after Lightning's clipping, in a step post-hook: the lr each update
    used, each parameter's gradient), the raw gradients before clipping (on_before_optimizer_step), and at the last
    curve point the subset's loss per target token computed here from the logits."""

    def __init__(self):
        self.raw, self.clipped, self.lr_used = [], [], []
        self.hand_loss, self.batch_targets = None, []

    def on_train_start(self, trainer, pl_module):
        trainer.optimizers[0].register_step_post_hook(self._after_update)

    def on_before_optimizer_step(self, trainer, pl_module, optimizer):
        self.raw.append({id(p): p.grad.detach().clone() for p in pl_module.parameters() if p.grad is not None})

    def _after_update(self, optimizer, args, kwargs):
        self.lr_used.append(optimizer.param_groups[0]["lr"])
        self.clipped.append({id(p): p.grad.detach().clone() for g in optimizer.param_groups for p in g["params"]})

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.global_step != max(pl_module.curve_steps) or self.hand_loss is not None:
            return
        model = pl_module.model
        was_training = model.training
        model.eval()
        total, count = 0.0, 0
        with torch.no_grad():
            for x, y in trainer.datamodule.val_dataloader():  # inside fit: the subset the curve point read
                logits = model(x)  # [B, T, V]
                total += float(F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=-100, reduction="sum"))
                targets = int((y != -100).sum())
                count += targets
                self.batch_targets.append((targets, y.numel()))
        model.train(was_training)
        self.hand_loss = total / count


@pytest.fixture(scope="module")
def run(tmp_path_factory, corpus):
    tmp = tmp_path_factory.mktemp("steps")
    cfg = train_config(
        [
            *TINY,
            *packed_text(corpus, tmp / "runs"),
            "trainer.num_threads=1",
            "budget.batch_size=4",
            f"budget.tokens={STEPS * 4 * 64}",
            "optim=adamw",
            "optim.schedule=linear",
            "optim.warmup_frac=0",
            "optim.final_lr_frac=0.1",
            f"optim.grad_clip={CLIP}",
            "trainer.val_subset=1.0",
            "trainer.curve_points=4",
            "trainer.curve_share=0.9",
        ]
    )
    built = build_training(cfg, tmp / "run", open_run_data(cfg.data, cfg.model.seq_len), [], RunRecord())
    observed = Observed()
    built.trainer.callbacks.append(observed)  # after CurveEvaluations: the last point is recorded when it runs
    built.trainer.fit(built.module, datamodule=built.datamodule)
    return built, observed


def test_every_update_uses_the_gradient_rescaled_to_the_clip_norm(run):
    """g' = g x c / ||g||_2 over every parameter at once (Lightning's norm clipping, +1e-6 in its denominator): the
    direction kept, the global norm c."""
    built, observed = run
    assert built.plan.run.steps == STEPS and len(observed.raw) == len(observed.clipped) == STEPS
    for raw, clipped in zip(observed.raw, observed.clipped):
        assert raw.keys() == clipped.keys()  # every parameter's gradient, by the parameter
        norm = float(torch.linalg.vector_norm(torch.stack([g.norm() for g in raw.values()])))
        assert norm > 100 * CLIP  # clipped indeed
        scale = CLIP / (norm + 1e-6)
        for key, g in raw.items():
            torch.testing.assert_close(clipped[key], g * scale, rtol=1e-5, atol=1e-12)
        clipped_norm = float(torch.linalg.vector_norm(torch.stack([g.norm() for g in clipped.values()])))
        assert clipped_norm == pytest.approx(CLIP, rel=1e-4)


def test_a_curve_point_records_the_lr_of_the_update_its_step_made(run):
    """After step s (s updates made), the point's lr is the lr update s used: peak x (1 - 0.9 (s - 1) / steps) on
    the linear schedule without warmup, final 0.1 (docs/design.md, the multiplier 1 - 0.9 i / n at update i)."""
    built, observed = run
    curve = built.module.curve
    peak = next(iter(built.module.optimizer_record["lrs"].values()))
    assert len(curve) >= 3 and len(observed.lr_used) == STEPS
    for point in curve:
        s = point["step"]
        multiplier = 1 - 0.9 * (s - 1) / STEPS
        assert point["lr_multiplier"] == pytest.approx(multiplier, rel=1e-12)
        assert point["lr"] == pytest.approx(peak * multiplier, rel=1e-12)
        assert point["lr"] == pytest.approx(observed.lr_used[s - 1], rel=1e-12)


def test_a_curve_points_val_loss_is_per_target_token_over_the_subset(run):
    """The last point (after the last update: the final weights) against sum of token cross-entropies / real
    targets over the subset's batches, computed from the logits; the batches' padding differs, so a mean of batch
    means or a mean over every position would not match."""
    built, observed = run
    last = built.module.curve[-1]
    assert last["step"] == STEPS and observed.hand_loss is not None
    assert len({t / n for t, n in observed.batch_targets}) > 1  # the batches hold different shares of padding
    assert last["val_loss"] == pytest.approx(observed.hand_loss, rel=2e-6)
