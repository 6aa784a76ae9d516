"""A pool of worker processes on one machine for any picklable job function: `run_in_workers`.

The pool is a few lines of our own rather than concurrent.futures' ProcessPoolExecutor, because that one
breaks as a whole when one worker dies (every pending and running job fails with BrokenProcessPool, and it
cannot tell which job the dead worker held). Here each worker (spawned: no state inherited from the parent)
has its own pipe and is handed one job at a time, so the parent always knows which job a worker holds.
Nothing hangs and nothing is left behind:
- a worker that dies during a job (killed, out of memory, SIGTERM sent to it alone) comes back as that job's
  WorkerDied; a new worker takes its place and the other jobs go on;
- Ctrl-C: workers ignore SIGINT (a terminal sends it to the whole process group); the parent raises
  KeyboardInterrupt, sets the pool's "interrupted" flag and sends each worker SIGTERM, which the worker then
  raises as an interrupt: its run is recorded "interrupted", as in a single process. SIGTERM to the parent
  raises Terminated there (signals.py) and its workers record "terminated". Each worker exits within a
  moment (SIGKILL after STOP_GRACE_S). A worker whose parent dies without that (SIGKILL) gets SIGTERM from
  the kernel (PR_SET_PDEATHSIG). A stopped run resumes from its checkpoint on the next call.
- a stop at any moment reaches every worker: each is started with both signals held back (signals.
  stops_held) until it is on the pool's list, which the stop path ends whole; a worker starts with SIGINT
  blocked, so the group's Ctrl-C cannot interrupt its imports; the "interrupted" flag is a plain shared
  byte, so no lock a killed process held can block the parent; every wait on a worker has a deadline.
- progress: each worker reports the tokens its run trains, batch by batch (loopscale/train/step_progress.py),
  into shared memory the parent reads for its bar and ETA (`tick`).

Training jobs on it: loopscale/launch/local_workers.py (the demo) and loopscale/launch/pool_launcher.py
(hydra/launcher=local_pool).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import pickle
import signal
import sys
import threading
import time
import warnings
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from multiprocessing import resource_tracker
from multiprocessing.connection import wait
from typing import Any, TypeVar

from tqdm import tqdm

from loopscale.signals import (
    Interrupted,
    Terminated,
    die_with_parent,
    raise_on_sigterm,
    stop_line_in_parent,
    stops_held,
    unblock_sigint,
)
from loopscale.train.step_progress import report_to

STOP_GRACE_S = 10.0  # a worker told to stop writes its record and exits well within this, even under load
EXIT_INTERRUPTED = 130  # 128 + SIGINT (loopscale/signals.py)
Item = TypeVar("Item")

# In a worker process: the pool's "interrupted" flag (set by the parent on Ctrl-C before it sends SIGTERM)
# and whether a job is running (a stop between jobs just ends the worker).
_INTERRUPT = None
_IN_JOB = False


def quiet_lightning() -> None:
    """Each run's INFO lines (Lightning's "GPU available", "Restoring states from the checkpoint", the run's plan)
    would bury a sweep's progress: they stay out of the terminal and in the job's own log. Lightning's import adds a
    console handler of its own and sets its loggers to INFO, so it is imported first (setting their levels before
    it, as was done, was undone by it: 208 of a demo's 801 lines); its console handler goes and its records reach the
    root logger's handlers, which decide: a Hydra job's console (WARNING under the sweep's bar) and its entry.log,
    or the demo job's log (`local_workers.job_log`)."""
    import lightning  # noqa: F401  (first: its import sets the levels and adds the handler undone here)

    from loopscale.train.entry import lightning_to_root  # in a worker (or the process that trains): torch is here

    lightning_to_root()
    warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)")


def _init_worker(threads: int, parent_pid: int, interrupt=None) -> None:
    global _INTERRUPT

    _INTERRUPT = interrupt
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent owns Ctrl-C (module docstring)
    signal.signal(signal.SIGTERM, _stop_worker)  # left in place by signals.training_signals (not the default)
    unblock_sigint()  # blocked since the spawn (signals.stops_held); a Ctrl-C held back is dropped: ignored
    stop_line_in_parent()  # one line for the sweep, the parent's, not one per worker
    die_with_parent(signal.SIGTERM, parent_pid)
    os.environ["OMP_NUM_THREADS"] = str(threads)
    # Inductor compiles in this process, not in a pool of compile subprocesses: the workers already use every
    # core, and a worker stopped mid-compile would leave that pool's semaphores behind (a warning after the
    # sweep's one stop line)
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    # tqdm's default write lock holds a multiprocessing semaphore, which under this pool's spawn context is
    # registered with the resource tracker; a worker stopped while it holds one (torch.fx makes a tqdm bar
    # while compiling) would leave it behind, and the tracker's warning would follow the sweep's stop line.
    # A worker's bars are its own, so a thread lock does.
    tqdm.set_lock(threading.RLock())
    import torch  # in the worker: the pool's parent never loads torch

    torch.set_num_threads(threads)
    quiet_lightning()


def _stop_worker(signum, frame) -> None:
    """SIGTERM in a worker: the parent's Ctrl-C (the pool's interrupt flag set) raises signals.Interrupted,
    which a run records as "interrupted" (a KeyboardInterrupt would be turned into sys.exit(1) by Lightning);
    otherwise Terminated, recorded as "terminated". Between jobs the worker just exits."""
    interrupted = _INTERRUPT is not None and bool(_INTERRUPT.value)
    if not _IN_JOB:  # nothing to record: end now (an exception here could land in some object's __del__)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(EXIT_INTERRUPTED if interrupted else 143)
    raise Interrupted() if interrupted else Terminated()


def _job_in_worker(fn: Callable[[Any], Any], item: Any) -> Any:
    """`fn(item)` in a worker; a stop signal (or SystemExit) ends the worker process once the job's record is
    written, instead of handing it the next job (the pool would catch the exit and go on)."""
    global _IN_JOB

    _IN_JOB = True
    try:
        return fn(item)
    except (SystemExit, KeyboardInterrupt, Interrupted) as stop:
        code = stop.code if isinstance(stop, SystemExit) and isinstance(stop.code, int) else EXIT_INTERRUPTED
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    finally:
        _IN_JOB = False


@dataclass(frozen=True)
class WorkerDied:
    """In place of a job's result: the worker process running it ended during the job, by a signal (SIGKILL,
    the kernel's out-of-memory killer) or by a stop signal to it alone (SIGTERM: exit 143, its run recorded
    "terminated")."""

    pid: int
    exitcode: int | None

    @property
    def how(self) -> str:
        if self.exitcode is not None and self.exitcode < 0:
            with contextlib.suppress(ValueError):
                return f"killed by {signal.Signals(-self.exitcode).name}"
        if self.exitcode is not None and self.exitcode > 128:
            with contextlib.suppress(ValueError):
                return f"stopped by {signal.Signals(self.exitcode - 128).name} (exit {self.exitcode})"
        return f"exited with code {self.exitcode}"

    @property
    def reason(self) -> str:
        return f"its worker process (pid {self.pid}) died: {self.how}"


TICK_S = 0.5  # how often the consumer's `tick` sees the workers' progress


def run_in_workers(
    fn: Callable[[Item], Any],
    items: Iterable[Item],
    workers: int,
    threads_per_worker: int = 1,
    tick: Callable[[list[float], list[int]], None] | None = None,
) -> Iterator[tuple[Item, Any]]:
    """Yield (item, fn(item)) per item as each finishes, in completion order, `fn` (a module-level function
    returning plain data) running in `workers` spawned processes of `threads_per_worker` torch threads each.
    A job whose worker dies yields (item, WorkerDied) and a new worker takes the dead one's place.

    workers <= 1 (or one item) runs in this process, in the given order. Items are handed out in the given
    order. `tick(tokens, running)` is called every TICK_S or so with the tokens each item's run has trained
    so far (loopscale/train/step_progress.py) and the indices of the items running now. Ctrl-C, SIGTERM, an
    exception of the consumer or a consumer that stops early end every worker (module docstring) and go on.
    Over 60 lines because starting, handing out and replacing workers share the one try block whose
    clean-up runs on every way out."""
    items = list(items)
    raise_on_sigterm()  # SIGTERM to this process unwinds through the clean-up below
    if workers <= 1 or len(items) <= 1:
        yield from _in_process(fn, items, tick)
        return
    context = multiprocessing.get_context("spawn")
    interrupt = context.RawValue("b", 0)  # set on Ctrl-C; a byte, read and written without a lock
    trained = context.Array("d", len(items), lock=False)  # tokens per item; each written by one worker at a time
    pending = deque(range(len(items)))
    running: dict[int, _Worker] = {}  # by item index
    idle: list[_Worker] = []
    pool: list[_Worker] = []  # every worker started and not yet ended: what a stop ends

    def start() -> _Worker:
        ours, theirs = context.Pipe()
        args = (theirs, fn, threads_per_worker, os.getpid(), interrupt, trained)
        proc = context.Process(target=_worker_main, args=args, name="loopscale-pool-worker")
        with stops_held():  # on the pool's list before a Ctrl-C or SIGTERM can unwind (module docstring)
            proc.start()
            pool.append(_Worker(proc, ours))
            theirs.close()
        return pool[-1]

    def hand_out(worker: _Worker) -> None:
        index = pending.popleft()
        try:
            worker.conn.send((index, items[index]))
        except OSError:  # it died between its last result and this job: a new one takes the job
            _end(worker, pool)
            worker = start()
            worker.conn.send((index, items[index]))
        worker.index = index
        running[index] = worker

    # multiprocessing starts its resource tracker on the first spawn and unblocks SIGINT after: now, before
    # a worker is spawned with SIGINT blocked (stops_held), or that first worker would start without it
    resource_tracker.ensure_running()
    try:
        for _ in range(min(workers, len(items))):
            idle.append(start())
        while idle and pending:
            hand_out(idle.pop())
        while running:
            ready = set(wait([w.conn for w in running.values()] + [w.proc.sentinel for w in running.values()], TICK_S))
            if tick is not None:
                tick(list(trained), list(running))
            for index, worker in list(running.items()):
                if worker.conn not in ready and worker.proc.sentinel not in ready:
                    continue
                del running[index]
                result = worker.receive()
                if isinstance(result, WorkerDied):
                    _end(worker, pool)
                    worker = start() if pending else None  # the dead worker's place, for the next job
                elif isinstance(result, _Raised):
                    raise result.error
                if worker is not None and pending:
                    hand_out(worker)
                elif worker is not None:
                    idle.append(worker)
                yield items[index], result
    except KeyboardInterrupt:  # Ctrl-C: the workers record their runs as interrupted (module docstring)
        interrupt.value = 1
        with stops_held():  # a second Ctrl-C waits for the clean-up instead of cutting it short
            stop_workers([w.proc for w in pool])
        raise
    except BaseException:  # a failed job, SIGTERM, or the consumer stopped early: end every worker now
        with stops_held():
            stop_workers([w.proc for w in pool])
        raise
    finally:
        with stops_held():
            _close(pool)


def _in_process(fn: Callable[[Item], Any], items: list, tick) -> Iterator[tuple[Item, Any]]:
    """The pool of one: each item in this process, its progress reported to `tick` as it trains."""
    trained = [0.0] * len(items)
    last = [0.0]

    def sink(index: int, tokens: int) -> None:
        trained[index] += tokens
        if tick is not None and time.monotonic() - last[0] >= TICK_S:
            last[0] = time.monotonic()
            tick(list(trained), [index])

    try:
        for index, item in enumerate(items):
            report_to(lambda tokens, i=index: sink(i, tokens))
            result = fn(item)
            report_to(None)
            yield item, result
    finally:
        report_to(None)


@dataclass
class _Worker:
    proc: Any  # a multiprocessing Process
    conn: Any  # the parent's end of its pipe
    index: int | None = None  # the item it runs

    def receive(self) -> Any:
        """The job's result, or WorkerDied when the process ended without sending one."""
        try:
            if self.conn.poll():
                return self.conn.recv()[1]
        except (EOFError, OSError):  # the pipe closed under it: the process is gone, or going
            pass
        stop_workers([self.proc])  # ended already, or made to (a deadline, not a wait on its goodwill)
        return WorkerDied(self.proc.pid, self.proc.exitcode)


def _end(worker: _Worker, pool: list[_Worker]) -> None:
    """A worker that is gone (or must go) off the pool's list: its process ended and its pipe closed."""
    stop_workers([worker.proc])
    worker.conn.close()
    pool.remove(worker)


@dataclass(frozen=True)
class _Raised:
    """`fn` itself raised (a bug: job functions return their failures): the parent raises it again."""

    error: BaseException


def _worker_main(conn, fn, threads: int, parent_pid: int, interrupt, trained) -> None:
    """A worker: jobs from its pipe, one at a time, each result sent back, until the pipe says None."""
    _init_worker(threads, parent_pid, interrupt)
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):  # the parent is gone
            return
        if message is None:
            return
        index, item = message
        trained[index] = 0.0  # a job's tokens count from its own start

        def sink(tokens: int, index: int = index) -> None:
            trained[index] += tokens

        report_to(sink)
        try:
            result = _job_in_worker(fn, item)
        except Exception as err:
            result = _Raised(_picklable(err))
        finally:
            report_to(None)
        conn.send((index, result))


def _picklable(err: Exception) -> BaseException:
    try:
        pickle.loads(pickle.dumps(err))
    except Exception:
        return RuntimeError(f"{type(err).__name__}: {err}")
    return err


def _close(workers: list[_Worker], grace_s: float = STOP_GRACE_S) -> None:
    """Tell idle workers to end, and wait for every worker (SIGTERM, then SIGKILL, to one that stays)."""
    for w in workers:
        with contextlib.suppress(OSError, ValueError):
            w.conn.send(None)
    deadline = time.monotonic() + grace_s
    for w in workers:
        w.proc.join(max(0.0, deadline - time.monotonic()))
    stop_workers([w.proc for w in workers])
    for w in workers:
        w.conn.close()


def stop_workers(procs: list, grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM to each live worker (it records its run as terminated and exits), SIGKILL to any still
    there after `grace_s`; returns once all are gone."""
    for p in procs:
        if p.is_alive():
            p.terminate()
    deadline = time.monotonic() + grace_s
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join()
