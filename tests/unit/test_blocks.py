"""loopscale/blocks/: every registered block form against its own layers inside a real model (parameters by
accounting class, FLOPs against FlopCounterMode, the memory model, the MuonH state, gradients, pickling), truncated
and with the other layout options; the registry is the folder."""

from __future__ import annotations

from pathlib import Path

import pytest

import loopscale
from loopscale.blocks import registry
from loopscale.errors import ConfigError
from loopscale.model.accounting import flops_per_token, param_counts
from support.parity import assert_parity
from support.train import tiny_model

CASES = [
    cfg
    for name in registry.names()
    for cfg in (
        tiny_model(4, injection="linear", block=name, bptt_k=2),  # 2 passes under no_grad, 2 with gradient
        tiny_model(2, injection="concat", block=name, tie_embeddings=True, mlp="swiglu"),
    )
]


@pytest.mark.parametrize("cfg", CASES, ids=[f"{c.block}-r{c.r}-k{c.bptt_k}-{c.mlp}" for c in CASES])
def test_every_registered_block_form_equals_its_layers(cfg):
    assert_parity(cfg)


def test_the_registry_is_the_blocks_folder():
    files = {p.stem for p in (Path(loopscale.__file__).parent / "blocks").glob("*.py")}
    assert set(registry.names()) == files - {"__init__", "form", "registry"} >= {"prenorm", "sandwich", "lora"}
    with pytest.raises(ConfigError, match="block='post' is not allowed; choose one of 'lora', 'prenorm'"):
        tiny_model(2, block="post")


def test_what_each_form_adds_to_the_accounting():
    """Closed forms: the sandwich's two more gains a layer (in N and in F's gain uses), the adapters' N_pass and
    matmuls, the scaled residual's nothing."""
    base = tiny_model(4)
    d, k, layers, r = base.d_model, base.n_rec, base.n_prelude + base.n_rec + base.n_coda, 4
    sandwich = tiny_model(4, block="sandwich")
    assert param_counts(sandwich).N - param_counts(base).N == 2 * d * layers
    assert flops_per_token(sandwich) - flops_per_token(base) == 6 * 2 * d * (base.n_prelude + base.n_coda + k * r)
    lora = tiny_model(4, block="lora", options={"lora_rank": 3})
    per_pass_macs = 3 * (4 * 2 * d + (d + 4 * d) * 2)  # rank (in + out): q, k, v, out; MLP-in and -out
    assert param_counts(lora).N_pass == k * r * per_pass_macs and param_counts(lora).N_rec == param_counts(base).N_rec
    assert flops_per_token(lora) - flops_per_token(base) == 6 * k * r * per_pass_macs
    scaled = tiny_model(4, block="scaled_residual", options={"residual_lambda": 2.0})
    assert param_counts(scaled) == param_counts(base) and flops_per_token(scaled) == flops_per_token(base)
    assert registry.form("scaled_residual").residual_scale(scaled, "recurrent") == 2.0 / (4 * k**0.5)
    with pytest.raises(ConfigError, match="options.lora_rank=0 must be >= 1"):
        tiny_model(4, block="lora", options={"lora_rank": 0})
    with pytest.raises(ConfigError, match="model.options has 'rank', which injection='concat' and block='lora'"):
        tiny_model(4, block="lora", options={"rank": 2})
