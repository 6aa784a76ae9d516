"""CPU training throughput of a job's actual model, measured on this machine before a sweep is launched
(`loopscale plan` / `loopscale sweep`), so a CPU grid's wall time is known up front.

The probe (launch/probe_steps.py) builds the job's LoopedTransformer and its own optimizer (MuonH or AdamW, as
the run builds it), and times PROBE_STEPS forward + backward + optimizer steps on random tokens at the job's
device batch and sequence length (after one untimed warm-up step), with the job's torch threads: tokens/s of
the model step alone (data loading, Lightning's loop, logging and validation are extra; `loopscale plan` adds
them).

Measured under the pool's own conditions: inside `pool_contention(workers, threads)`, a probe runs while workers -
1 other processes train a model too, as the pool's other workers will (on a 2-core machine two workers share the
cores with everything else running there), and those processes' start (spawn, torch, Lightning, Hydra, loopscale)
is timed as a worker's start. A measurement is cached per machine, in $LOOPSCALE_CACHE or ~/.cache/loopscale
(throughput.json; loopscale/cache_home.py), keyed by host name, torch version, threads, the processes around it and
the model's shape and batch, with the core share it got (CPU seconds per wall second): tokens/s and share were
measured together, so a later plan scales the cached numbers to its own load (loopscale/launch/wall_time.py)
instead of measuring again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib.metadata
import json
import multiprocessing
import os
import socket
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from loopscale.atomic import write_json_atomic
from loopscale.cache_home import cache_dir
from loopscale.config.schema import TrainConfig

CACHE_FILE = "throughput.json"


class ProbeKey(TypedDict):
    """What a probe's measurement depends on (`probe_key`); in the cache also the processes around it."""

    host: str
    torch: str
    threads: int
    model: dict[str, Any]  # every field of the ModelConfig (dataclasses.asdict)
    device_batch: int
    optimizer: str
    precision: str
    processes: NotRequired[int]


class StartKey(TypedDict):
    """What a pool worker's start depends on (`worker_start_s`): the processes started together, not threads."""

    host: str
    torch: str
    worker_start: bool
    processes: int


class ProbeEntry(TypedDict):
    """A probe in the cache: tokens/s and the core share measured together, what the probe cost, when, its key."""

    tokens_per_s: float
    share: float
    probe_s: float
    measured: float  # time.time()
    key: ProbeKey


class StartEntry(TypedDict):
    """A worker start in the cache: its seconds and the core share the probes got meanwhile, its key."""

    start_s: float
    share: float
    key: StartKey


Cache = dict[str, ProbeEntry | StartEntry]  # throughput.json by key hash, read unchecked: each reader tests its numbers


@dataclass(frozen=True)
class Throughput:
    tokens_per_s: float
    probe_s: float  # what the measurement cost (0 when it came from the cache)
    cached: bool
    core_share: float = 1.0  # CPU seconds per wall second the probe got: below 1 on a busy machine


_SHARES: list[float] = []  # the core share of every probe this process measured or read (core_share)


def probe_shares() -> list[float]:
    """The core share of each probe this process measured or read, in the order they were asked for."""
    return list(_SHARES)


def core_share() -> float | None:
    """The median core share of this process's probes (CPU seconds per wall second): what any CPU-bound
    work of the pool (a job's set-up, tokenizing) gets of a core now; None before any probe."""
    return statistics.median(_SHARES) if _SHARES else None


_MEASURED: dict[tuple[str, str], tuple[float, float]] = {}  # this process's measurements by (cache file, key hash):
# a probe's (tokens/s, share), a worker start's (start_s, share)


def _torch_version() -> str:
    """torch's version as installed (its distribution's metadata, the string torch.__version__ reports), read
    without importing torch: a cached measurement, `sweep` and `plan` stay torch-free."""
    return importlib.metadata.version("torch")


