"""Where loopscale keeps what it measures or builds once per machine: $LOOPSCALE_CACHE, else ~/.cache/loopscale
($XDG_CACHE_HOME respected). The CPU throughput probe (loopscale/launch/throughput.py) and the compiled-graph
cache (loopscale/train/compile_cache.py) live under it, so pool workers, SLURM jobs and later launches that
see the same folder share them."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """$LOOPSCALE_CACHE, else ~/.cache/loopscale (XDG_CACHE_HOME respected)."""
    if os.environ.get("LOOPSCALE_CACHE"):
        return Path(os.environ["LOOPSCALE_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "loopscale"
