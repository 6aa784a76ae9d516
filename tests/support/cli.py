"""`loopscale ARGS` in the test's own process: `run_cli` calls `loopscale.cli.main(argv)` exactly as
`python -m loopscale` does (loopscale/__main__.py is `sys.exit(main())`) and returns what a child process
would have: the exit code and what the command wrote to stdout and stderr.

An error that escapes `main` becomes what the interpreter would print (the traceback on stderr, exit 1),
so `"Traceback" not in res.stderr` means the same in both. Each call runs in `cwd` with `env` added to the
environment, both restored afterwards, and leaves SIGTERM's handler as it found it (`main` installs its
own). No interpreter start, no re-import of numpy, pandas, scipy, torch: ~0.3 s instead of ~3.5 s for an
error case. A child process is kept where it is the point (one smoke run of each command, signals, SLURM,
the wheel): support/procs.py.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import sys
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from loopscale.cli import main


@dataclass(frozen=True)
class CliResult:
    """The fields of subprocess.CompletedProcess that the tests read."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str


@contextlib.contextmanager
def _inside(cwd: Path | None, env: dict | None) -> Iterator[None]:
    """Run the block in `cwd` with `env` added to os.environ; both (and SIGTERM's handler) restored after."""
    here, saved, sigterm = os.getcwd(), dict(os.environ), signal.getsignal(signal.SIGTERM)
    try:
        if cwd is not None:
            os.chdir(cwd)
        os.environ.update({k: str(v) for k, v in (env or {}).items()})
        yield
    finally:
        os.chdir(here)
        os.environ.clear()
        os.environ.update(saved)
        signal.signal(signal.SIGTERM, sigterm)


def run_cli(args: list, cwd: Path | None = None, env: dict | None = None) -> CliResult:
    """`loopscale ARGS` in this process; see the module docstring."""
    argv = [str(a) for a in args]
    out, err = io.StringIO(), io.StringIO()
    with _inside(cwd, env), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as stop:  # argparse's usage errors (2), Terminated (143), sys.exit in a command
            code = stop.code
            if isinstance(code, str):  # sys.exit("message") prints the message and exits 1
                print(code, file=sys.stderr)
                code = 1
        except Exception:  # uncaught: the interpreter prints the traceback and exits 1
            traceback.print_exc()
            code = 1
    return CliResult(argv, 0 if code is None else int(code), out.getvalue(), err.getvalue())
