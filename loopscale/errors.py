"""Errors the user can fix, and how every entry point reports them: one line, a non-zero exit, no traceback.

    LoopscaleError      the base: `loopscale` and `loopscale-train` print `<program>: error: <first line>` and
                        exit with its exit_code (2)
      ConfigError       a config value or combination that cannot work (also a ValueError)
      InputError        a table, fit record, file or path the user named that cannot be used (also a ValueError)
    and, built on these: DataError (data/corpus.py), IdentityMismatch (train/identity.py), LayoutError,
    UnsafeSubmititFolder, LaunchRefused (launch/launchers.py), BadRecord (train/run_json.py), UsageError (cli).
A full or read-only disk or a denied write (OSError ENOSPC, EDQUOT, EROFS, EACCES) is the user's to fix too:
one line, exit code 1 (outputs are written atomically, so what was there before is intact). `user_error` is
the one place that decides; the entry points only print. Foundation: imports nothing of loopscale.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from dataclasses import dataclass

DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES)


class LoopscaleError(Exception):
    """A problem the user fixes outside the code; reported as one line."""

    exit_code = 2


class ConfigError(LoopscaleError, ValueError):
    """A config value or combination that cannot work."""


class InputError(LoopscaleError, ValueError):
    """A table, fit record, file or path the user named that cannot be used."""


@dataclass(frozen=True)
class UserError:
    line: str  # the message's first line (config errors carry a key report below it)
    exit_code: int
    disk: bool  # a full / read-only disk or a denied write


def exception_chain(err: BaseException | None) -> Iterator[BaseException]:
    """`err`, then the exception it was raised from or during (its cause, else its context), and so on, each
    once."""
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        yield err
        err = err.__cause__ or err.__context__


def user_error(err: BaseException) -> UserError | None:
    """How an entry point reports `err`, or None when it is not the user's to fix (then: a traceback).
    A LoopscaleError anywhere in the exception's chain counts (a resolver's ConfigError arrives wrapped in
    OmegaConf's error); so does an error of Hydra's or OmegaConf's own config handling (a bad override)."""
    for link in exception_chain(err):
        if isinstance(link, LoopscaleError):
            return UserError(_first_line(link), link.exit_code, False)
    if type(err).__module__.split(".")[0] in ("omegaconf", "hydra"):
        return UserError(_first_line(err), 2, False)
    if isinstance(err, OSError) and err.errno in DISK_ERRNOS:
        where = f" ({err.filename})" if err.filename else ""
        return UserError(f"{err.strerror or err}{where}", 1, True)
    return None


def _first_line(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0]
