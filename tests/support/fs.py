"""Real small file systems for full-disk tests: a tmpfs of a few MB (needs root, as in CI containers here),
and a filler file that leaves a chosen number of bytes free. Without root the full-disk tests skip, unless
LOOPSCALE_REQUIRE_ROOT=1 (set by .ci/run, which runs as root): then they fail, so CI cannot go green
without them."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def small_tmpfs(path: Path, size: str = "4m") -> Iterator[Path]:
    """Mount a tmpfs of `size` at `path` for the block; skip the test when mounting is not allowed."""
    path.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        reason = f"cannot mount a tmpfs for a full-disk test (needs root): {proc.stderr.strip()}"
        if os.environ.get("LOOPSCALE_REQUIRE_ROOT") == "1":
            pytest.fail(f"LOOPSCALE_REQUIRE_ROOT=1 but {reason}")
        pytest.skip(reason)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def fill(path: Path, leave_bytes: int) -> Path:
    """Write a filler file on the file system of `path` so that about `leave_bytes` stay free."""
    st = os.statvfs(path)
    free = st.f_bavail * st.f_frsize
    filler = path / "filler"
    with open(filler, "wb") as f:
        f.write(b"\0" * max(0, free - leave_bytes))
    return filler


def leftovers(path: Path) -> list[str]:
    """Temporary files a writer left behind (atomic.py's .NAME.*.tmp*, checkpoint .tmp, shard staging)."""
    return sorted(str(p.relative_to(path)) for p in path.rglob("*") if ".tmp" in p.name)
