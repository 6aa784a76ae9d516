"""SIGINT and SIGTERM as exceptions, so a stopped run says so in its record and in its exit code.

Exit codes follow the shell's convention, 128 + the signal: Ctrl-C (SIGINT) 130, SIGTERM (kill, timeout,
a scheduler's cancel) 143. Two things stand in the way without this module:
- by default SIGTERM kills the process on the spot: no record, no clean-up of temporary files;
- Lightning turns a KeyboardInterrupt inside `trainer.fit` into `sys.exit(1)`, and its own SIGTERM handler
  into a `SIGTERMException` (a SystemExit with code 0) at the next step.
So: `raise_on_sigterm()` makes SIGTERM raise Terminated (a SystemExit with code 143) in the main thread, and
`training_signals()` does that and makes SIGINT raise Interrupted (which Lightning does not recognise, so it
passes through) around a training run, giving back a KeyboardInterrupt to the caller. A handler someone else
installed (submitit's, a worker pool's SIG_IGN for SIGINT) is left alone, and so is a SIGINT ignored from the
process's start: a background job of a script (`cmd &` without job control) ignores the terminal's Ctrl-C by
POSIX rule, and every process it starts inherits that (stop it with SIGTERM). `stops_held()` keeps both
signals back while a worker process starts, so its parent has it on record before either can unwind.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
from collections.abc import Iterator

from loopscale.errors import exception_chain

EXIT_INTERRUPTED = 128 + signal.SIGINT  # 130
EXIT_TERMINATED = 128 + signal.SIGTERM  # 143
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE  # 141: what a shell reports for a writer whose reader went away


class Terminated(SystemExit):
    """SIGTERM arrived: unwinds like SystemExit (clean-up runs) and exits 143."""

    def __init__(self, code: int = EXIT_TERMINATED):
        super().__init__(code)


class Interrupted(BaseException):
    """Ctrl-C during training (training_signals): not a KeyboardInterrupt, which Lightning would swallow."""


def _raise_terminated(signum, frame) -> None:
    raise Terminated()


def _raise_interrupted(signum, frame) -> None:
    raise Interrupted()


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def raise_on_sigterm() -> None:
    """From now on SIGTERM raises Terminated, unless this is not the main thread or another handler owns
    SIGTERM (submitit bypasses it on purpose: Slurm sends it to every job it requeues)."""
    if _in_main_thread() and signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None, _raise_terminated):
        signal.signal(signal.SIGTERM, _raise_terminated)


@contextlib.contextmanager
def training_signals() -> Iterator[None]:
    """Within the block, SIGTERM raises Terminated and Ctrl-C raises Interrupted (each only where the
    default handler is in place); an Interrupted leaves the block as KeyboardInterrupt. Handlers are
    restored after."""
    previous = {}
    if _in_main_thread():
        for signum, ours, default in (
            (signal.SIGTERM, _raise_terminated, (signal.SIG_DFL, None, _raise_terminated)),
            (signal.SIGINT, _raise_interrupted, (signal.default_int_handler,)),
        ):
            current = signal.getsignal(signum)
            if current in default:
                previous[signum] = current
                signal.signal(signum, ours)
    try:
        yield
    except Interrupted:
        raise KeyboardInterrupt from None
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def stop_status(err: BaseException) -> str | None:
    """'interrupted' / 'terminated' for an exception a signal raised (ours, or Lightning's
    SIGTERMException), else None."""
    if isinstance(err, (Interrupted, KeyboardInterrupt)):
        return "interrupted"
    if isinstance(err, Terminated) or type(err).__name__ == "SIGTERMException":
        return "terminated"
    return None


def stop_behind(err: BaseException) -> BaseException | None:
    """The Ctrl-C or SIGTERM behind an error, if any. A stop that lands while omegaconf builds a config (Hydra
    storing its structured configs on import, its sweeper composing the sweep) unwinds through omegaconf's
    `flag_override`, whose clean-up then fails on the half-built config (an AttributeError whose context is the
    stop): the stop is what the user did, and what is reported."""
    return next((link for link in exception_chain(err) if isinstance(link, (KeyboardInterrupt, Terminated))), None)


@contextlib.contextmanager
def stops_held() -> Iterator[None]:
    """Ctrl-C and SIGTERM held back for the block and raised at its end, as they would have been: what the
    block starts (a worker process) is on its caller's books before a stop unwinds. Each signal that has a
    Python handler gets one that only notes it (a mask alone would not do: the kernel hands a process's
    signal to any thread that does not block it, and Python then runs the handler in the main thread anyway);
    a noted signal is raised again through the restored handler at the end. SIGINT is also blocked
    (pthread_sigmask), for what is spawned inside: the child inherits the mask, so a terminal's Ctrl-C, which
    reaches the whole process group, cannot interrupt its start-up (it unblocks once its own handlers are in:
    `unblock_sigint`). SIGTERM is not blocked: a process started inside keeps its default, so stopping it
    while it starts ends it at once. Outside the main thread, where Python delivers no signals, the block
    runs as is."""
    if not _in_main_thread():
        yield
        return
    noted: list[int] = []
    closed = [False]
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    handlers = {s: h for s, h in handlers.items() if callable(h)}  # not SIG_IGN / SIG_DFL / a C handler

    def note(signum: int, frame) -> None:
        # Python runs a handler in the main thread some bytecodes after the C handler, which may have run in
        # another thread (one that does not block SIGINT): one that comes after the block closed is handled
        # as the handler it replaced would handle it, wherever the clean-up below is
        if closed[0]:
            handlers[signum](signum, frame)
        else:
            noted.append(signum)

    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:  # a SIGTERM while the handlers go in still finds the mask and the handlers restored
        for signum in handlers:
            signal.signal(signum, note)
        yield
    finally:
        # the mask first (a Ctrl-C the kernel kept pending comes now and is noted), so that a stop raised by a
        # late handler from here on leaves it restored
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        closed[0] = True
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
        for signum in dict.fromkeys(noted):  # through the handler now in place, as if it arrived now
            signal.raise_signal(signum)


@contextlib.contextmanager
def sigint_at_default() -> Iterator[None]:
    """A child process started in the block has SIGINT at its default, as a terminal's foreground job does,
    even when this process ignores it (a background job of a script: the module docstring). An ignored signal
    stays ignored across fork and exec, and Python installs no KeyboardInterrupt handler in a process that
    starts that way; a handled one is reset to the default by exec, so SIGINT is handled here for the moment
    of the start. For whoever starts a loopscale command to Ctrl-C it (the tests, benchmarks/bench_ctrl_c.py).
    """
    if not _in_main_thread() or signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        yield  # a child gets the default already (or this thread cannot change handlers)
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


_STOP_LINE_IN_PARENT = False  # set in a pool's worker: the pool's parent says the stop for the whole sweep


def stop_line_in_parent() -> None:
    """From now on this process (a pool's worker) leaves the one line of a Ctrl-C / SIGTERM to its parent,
    which says it once for every worker; the runs here still record how they were stopped."""
    global _STOP_LINE_IN_PARENT
    _STOP_LINE_IN_PARENT = True


def says_its_stop() -> bool:
    """Whether this process prints its own Ctrl-C / SIGTERM line (not a pool's worker)."""
    return not _STOP_LINE_IN_PARENT


def unblock_sigint() -> None:
    """SIGINT as a process started inside `stops_held` should have it, once its handler is set."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def die_with_parent(signum: int, parent_pid: int) -> None:
    """Ask Linux to send this process `signum` when its parent dies (prctl PR_SET_PDEATHSIG), so a worker
    never outlives a parent killed with SIGKILL; `parent_pid` closes the race with a parent already gone."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signum), 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the parent's own clean-up is all there is
        return
    if os.getppid() != parent_pid:
        os.kill(os.getpid(), signum)


def reader_gone() -> int:
    """stdout's reader closed the pipe: point stdout at /dev/null so the interpreter's last flush cannot
    fail again (Python would print "Exception ignored ... BrokenPipeError"), and exit like a writer killed by
    SIGPIPE."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # not a real file (captured in-process): nothing to flush
        pass
    return EXIT_BROKEN_PIPE
