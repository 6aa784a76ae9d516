"""Forward-only FLOPs per token (loopscale/model/accounting.py: `eval_flops_per_token`, `eval_flops_at`), what
validation, the loss curve, the launch estimate and the test-time table (`flops_per_token_eval`) count, against
FlopCounterMode on a real no-grad forward of every recipe, at the trained r and at r_eval below and past it (a
pass past r reuses the last pass's parameters: the same matmuls). The training FLOPs of each form are
tests/support/parity.py's; these are the evaluation's, which nothing else measured."""

from __future__ import annotations

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from loopscale.model.accounting import eval_flops_at, eval_flops_per_token
from loopscale.model.transformer import LoopedTransformer
from support.train import tiny_model

# hyper counts its lanes' K x K mix and alpha read-out (2 (K^2 + K) d a pass; the matrix-group convention of
# injections/form.py has no SCALAR parameter); linear's convention over-counts W_e e (documented there)
RECIPES = ["lora", "loop_index", "parcae", "whole_stack", "hyper"]  # baseline and tbptt: by hand below


def measured_forward_flops(model, cfg, r_eval: int) -> float:
    idx = torch.randint(0, cfg.vocab_size, (2, cfg.seq_len), generator=torch.Generator().manual_seed(0))
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(idx, idx, r=r_eval)
    return counter.get_total_flops() / (2 * cfg.seq_len)


@pytest.mark.parametrize("recipe", RECIPES)
def test_forward_flops_equal_the_counted_matmuls_at_r_and_past_it(recipe):
    cfg = tiny_model(4, recipe, d_model=32, head_dim=16, seq_len=16, vocab_size=60)
    model = LoopedTransformer(cfg).eval()
    assert eval_flops_per_token(cfg) == measured_forward_flops(model, cfg, 4)
    for r_eval in (2, 6):
        assert eval_flops_at(cfg, r_eval) == measured_forward_flops(model, cfg, r_eval), r_eval


def test_forward_flops_by_hand():
    """2 x (every layer pass's 12 d^2 + 2 T d multiply-adds + the head's V_pad d) + the concat injection's d x 2d
    matrix once a pass: no pass is truncated in a forward, whatever bptt_k says."""
    cfg = tiny_model(4, "tbptt")  # d 64, T 32, V_pad 256, p = c = 2, k = 2, bptt_k = 2
    d, T, V = 64, 32, 256
    assert (cfg.n_prelude, cfg.n_rec, cfg.n_coda, cfg.bptt_k, cfg.injection) == (2, 2, 2, 2, "concat")
    for r in (4, 7):
        layer_passes = 2 + 2 + 2 * r
        want = 2 * (layer_passes * (12 * d * d + 2 * T * d) + V * d) + 2 * r * (2 * d * d)
        assert eval_flops_at(cfg, r) == want, r


def test_dynamic_hyper_with_three_lanes_counts_its_w_dyn_and_lane_mix():
    """loopscale/injections/hyper.py off the probe's defaults (K = 3, dynamic): 2 r (K^2 d + K d + K d (K + 2))
    beyond the stack, every pass of a forward, as FlopCounterMode sees it."""
    options = {"hyper_dynamic": True, "hyper_lanes": 3}
    cfg = tiny_model(
        4, "hyper_dyn", injection="hyper", d_model=32, head_dim=16, seq_len=16, vocab_size=60, options=options
    )
    model = LoopedTransformer(cfg).eval()
    for r_eval in (2, 4, 6):
        assert eval_flops_at(cfg, r_eval) == measured_forward_flops(model, cfg, r_eval), r_eval
