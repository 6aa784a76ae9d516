"""Cache folders published whole: built in a private staging folder, then renamed into place.

The token shards (shards.py) and the packed sets (packed.py) are written into `<data_dir>/.tmp-<key>-<host>-<pid>`
and renamed to `<data_dir>/<key>` only once complete, with meta.json written last. A rename is atomic, so a
killed build never leaves a folder that looks finished; a failed one removes its staging folder, and the
leftovers of dead processes on this host are swept the next time the same key is built.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path


def staging_prefix(key: str) -> str:
    return f".tmp-{key}-{socket.gethostname()}-"


def sweep_dead_staging(data_dir: Path, key: str) -> None:
    """Remove staging folders of this key left by processes on this host that no longer exist."""
    prefix = staging_prefix(key)
    for d in data_dir.glob(prefix + "*"):
        pid = d.name[len(prefix) :]
        if pid.isdigit() and not pid_alive(int(pid)):
            shutil.rmtree(d, ignore_errors=True)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def staging_folder(data_dir: Path, key: str) -> Iterator[Path]:
    """A fresh, empty staging folder for `key` in `data_dir` (an existing `data_dir`), removed again if the
    body raises anything, Ctrl-C included."""
    sweep_dead_staging(data_dir, key)
    staging = data_dir / f"{staging_prefix(key)}{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def publish(staging: Path, root: Path, meta: dict, meta_file: str = "meta.json") -> None:
    """Write `meta` into the staging folder last, then rename the folder to `root`. Another process may have
    published the same key first: its folder is as good as ours, which is dropped."""
    (staging / meta_file).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    try:
        os.rename(staging, root)  # atomic publish
    except OSError:
        if not (root / meta_file).is_file():  # not "another process published it first"
            raise
        shutil.rmtree(staging, ignore_errors=True)
