"""Training configs for tests: composed exactly as `loopscale-train` composes them (Hydra's compose API over
loopscale/conf/), the override lists of a tiny CPU run, and the one tiny model config for in-process models.
Child processes are support.procs'."""

from __future__ import annotations

from loopscale.config.dirs import compose, train_config
from loopscale.config.model import ModelConfig
from loopscale.model.accounting import cpu_model

# A tiny, fast CPU run on the default corpus: 30 steps of 16 x 64 tokens, checkpoints every 10 steps. Eager:
# trainer=cpu's compile=auto compiles a tiny job of ~2000 steps (the ones the stop tests start only to stop
# them), ~30 s before its first step, for nothing those tests check; compiling is test_compile.py's, where a
# test that wants it says trainer.compile=... after these (the last value of a key wins).
TINY = [
    "model=tiny",
    "budget.mode=tokens",
    "budget.tokens=30720",
    "budget.batch_size=16",
    "trainer.progress=false",
    "trainer.ckpt_every_steps=10",
    "optim.lr=3e-3",
    "data.val_tokens=8192",
    "trainer.compile=false",
]
# Long enough to learn more than unigram statistics (120 steps; measured val loss ~5.6 vs entropy ~6.0).
LEARN = [*TINY, "budget.tokens=122880", "trainer.ckpt_every_steps=50"]


compose_cfg = compose  # the package's own composition, exactly what loopscale sweep/plan/demo use
__all__ = ["LEARN", "TINY", "compose_cfg", "small_loop_model", "tiny_model", "train_config"]


def tiny_model(r: int, recipe: str = "auto", d_model: int = 64, **overrides) -> ModelConfig:
    """The CPU grid (L_eff = 12, p = c = 2) shrunk to d = 64 with a 200-token vocabulary and T = 32, for
    building models fast in-process. `overrides` are any other ModelConfig fields. (Training runs through
    Hydra use the override list TINY instead.)"""
    return cpu_model(d_model, r, recipe, **{"vocab_size": 200, "seq_len": 32, **overrides})


def small_loop_model(r: int, **overrides) -> ModelConfig:
    """tiny_model at half width, vocabulary and context, with p = c = 1 and k = 2 (fewer parameters to sort into
    optimizer groups)."""
    return tiny_model(
        r, d_model=32, head_dim=16, vocab_size=64, seq_len=16, n_prelude=1, n_rec=2, n_coda=1, depth=None, **overrides
    )
