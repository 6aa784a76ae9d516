"""Atomic output files: a reader sees the old file or the complete new one, never a cut one.

Every output (run.json, runs.csv / .parquet / _problems.csv, fit.json, figures, report.md) is written to a
temporary file in the destination's folder, flushed to disk, then renamed over the destination; a rename
within one file system is atomic. A write that fails (full disk, kill, exception) removes its temporary
file and leaves the destination as it was.

    with atomic_path("fits/looped.json") as tmp:   # tmp keeps the suffix, so writers that pick a format
        result.write_json(tmp)                    # from it (savefig, to_parquet) behave the same
    write_json_atomic(run_dir / "run.json", record)
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from loopscale.errors import InputError

FILE_MODE = 0o666  # before the umask, as open() creates files (0644 under the usual umask 022)


@contextlib.contextmanager
def atomic_path(path: Path | str, follow_symlinks: bool = False) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on a clean exit move it onto `path`, else delete it.

    A symlink at `path` is replaced by the file unless `follow_symlinks`, which writes its target instead
    (what a user expects of a `--out` they linked themselves; never for files in a shared runs dir, where a
    planted link would redirect the write)."""
    path = Path(os.path.realpath(path)) if follow_symlinks else Path(path)
    with _temporary(path) as tmp:
        yield tmp
        _fsync(tmp)
        os.replace(tmp, path)


@contextlib.contextmanager
def atomic_paths(*paths: Path | str) -> Iterator[list[Path]]:
    """Several outputs replaced together or not at all: yield a temporary path beside each; when the block
    ends cleanly and every temporary file is on disk, rename each onto its destination (renames need no
    space, so a full disk fails before any destination changes); otherwise delete them all."""
    with contextlib.ExitStack() as stack:
        temps = [stack.enter_context(_temporary(Path(p))) for p in paths]
        yield temps
        for tmp in temps:
            _fsync(tmp)
        for tmp, path in zip(temps, paths):
            os.replace(tmp, path)


@contextlib.contextmanager
def _temporary(path: Path) -> Iterator[Path]:
    """A fresh temporary file beside `path`, removed on the way out unless it was renamed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.{secrets.token_hex(4)}.tmp{path.suffix}")
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE))
    try:
        yield tmp
    finally:
        tmp.unlink(missing_ok=True)


def _fsync(path: Path) -> None:
    # the data must be on disk before the rename makes it visible, or a crash can publish an empty file
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_text_atomic(path: Path | str, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def json_safe(value: Any) -> Any:
    """`value` as plain JSON: numpy scalars and arrays as numbers and lists (their `tolist`), keys as text, and
    non-finite floats as None (NaN and Infinity are not JSON, RFC 8259)."""
    if hasattr(value, "tolist"):  # numpy, without importing it here
        value = value.tolist()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def json_text(value: Any, indent: int | None = 2, sort_keys: bool = False) -> str:
    """`value` as strict JSON text (`json_safe`: numpy as numbers, NaN and infinities as null; anything else
    json cannot write as its str): every JSON file or line loopscale writes goes through here."""
    return json.dumps(json_safe(value), indent=indent, sort_keys=sort_keys, default=str, allow_nan=False)


def write_json_atomic(path: Path | str, payload: dict[str, Any]) -> None:
    """Strict JSON (NaN written as null), indented, ending in a newline, written atomically."""
    write_text_atomic(path, json_text(payload) + "\n")


def check_writable(path: Path | str, what: str) -> None:
    """Raise ValueError (naming `what`) unless a file can be created at `path`: checked before long work,
    so an unwritable --out fails at once instead of after the fit. Creates the parent folders."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{what} {path} is a directory; give a file name")
    probe = path.with_name(f".{path.name}.{secrets.token_hex(4)}.check")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE))
        probe.unlink()
    except OSError as err:
        raise InputError(f"{what} {path} is not writable: {err.strerror or err}") from None


def same_file(a: Path | str, b: Path | str) -> bool:
    """Whether two paths name one file (through links, or two names of one file)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist yet
        return False


def check_outputs_apart(outputs, inputs) -> None:
    """No output may be one of the command's inputs or another output: an InputError naming both, before any
    work. `outputs`: (option, path) pairs (--out, --plot, a figure beside them); `inputs`: (what, path) pairs
    ("the fit", "the input table", "--validation"). Every command that writes files checks here."""
    outputs = [(what, Path(p)) for what, p in outputs if p is not None]
    for what, path in outputs:
        for source, given in inputs:
            if given is not None and same_file(path, given):
                raise InputError(f"{what} {path} is {source} {given}: it would be overwritten; give another path")
    for i, (what, path) in enumerate(outputs):
        for other_what, other in outputs[:i]:
            if same_file(path, other):
                raise InputError(f"{other_what} and {what} both write {path}; give them different paths")
