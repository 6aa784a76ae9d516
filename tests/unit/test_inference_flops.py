"""Serving one token (accounting.inference_flops_per_token, `loopscale advise`'s F_infer): a third of the training
F of the same model with full backprop, whatever the design's truncation or its label."""

from __future__ import annotations

import pytest

from loopscale.model.accounting import cpu_model, flops_per_token, inference_flops_per_token


@pytest.mark.parametrize("injection", ["linear", "additive"])
def test_serving_costs_a_third_of_full_backprop_training(injection):
    full = cpu_model(128, r=4, injection=injection)
    truncated = cpu_model(128, r=4, injection=injection, bptt_k=2)  # labelled tbptt, or additive-bptt2
    assert truncated.recipe == ("tbptt" if injection == "linear" else "additive-bptt2")
    assert flops_per_token(truncated) < flops_per_token(full)  # truncation saves backward work in training only
    assert inference_flops_per_token(truncated) == inference_flops_per_token(full) == flops_per_token(full) / 3
    assert truncated.bptt_k == 2  # the model asked about is not changed