def probe_key(cfg: TrainConfig, device_batch: int, threads: int) -> ProbeKey:
    """What a measurement depends on: the machine, torch, threads, the model's shape and the batch."""
    return ProbeKey(
        host=socket.gethostname(),
        torch=_torch_version(),
        threads=threads,
        model=dataclasses.asdict(cfg.model),
        device_batch=device_batch,
        optimizer=cfg.optim.optimizer,
        precision=cfg.trainer.precision,
    )


def _key_hash(key: ProbeKey | StartKey) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:24]


def _read_cache(path: Path) -> Cache:
    try:
        cache = json.loads(path.read_text())
    except (OSError, ValueError):  # none yet, or cut: measured again
        return {}
    return cache if isinstance(cache, dict) else {}


def cached_throughput(cfg: TrainConfig, device_batch: int, threads: int, use_cache: bool = True) -> Throughput | None:
    """The job's CPU tokens/s as measured before (in this process, or in the machine's cache), or None: nothing is
    measured. A sweep's start order reads it (`compile_order`), so the pool's parent never loads torch."""
    _, digest, path, use_cache = _probe_slot(cfg, device_batch, threads, use_cache)
    memo = (str(path), digest)
    if memo in _MEASURED:  # measured earlier in this process (an unwritable cache must not mean re-measuring)
        tokens_per_s, share = _MEASURED[memo]
        _SHARES.append(share)
        return Throughput(tokens_per_s, 0.0, True, share)
    hit = (_read_cache(path) if use_cache else {}).get(digest)
    numbers = isinstance(hit, dict) and all(isinstance(hit.get(k), (int, float)) for k in ("tokens_per_s", "share"))
    if numbers:
        _SHARES.append(float(hit["share"]))
        return Throughput(float(hit["tokens_per_s"]), 0.0, True, float(hit["share"]))
    return None


def cpu_throughput(cfg: TrainConfig, device_batch: int, threads: int, use_cache: bool = True) -> Throughput:
    """The job's CPU tokens/s and the core share it was measured at: from the machine's cache, else measured now,
    inside the pool's contention when pool_contention is active (and cached)."""
    known = cached_throughput(cfg, device_batch, threads, use_cache)
    if known is not None:
        return known
    key, digest, path, use_cache = _probe_slot(cfg, device_batch, threads, use_cache)
    memo = (str(path), digest)
    _CONTENTION.start()
    started = time.perf_counter()
    from loopscale.launch.probe_steps import measure  # torch and the model: only when a probe runs

    tokens_per_s, share = measure(cfg, device_batch, threads)
    probe_s = time.perf_counter() - started
    _MEASURED[memo] = (tokens_per_s, share)
    _SHARES.append(share)
    entry = ProbeEntry(tokens_per_s=tokens_per_s, share=share, probe_s=probe_s, measured=time.time(), key=key)
    _cache_put(path, use_cache, digest, entry)
    return Throughput(tokens_per_s, probe_s, False, share)


def _probe_slot(
    cfg: TrainConfig, device_batch: int, threads: int, use_cache: bool
) -> tuple[ProbeKey, str, Path | None, bool]:
    """(the probe's key, its digest, the cache file, whether it is used): one place, so a lookup and the probe that
    fills it cannot disagree on where a measurement lives."""
    key = ProbeKey(**probe_key(cfg, device_batch, threads), processes=_CONTENTION.workers)
    path, use_cache = _cache_path(use_cache)
    return key, _key_hash(key), path, use_cache


def _cache_path(use_cache: bool) -> tuple[Path | None, bool]:
    try:
        return cache_dir() / CACHE_FILE, use_cache
    except (RuntimeError, KeyError):  # no home directory (a container's anonymous user): nothing on disk
        return None, False


def _cache_put(path: Path | None, use_cache: bool, digest: str, entry: ProbeEntry | StartEntry) -> None:
    if not use_cache:
        return
    cache = _read_cache(path)  # another plan may have added entries meanwhile
    cache[digest] = entry
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(path, cache)
    except OSError:  # a read-only home: the estimate stands, only the next plan measures again
        pass


