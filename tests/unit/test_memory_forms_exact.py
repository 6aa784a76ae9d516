"""The memory model's activations (loopscale/model/memory.py) for every loop design, exact: what autograd keeps
(bf16 autocast, eager, saved-tensor hooks) at device batches 2 and 4, split into bytes per token and bytes per
forward, against `activation_bytes`. tests/support/parity.py lets a form over-count its own bytes per token by 30%;
measured here, every form's spec (`saved_bytes_per_token`, `weight_copy_bytes` of loopscale/injections/concat.py,
linear.py, huginn.py, hyper.py, parcae.py, loop_index.py and loopscale/blocks/lora.py, sandwich.py,
scaled_residual.py) is exact per token, and the per-forward bytes are exact to 8 (a scalar the model does not count)."""

from __future__ import annotations

import pytest
import torch

from loopscale.model.memory import activation_bytes
from loopscale.model.transformer import LoopedTransformer
from support.saved import kept_for_backward
from support.train import tiny_model

CASES = {  # name: (recipe, extra fields)
    "concat": ("baseline", {}),
    "linear": ("baseline", {"injection": "linear"}),
    "concat-truncated": ("tbptt", {}),
    "lora": ("lora", {}),
    "lora-truncated": ("lora_bptt2", {"block": "lora", "injection": "concat", "bptt_k": 2}),  # a design of one's own
    "loop_index": ("loop_index", {}),
    "huginn-sandwich": ("huginn", {}),
    "parcae": ("parcae", {}),
    "scaled_residual": ("stable_residual", {}),
    "hyper": ("hyper", {}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_every_forms_activations_are_what_autograd_keeps(case):
    recipe, fields = CASES[case]
    cfg = tiny_model(4, recipe, d_model=32, head_dim=16, seq_len=16, vocab_size=60, **fields)
    model = LoopedTransformer(cfg)
    T = cfg.seq_len
    measured, predicted = {}, {}
    for batch in (2, 4):
        torch.manual_seed(0)  # a form that draws in its forward (a random initial state) draws alike
        ids = torch.randint(0, cfg.vocab_size, (batch, T), generator=torch.Generator().manual_seed(batch))
        measured[batch] = kept_for_backward(model, ids)
        predicted[batch] = activation_bytes(cfg, batch, False)
    per_token = {k: (v[4] - v[2]) / (2 * T) for k, v in (("measured", measured), ("predicted", predicted))}
    assert per_token["predicted"] == per_token["measured"], per_token
    per_forward = {k: v[2] - 2 * T * per_token[k] for k, v in (("measured", measured), ("predicted", predicted))}
    assert -8 <= per_forward["predicted"] - per_forward["measured"] <= 0, per_forward
