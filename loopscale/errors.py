"""Errors the user can fix, and how every entry point reports them: one line, a non-zero exit, no traceback.

    LoopscaleError      the base: `loopscale` and `loopscale-train` print `<program>: error: <first line>` and
                        exit with its exit_code (2)
      ConfigError       a config value or combination that cannot work (also a ValueError)
      InputError        a table, fit record, file or path the user named that cannot be used (also a ValueError)
        UnknownName     (a ConfigError) a name no registry or choice knows: refused with the closest known one
    and, built on these: DataError (data/corpus.py), IdentityMismatch (train/identity.py), LayoutError,
    UnsafeSubmititFolder, LaunchRefused (launch/launchers.py), BadRecord (train/run_json.py), UsageError (cli).
A full or read-only disk or a denied write (OSError ENOSPC, EDQUOT, EROFS, EACCES) is the user's to fix too:
one line, exit code 1 (outputs are written atomically, so what was there before is intact). `user_error` is
the one place that decides; the entry points only print. Foundation: imports nothing of loopscale.
"""

from __future__ import annotations

import dataclasses
import difflib
import errno
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES)


class LoopscaleError(Exception):
    """A problem the user fixes outside the code; reported as one line."""

    exit_code = 2


class ConfigError(LoopscaleError, ValueError):
    """A config value or combination that cannot work."""


class InputError(LoopscaleError, ValueError):
    """A table, fit record, file or path the user named that cannot be used."""


class UnknownName(ConfigError):
    """A name that no registry or config group knows (a recipe, an injection, a block, a choice): a typo on the
    command line, the same for every job of a sweep, so it is refused before any job starts and no job records
    it as an invalid point (train/entry.py, launch/pool_launcher.py)."""


def closest(name, known: Iterable, cutoff: float = 0.6) -> str | None:
    """The known name closest to `name` (difflib's ratio >= cutoff), or None: what a typo most likely meant."""
    found = difflib.get_close_matches(str(name), [str(k) for k in known], n=1, cutoff=cutoff)
    return found[0] if found else None


def not_one_of(field: str, value, known: Iterable, error: type[LoopscaleError] = UnknownName, what: str = "allowed"):
    """The one-line error for a name that is none of `known` (a registry's names, a config group's options, a
    field's choices): `field=value is not <what>; choose one of ...`, and the closest known name when there is
    one, so every refused typo says what was meant."""
    known = list(known)
    near = closest(value, known)
    hint = f" (did you mean {near!r}?)" if near is not None else ""
    return error(f"{field}={value!r} is not {what}; choose one of {', '.join(map(repr, known))}{hint}")


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
        return UserError(_config_line(err), 2, False)
    if isinstance(err, OSError) and err.errno in DISK_ERRNOS:
        where = f" ({err.filename})" if err.filename else ""
        return UserError(f"{err.strerror or err}{where}", 1, True)
    return None


def _config_line(err: BaseException) -> str:
    """The first line of a Hydra or OmegaConf error, with what it left on later lines or left out: a config group's
    options (`optim=adamx`) and a key that does not exist (`model.recipes=x`), each with the closest one. Read
    from the errors' own attributes (Hydra's MissingConfigException.options, OmegaConf's key and object_type),
    so this file imports neither."""
    line = _first_line(err)
    for link in exception_chain(err):
        options = getattr(link, "options", None)
        missing = getattr(link, "missing_cfg_file", None)
        if options and missing:
            group, _, name = str(missing).rpartition("/")
            return str(not_one_of(group, name, options, what=f"a config of the group {group!r}"))
        key, owner = getattr(link, "key", None), getattr(link, "object_type", None)
        if key is not None and owner is not None and dataclasses.is_dataclass(owner):
            fields = [f.name for f in dataclasses.fields(owner)]
            if key in fields:  # the key exists; its value is what was refused (`model.r=abc`)
                inner = _first_line(link)
                return line if link is err or inner in line else f"{line}: {inner}"
            near = closest(key, fields)
            hint = f" (did you mean {near!r}?)" if near is not None else ""
            return f"{line.rstrip('.')}: {owner.__name__} has no key {key!r}{hint}; its keys: {', '.join(fields)}"
    return line


def _first_line(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0]
