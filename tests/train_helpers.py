"""Shared test helpers: compose training configs exactly as `loopscale-train` does (Hydra compose API over
loopscale/conf/), the one tiny model config, and the one way to start a Python child (run_python; the
loopscale command lines through run_loopscale)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from loopscale.config.dirs import compose, train_config
from loopscale.config.model import ModelConfig
from loopscale.model.accounting import cpu_model

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
__all__ = [
    "LEARN",
    "TINY",
    "compose_cfg",
    "modules_loaded_by",
    "run_loopscale",
    "run_python",
    "tiny_model",
    "train_config",
]


def tiny_model(r: int, recipe: str = "auto", d_model: int = 64, **overrides) -> ModelConfig:
    """The CPU grid (L_eff = 12, p = c = 2) shrunk to d = 64 with a 200-token vocabulary and T = 32, for
    building models fast in-process. `overrides` are any other ModelConfig fields. (Training runs through
    Hydra use the override list TINY instead.)"""
    return cpu_model(d_model, r, recipe, **{"vocab_size": 200, "seq_len": 32, **overrides})


def run_python(
    args: list,
    cwd: Path | None = None,
    timeout_s: float = 600,
    env: dict | None = None,
    drop_env: tuple[str, ...] = (),
) -> subprocess.CompletedProcess:
    """`python ARGS` with the current interpreter in a child process (a script, `-c CODE` or `-m MODULE`), its
    output captured as text. `env` entries are added to this process's environment after the variables that
    start with a prefix in `drop_env` are removed; output is unbuffered so a timeout still shows what was
    printed. The one way the tests start a Python child."""
    kept = {k: v for k, v in os.environ.items() if not k.startswith(drop_env)} if drop_env else dict(os.environ)
    return subprocess.run(
        [sys.executable, *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env={**kept, "PYTHONUNBUFFERED": "1", **(env or {})},
    )


def run_loopscale(
    args: list,
    cwd: Path | None = None,
    timeout_s: float = 600,
    env: dict | None = None,
    module: str = "loopscale",
    drop_env: tuple[str, ...] = (),
) -> subprocess.CompletedProcess:
    """`python -m MODULE ARGS`, the way a user or a SLURM job runs it (module "loopscale" for the `loopscale`
    CLI, "loopscale.train.entry" for `loopscale-train`); `env` and `drop_env` as in run_python."""
    return run_python(["-m", module, *args], cwd=cwd, timeout_s=timeout_s, env=env, drop_env=drop_env)


def modules_loaded_by(code: str) -> set[str]:
    """Every module in `sys.modules` after a fresh interpreter runs `code`: what an import really pulls in,
    deferred imports that `code` triggers included, with nothing this test process already imported."""
    proc = run_python(["-c", f"import sys, json\n{code}\nprint(json.dumps(sorted(sys.modules)))"], timeout_s=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return set(json.loads(proc.stdout.splitlines()[-1]))