def worker_start_s(threads: int, use_cache: bool = True) -> tuple[float, float]:
    """(seconds a pool worker takes to start: spawn; torch, Lightning, Hydra and loopscale imported; a model
    built and stepped once, the core share the probes got meanwhile): measured as the pool's other processes
    start, so under the same load, and cached per machine like a probe, and in this process. The key is the
    number of processes that started together (a pool of one or two workers starts one: the same
    measurement), not `threads`: a start is imports, one step of a tiny model is noise in it. With one worker,
    one such process is started and timed alone, only when the start is not known yet."""
    started_together = max(1, _CONTENTION.workers - 1)
    key = StartKey(host=socket.gethostname(), torch=_torch_version(), worker_start=True, processes=started_together)
    digest = _key_hash(key)
    path, use_cache = _cache_path(use_cache)
    memo = (str(path), digest)
    if memo in _MEASURED:
        return _MEASURED[memo]
    hit = (_read_cache(path) if use_cache else {}).get(digest)
    if isinstance(hit, dict) and all(isinstance(hit.get(k), (int, float)) for k in ("start_s", "share")):
        return float(hit["start_s"]), float(hit["share"])
    _CONTENTION.start(timing=True)
    _MEASURED[memo] = (_CONTENTION.start_s, core_share() or 1.0)
    _cache_put(path, use_cache, digest, StartEntry(start_s=_MEASURED[memo][0], share=_MEASURED[memo][1], key=key))
    return _MEASURED[memo]


class _Contention:
    """The processes that keep the other cores as busy as the pool's other workers will, while a probe runs
    (pool_contention); started on the first probe that is not a cache hit."""

    def __init__(self):
        self.workers, self.threads = 1, 1
        self.procs: list = []
        self.stop = None
        self.start_s = 0.0

    def start(self, timing: bool = False) -> None:
        """Start the other workers' stand-ins (once), timing their start; with one worker there is nothing to
        keep busy, and one process is started only when `timing` asks for a worker's start."""
        if self.procs or self.stop is not None or (self.workers <= 1 and not timing):
            return
        from loopscale.launch.probe_steps import stand_in_worker  # what a worker imports: only when one starts

        context = multiprocessing.get_context("spawn")
        self.stop = context.Event()
        if self.workers <= 1:  # nothing to keep busy: one process only to time a worker's start
            self.stop.set()
        started = time.perf_counter()
        ready = []
        for _ in range(max(1, self.workers - 1)):
            ours, theirs = context.Pipe(duplex=False)
            args = (theirs, self.stop, self.threads, os.getpid())
            proc = context.Process(target=stand_in_worker, args=args, daemon=True)
            proc.start()
            theirs.close()
            self.procs.append(proc)
            ready.append(ours)
        for conn in ready:  # each says so once it has imported everything and trained a first step
            try:
                conn.recv()
            except EOFError:  # it died: the probe runs with less contention than the pool will have
                pass
            conn.close()
        self.start_s = time.perf_counter() - started

    def close(self) -> None:
        if self.stop is not None:
            self.stop.set()
        for proc in self.procs:
            proc.join(10)
            if proc.is_alive():
                proc.kill()
                proc.join()
        self.procs, self.stop = [], None


_CONTENTION = _Contention()


@contextlib.contextmanager
def pool_contention(workers: int, threads: int) -> Iterator[None]:
    """Within the block, probes that are not cache hits run while workers - 1 other processes of `threads`
    torch threads train a model, as the pool's other workers will (module docstring); they end with it."""
    _CONTENTION.workers, _CONTENTION.threads = max(1, workers), threads
    try:
        yield
    finally:
        _CONTENTION.close()
        _CONTENTION.workers, _CONTENTION.threads = 1, 1
