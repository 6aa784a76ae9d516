"""The `loopscale` command: one subcommand per module in this package.

Each module listed in SUBCOMMANDS defines `register(subparsers)`, which adds its parser(s) and sets
`func` (args -> exit code) with `set_defaults`. Modules here import only argparse-level things at top
level and defer heavy imports (torch, lightning, scipy) into their `func`, so `loopscale --help` and
`loopscale fit` stay fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from loopscale.errors import LoopscaleError, user_error

# Module names under loopscale.cli, in the order they appear in --help.
SUBCOMMANDS = [
    *("params", "data", "sweep", "collect", "fit", "validate", "equiv", "advise", "plot", "notebook", "plan", "demo"),
]


class UsageError(LoopscaleError):
    """Bad command-line input: reported as one line on stderr with exit code 2, nothing written."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="loopscale",
        description="Scaling-law experiments for looped (depth-recurrent) transformers.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        importlib.import_module(f"loopscale.cli.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 2
    from loopscale.signals import EXIT_INTERRUPTED, EXIT_TERMINATED, Terminated, raise_on_sigterm

    raise_on_sigterm()  # SIGTERM unwinds like Ctrl-C: temporary files are removed, workers stopped
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # what is still buffered goes now, while a closed pipe is still caught below
        return code
    except BrokenPipeError:  # `loopscale params | head`: the reader left; end quietly, as `yes | head` does
        return _reader_gone()
    except Exception as err:  # the user's to fix (loopscale/errors.py): one line, no traceback
        found = user_error(err)
        if found is None:
            raise
        # outputs are written atomically (loopscale/atomic.py): on a full disk what was there before is intact
        tail = "; nothing was replaced" if found.disk else ""
        print(f"loopscale {args.command}: error: {found.line}{tail}", file=sys.stderr)
        return found.exit_code
    except KeyboardInterrupt:  # Ctrl-C: workers are stopped where they were started; one line, no traceback
        print(f"loopscale {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Terminated:
        print(f"loopscale {args.command}: terminated", file=sys.stderr)
        return EXIT_TERMINATED


EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what a shell reports for a writer whose reader went away


def _reader_gone() -> int:
    """stdout's reader closed the pipe: point stdout at /dev/null so the interpreter's last flush cannot
    fail again (Python would print "Exception ignored ... BrokenPipeError"), and exit like a writer killed by
    SIGPIPE."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # not a real file (captured in-process): nothing to flush
        pass
    return EXIT_BROKEN_PIPE


if __name__ == "__main__":
    sys.exit(main())
