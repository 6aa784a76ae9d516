"""loopscale/signals.py's stops_held and sigint_at_default, in this process with real signals: a Ctrl-C or
SIGTERM that arrives inside stops_held is raised at its end, not inside (a worker pool's start registers the
worker first), and SIGINT is blocked meanwhile (what a child spawned inside inherits); sigint_at_default
handles SIGINT for its block only when this process ignores it. The processes that depend on these are
tests/system/test_pool_stops.py's."""

from __future__ import annotations

import os
import signal

import pytest

from loopscale.signals import Terminated, raise_on_sigterm, sigint_at_default, stops_held


@pytest.fixture
def sigterm_raises():
    """Ctrl-C raises KeyboardInterrupt and SIGTERM Terminated, as in loopscale-train (also when pytest runs as
    a script's background job, which ignores SIGINT)."""
    previous = signal.getsignal(signal.SIGTERM), signal.signal(signal.SIGINT, signal.default_int_handler)
    mask = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # as a command starts: SIGINT delivered
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    raise_on_sigterm()
    yield
    signal.signal(signal.SIGTERM, previous[0])
    signal.signal(signal.SIGINT, previous[1])
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def test_a_ctrl_c_inside_is_raised_at_the_end(sigterm_raises):
    done = []
    with pytest.raises(KeyboardInterrupt):
        with stops_held():
            assert signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, [])  # a child started here inherits it
            os.kill(os.getpid(), signal.SIGINT)
            done.append("the block ran to its end")
    assert done == ["the block ran to its end"]
    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, [])


def test_a_sigterm_inside_is_raised_at_the_end_through_the_handler_in_place(sigterm_raises):
    done = []
    with pytest.raises(Terminated):
        with stops_held():
            os.kill(os.getpid(), signal.SIGTERM)
            done.append("the block ran to its end")
    assert done == ["the block ran to its end"]
    assert signal.getsignal(signal.SIGTERM).__name__ == "_raise_terminated"  # restored


def test_nothing_is_raised_without_a_signal(sigterm_raises):
    before = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    with stops_held():
        pass
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == before


def test_sigint_at_default_handles_sigint_only_while_this_process_ignores_it():
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # pytest as a script's background job
    try:
        with sigint_at_default():  # a handled signal is reset to the default by exec
            assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        signal.signal(signal.SIGINT, signal.default_int_handler)  # a foreground pytest's
        with sigint_at_default():  # not ignored: left as it is
            assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)
