"""Where loopscale keeps what it measures or builds once per machine: $LOOPSCALE_CACHE, else ~/.cache/loopscale
($XDG_CACHE_HOME respected). The CPU throughput probe (loopscale/launch/throughput.py) and the compiled-graph
cache (loopscale/train/compile_cache.py) live under it, so pool workers, SLURM jobs and later launches that
see the same folder share them."""

from __future__ import annotations

import os
from pathlib import Path

from loopscale.errors import InputError


def cache_dir() -> Path:
    """$LOOPSCALE_CACHE, else ~/.cache/loopscale (XDG_CACHE_HOME respected). A LOOPSCALE_CACHE that does not
    exist yet is created (with its parents, like the default); one that is not a directory this user can
    write (a file, /proc) is refused with InputError, rather than measured again on every plan while the
    output says "cached"."""
    if os.environ.get("LOOPSCALE_CACHE"):
        return _usable(Path(os.environ["LOOPSCALE_CACHE"]).expanduser())
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "loopscale"


def _usable(folder: Path) -> Path:
    if folder.exists() and not folder.is_dir():
        raise InputError(f"LOOPSCALE_CACHE={folder} is a file, not a folder for loopscale's caches")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:  # a file on the way, or a read-only or special file system
        raise InputError(f"LOOPSCALE_CACHE={folder}: cannot be loopscale's cache folder ({err.strerror})") from None
    probe = folder / f".writable.{os.getpid()}"
    try:
        probe.touch()
        probe.unlink()
    except OSError as err:
        why = err.strerror or type(err).__name__
        raise InputError(f"LOOPSCALE_CACHE={folder}: cannot write loopscale's caches there ({why})") from None
    return folder
