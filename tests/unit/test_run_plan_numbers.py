"""A run's plan by hand (loopscale/train/plan.py: `plan_run`, `r_eval_scoring_flops`; issue 58): each budget's steps
rounded to the NEAREST whole batch (not down), the ratio budget on N = N_once + N_pass + N_rec (a per-pass design's
N_pass included), the lr transfer's D_target = C / F cut to whole tokens but not to batches, C_budget only in flops
mode, and the FLOPs of scoring at trainer.r_eval's other pass counts; and the compile rule's numbers
(loopscale/train/compile_choice.py): saving, the width-dependent eager rate, each choice's compile cost."""

from __future__ import annotations

import pytest

from loopscale.model.accounting import flops_per_token
from loopscale.model.transformer import LoopedTransformer
from loopscale.train import compile_choice as cc
from loopscale.train.plan import plan_run, r_eval_scoring_flops
from support.train import TINY, train_config

BATCH_TOKENS = 16 * 64  # TINY: 16 sequences of 64 tokens


@pytest.mark.parametrize("extra, want", [(600, 11), (400, 10)])
def test_a_token_budget_rounds_to_the_nearest_whole_batch(extra, want):
    plan = plan_run(train_config([*TINY, "model.r=2", f"budget.tokens={10 * BATCH_TOKENS + extra}"]))
    assert (plan.steps, plan.D, plan.D_target, plan.C_budget) == (want, want * BATCH_TOKENS, want * BATCH_TOKENS, None)
    assert plan.C == plan.F * plan.D


def test_a_ratio_budget_counts_every_parameter_of_n_the_per_pass_ones_too():
    cfg = train_config(
        [*TINY, "model.r=2", "model.recipe=loop_index", "budget.mode=ratio", "budget.tokens_per_param=20"]
    )
    model = LoopedTransformer(cfg.model)
    N = sum(p.numel() for n, p in model.named_parameters() if not n.startswith(("embed.", "lm_head.")))
    plan = plan_run(cfg)
    assert plan.N_pass > 0 and plan.N == N
    assert plan.steps == round(20 * N / BATCH_TOKENS) and plan.D == plan.steps * BATCH_TOKENS


@pytest.mark.parametrize(
    "tokens, steps", [(10 * BATCH_TOKENS + 0.7, 10), (7.6 * BATCH_TOKENS, 8), (0.3 * BATCH_TOKENS, 1)]
)
def test_a_flops_budget_takes_the_nearest_step_count_and_the_transfer_the_whole_tokens(tokens, steps):
    base = train_config([*TINY, "model.r=2"])
    F = flops_per_token(base.model)
    C = F * tokens
    plan = plan_run(train_config([*TINY, "model.r=2", "budget.mode=flops", f"budget.compute_flops={C!r}"]))
    assert plan.F == F and plan.steps == steps and plan.D == steps * BATCH_TOKENS
    assert plan.D_target == int(tokens) and plan.C_budget == C and plan.C == F * plan.D


def test_scoring_at_r_eval_costs_each_other_pass_counts_forward():
    """2 x (layer passes x (12 d^2 + 2 T d) + V_pad d) + the concat injection's 2 r (2 d^2) a token at r_eval 1 and 8
    (the trained r = 4 is the run's own validation), over val_sequences x T tokens."""
    cfg = train_config([*TINY, "model.r=4", "trainer.r_eval=[8,1,4]"])
    d, T, V = cfg.model.d_model, cfg.model.seq_len, cfg.model.padded_vocab_size
    p, k, c = cfg.model.n_prelude, cfg.model.n_rec, cfg.model.n_coda
    assert cfg.model.injection == "concat"

    def forward(r):
        return 2 * ((p + c + k * r) * (12 * d * d + 2 * T * d) + V * d) + 2 * r * 2 * d * d

    assert r_eval_scoring_flops(cfg, 5) == 5 * T * (forward(1) + forward(8))
    assert r_eval_scoring_flops(train_config([*TINY, "model.r=4", "trainer.r_eval=off"]), 5) == 0


def test_the_compile_rules_numbers():
    assert cc.saving_s(100, 0.7) == pytest.approx(100 * 0.7 * (1 - 1 / 1.4))
    assert cc.eager_cpu_flops(16) == 4.5e8 * 16 and cc.eager_cpu_flops(200) == 4.6e10  # the GEMMs' rate caps it
    assert cc.eager_step_s_from_flops(1024, 1e6, 32) == pytest.approx(1024 * 1e6 / (4.5e8 * 32))
    warm_no = cc.choose_compile(14.0, warm=True)
    assert (warm_no.compile, warm_no.compile_s, warm_no.saving_s, warm_no.label) == (False, 0.0, 14.0, "eager")
    cold = cc.choose_compile(121.0, warm=False)
    assert (cold.compile, cold.compile_s, cold.label) == ("model", 120.0, "compiles")
    # a job whose graphs are cached already decides as cached, whatever its key's later jobs
    choices = cc.choose_for_sweep(["a", "a"], [20.0, 20.0], [True, False])
    assert [(c.label, c.compile_s) for c in choices] == [("cached", 15.0), ("eager", 0.0)]
