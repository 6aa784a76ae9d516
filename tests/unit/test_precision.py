"""Mixed precision keeps the residual stream in fp32 for every r: under bf16 autocast the matmuls run in bf16,
but what each layer receives (the stream, the injection's sum, the hyper lanes' read-out) stays fp32, as it
does at r = 1, so the recurrence count does not change the stream's precision (a confound in phi)."""

from __future__ import annotations

import pytest
import torch

from loopscale.blocks.prenorm import prenorm_module
from loopscale.config.model import ModelConfig
from loopscale.model.transformer import LoopedTransformer
from support.train import tiny_model

VOCAB, T = 128, 16


def _small(r: int, **kw) -> ModelConfig:
    """tiny_model with one prelude and one coda layer around a 6-layer effective depth."""
    return tiny_model(r, **{"vocab_size": VOCAB, "seq_len": T, "n_prelude": 1, "n_coda": 1, "depth": 6, **kw})


def block_input_dtypes(cfg: ModelConfig) -> dict[str, set[torch.dtype]]:
    """Run one forward + backward under CPU bf16 autocast; the dtypes each Block's input had, by block name."""
    torch.manual_seed(0)
    model = LoopedTransformer(cfg)
    seen: dict[str, set[torch.dtype]] = {}
    for name, module in model.named_modules():
        if isinstance(module, prenorm_module()):
            module.register_forward_pre_hook(
                lambda mod, args, name=name: seen.setdefault(name, set()).add(args[0].dtype)
            )
    idx = torch.randint(0, VOCAB, (2, T))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = model(idx, idx)
    loss.backward()
    return seen


@pytest.mark.parametrize(
    "kw",
    [
        dict(r=1),
        dict(r=4),
        dict(r=4, bptt_k=2),
        dict(r=4, injection="hyper"),
        dict(r=4, injection="hyper", options={"hyper_dynamic": True}),
        dict(r=4, injection="additive"),
    ],
    ids=["r1", "linear-r4", "linear-r4-tbptt", "hyper-r4", "hyper-dynamic-r4", "additive-r4"],
)
def test_block_inputs_stay_fp32_under_bf16_autocast(kw):
    cfg = _small(**kw)
    seen = block_input_dtypes(cfg)
    assert {"prelude.0", "recurrent.0", "coda.0"} <= seen.keys()
    assert all(dtypes == {torch.float32} for dtypes in seen.values()), seen


def test_matmuls_run_in_bf16_under_autocast():
    """The other half of the contract: autocast is in effect inside the blocks (so the fp32 stream is not
    bought by running everything in fp32)."""
    cfg = _small(r=4)
    model = LoopedTransformer(cfg)
    out_dtypes = []
    model.recurrent[0].attn.q.register_forward_hook(lambda mod, args, out: out_dtypes.append(out.dtype))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        model(torch.randint(0, VOCAB, (2, T)))
    assert out_dtypes and set(out_dtypes) == {torch.bfloat16}


def test_logits_and_loss_are_fp32_over_the_true_vocabulary_under_autocast():
    """As published: the head's matmul runs in bf16, then the logits are cut to the true vocabulary and
    soft-capped in fp32 (bf16 tanh near the cap loses the ordering of large logits)."""
    cfg = _small(r=2, vocab_size=100, logit_softcap=15.0)  # padded to 128
    model = LoopedTransformer(cfg)
    idx = torch.randint(0, 100, (2, T))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(idx)
        loss = model(idx, idx)
    assert logits.dtype == torch.float32 and logits.shape[-1] == 100
    assert loss.dtype == torch.float32


@pytest.mark.parametrize("injection", ["concat", "hyper"])
def test_published_precision_keeps_the_published_dtypes(injection):
    """model.precision=published: the recurrent block's input (the injection's output, or the hyper read-out)
    comes in autocast's bf16, the prelude still gets the fp32 embedding stream, and the RoPE tables are bf16."""
    cfg = _small(r=4, injection=injection, precision="published")
    seen = block_input_dtypes(cfg)
    assert seen["prelude.0"] == {torch.float32}
    assert seen["recurrent.0"] == {torch.bfloat16}
    assert LoopedTransformer(cfg).rope_cos.dtype == torch.bfloat16
    default = block_input_dtypes(_small(r=4, injection=injection))
    assert default["recurrent.0"] == {torch.float32}
