"""MFU: the device peak by exact device name (no "H100" substring giving a PCIe card the SXM peak), and the
causal FLOPs that count half the T x T attention matmuls."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest

from loopscale.config.model import ModelConfig
from loopscale.model.accounting import causal_flops_per_token, flops_per_token
from loopscale.train.mfu import PEAK_BF16_FLOPS, mfu, peak_flops


def test_peaks_match_exact_device_names_only(caplog):
    assert peak_flops("NVIDIA H100 80GB HBM3") == PEAK_BF16_FLOPS["NVIDIA H100 80GB HBM3"]  # SXM
    assert peak_flops("NVIDIA H100 PCIe") < peak_flops("NVIDIA H100 80GB HBM3")
    assert peak_flops("NVIDIA H100 NVL") < peak_flops("NVIDIA H100 80GB HBM3")
    assert peak_flops("nvidia  h200") == peak_flops("NVIDIA H200")  # case and spacing do not matter
    assert peak_flops("NVIDIA H200 NVL") < peak_flops("NVIDIA H200")
    with caplog.at_level(logging.WARNING, logger="loopscale.train.mfu"):
        assert peak_flops("NVIDIA H100") is None  # a bare family name: which card? no guess
        assert peak_flops("NVIDIA H100") is None
        assert peak_flops("Some Future GPU 3000") is None
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 2 and "NVIDIA H100" in warnings[0] and "Some Future GPU 3000" in warnings[1]


@pytest.mark.parametrize(
    "kw", [dict(r=1), dict(r=4), dict(r=4, bptt_k=2), dict(r=4, injection="hyper"), dict(r=2, injection="additive")]
)
def test_causal_flops_count_half_of_the_attention_matmuls(kw):
    cfg = ModelConfig(vocab_size=512, d_model=128, head_dim=64, n_prelude=2, n_coda=2, depth=12, seq_len=256, **kw)
    # F is affine in T and only the attention matmuls depend on T: F(2T) - F(T) is their full share at T
    attention = flops_per_token(replace(cfg, seq_len=2 * cfg.seq_len)) - flops_per_token(cfg)
    assert causal_flops_per_token(cfg) == pytest.approx(flops_per_token(cfg) - attention / 2, rel=1e-12)


def test_published_s6_causal_ratio_and_mfu():
    # docs/design.md: at s = 6 (d = 384, T = 2048, L_eff = 20, 32k vocabulary) F overstates causal work by ~x1.25
    cfg = ModelConfig(vocab_size=32064, d_model=384, head_dim=128, n_prelude=0, n_coda=0, depth=20, seq_len=2048)
    assert 1.2 < flops_per_token(cfg) / causal_flops_per_token(cfg) < 1.3
    assert mfu(1e5, 1e9, 1e15, world=2) == pytest.approx(1e14 / 2e15)
