"""Cache folders published whole: built in a private staging folder, then renamed into place.

The token shards (shards.py) and the packed sets (packed.py) are written into `<data_dir>/.tmp-<key>-<host>-<pid>`
and renamed to `<data_dir>/<key>` only once complete, with meta.json written last. A rename is atomic, so a
killed build never leaves a folder that looks finished; a failed one removes its staging folder, and the
leftovers of dead processes on this host are swept the next time the same key is built.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

from loopscale.atomic import json_text, write_text_atomic
from loopscale.data.corpus import DataError


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
    (staging / meta_file).write_text(json_text(meta, sort_keys=True) + "\n")
    try:
        os.rename(staging, root)  # atomic publish
    except OSError:
        if not (root / meta_file).is_file():  # not "another process published it first"
            raise
        shutil.rmtree(staging, ignore_errors=True)


CONTENT_KEY = "content_sha256"  # in meta.json: the hash of the folder's data files (a run's data identity)


def content_sha256(files: list[Path]) -> str:
    """sha256 over the files' names and bytes, in the given order: what identifies a cache folder's data
    (read in 8 MB blocks, so any size streams)."""
    h = hashlib.sha256()
    for path in files:
        h.update(path.name.encode() + b"\0")
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(8 << 20), b""):
                h.update(block)
    return h.hexdigest()


def ensure_content_hash(root: Path, meta: dict, files: list[Path], meta_file: str = "meta.json") -> str:
    """meta[CONTENT_KEY], computed once for a folder built before the hash was recorded and written back
    into its meta.json (atomically; a read-only cache just recomputes it next time)."""
    if isinstance(meta.get(CONTENT_KEY), str):
        return meta[CONTENT_KEY]

    meta[CONTENT_KEY] = content_sha256(files)
    try:
        write_text_atomic(root / meta_file, json_text(meta, sort_keys=True) + "\n")
    except OSError:
        pass
    return meta[CONTENT_KEY]


@contextlib.contextmanager
def full_disk_as_data_error(data_dir: Path, what: str) -> Iterator[None]:
    """A full disk while `what` (building a cache folder in `data_dir`) becomes one DataError line; the
    staging folder is gone by then (staging_folder removes it)."""
    try:
        yield
    except OSError as err:
        if err.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        raise DataError(
            f"no space left on the device of data_dir={str(data_dir)!r} while {what}; free space there or "
            "point data.data_dir elsewhere (nothing was left behind)"
        ) from None
