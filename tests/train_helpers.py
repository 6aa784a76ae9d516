"""Compose training configs exactly as `loopscale-train` does (Hydra compose API over loopscale/conf/)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from omegaconf import OmegaConf

from loopscale.config import TrainConfig
from loopscale.sweep import compose

REPO_ROOT = Path(__file__).resolve().parents[1]

# A tiny, fast CPU run on the default corpus: 30 steps of 16 x 64 tokens, checkpoints every 10 steps.
TINY = [
    "model=tiny",
    "budget.mode=tokens",
    "budget.tokens=30720",
    "budget.batch_size=16",
    "trainer.progress=false",
    "trainer.ckpt_every_steps=10",
    "optim.lr=3e-3",
    "data.val_tokens=8192",
]
# Long enough to learn more than unigram statistics (120 steps; measured val loss ~5.6 vs entropy ~6.0).
LEARN = [*TINY, "budget.tokens=122880", "trainer.ckpt_every_steps=50"]


compose_cfg = compose  # the package's own composition, exactly what loopscale sweep/plan/demo use


def train_config(overrides: list[str]) -> TrainConfig:
    return OmegaConf.to_object(compose_cfg(overrides))


def run_cli(args: list[str], cwd: Path, timeout_s: int = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    """`python -m loopscale.train ARGS` in a subprocess, the way a user or a SLURM job runs it."""
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "loopscale.train", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=full_env,
    )
