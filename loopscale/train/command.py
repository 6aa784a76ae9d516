"""`loopscale-train`'s process entry point: Ctrl-C and SIGTERM are one line and exit 130 / 143 from the first
moment, also while the training stack (torch, Lightning, Hydra: seconds on a loaded machine) is still being
imported. `loopscale.train.entry` imports that stack at its top, so a stop that lands in those imports came out
as a KeyboardInterrupt traceback (or, for SIGTERM, a silent kill) before its handlers existed; this module
imports only the standard library and `loopscale.signals` before it installs them, then refuses what the command
line alone rules out (loopscale/train/refusals.py: in a second, not after the stack's seconds), then imports the
entry."""

from __future__ import annotations

import os
import sys

from loopscale.signals import EXIT_INTERRUPTED, EXIT_TERMINATED, Terminated, raise_on_sigterm, stop_behind


def main() -> None:
    raise_on_sigterm()
    try:
        # deferred, as the entry below: a stop may interrupt these imports; a refused launch skips the stack
        from loopscale.train.refusals import refuse_before_the_stack

        refuse_before_the_stack(sys.argv[1:])
        from loopscale.train import entry  # deferred: what a stop may interrupt is exactly this import
    except KeyboardInterrupt:
        _stopped("interrupted", EXIT_INTERRUPTED)
    except Terminated:
        _stopped("terminated", EXIT_TERMINATED)
    except Exception as err:  # a stop inside Hydra's import-time config store comes out as omegaconf's error
        stop = stop_behind(err)
        if stop is None:
            raise
        if isinstance(stop, Terminated):
            _stopped("terminated", EXIT_TERMINATED)
        _stopped("interrupted", EXIT_INTERRUPTED)
    entry.main()


def _stopped(what: str, code: int) -> None:
    """The line, then exit at once: nothing has started, so nothing needs cleaning up, and a plain SystemExit
    is not enough. A Ctrl-C that lands in code an import runs through `exec` of a string (dataclasses build
    their methods that way) sets CPython's "unhandled KeyboardInterrupt" flag even when it is caught, and
    CPython (3.11) then ends the process by SIGINT instead of with the code (subprocess sees -2, not 130)."""
    print(f"loopscale-train: {what}", file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(code)
