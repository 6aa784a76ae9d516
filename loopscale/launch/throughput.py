"""CPU training throughput of a job's actual model, measured on this machine before a sweep is launched
(`loopscale plan` / `loopscale sweep`), so a CPU grid's wall time is known up front.

The probe builds the job's LoopedTransformer, and times PROBE_STEPS forward + backward + AdamW steps on
random tokens at the job's device batch and sequence length (after one untimed warm-up step), with the
job's torch threads: tokens/s of the model step alone (data loading, logging and validation are extra, a
few percent for these shapes). It is cached per machine, in $LOOPSCALE_CACHE or ~/.cache/loopscale
(throughput.json; loopscale/cache_home.py), keyed by host name, torch version, threads and the model's shape
and batch: a second plan of the same grid measures nothing.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loopscale.cache_home import cache_dir
from loopscale.config.schema import TrainConfig

PROBE_STEPS = 3  # timed optimizer steps after one warm-up: ~0.1-2 s for the CPU grids' shapes
CACHE_FILE = "throughput.json"


@dataclass(frozen=True)
class Throughput:
    tokens_per_s: float
    probe_s: float  # what the measurement cost (0 when it came from the cache)
    cached: bool


_MEASURED: dict[tuple[str, str], float] = {}  # this process's measurements by (cache file, key hash)


def probe_key(cfg: TrainConfig, device_batch: int, threads: int) -> dict[str, Any]:
    """What a measurement depends on: the machine, torch, threads, the model's shape and the batch."""
    import torch

    return {
        "host": socket.gethostname(),
        "torch": torch.__version__,
        "threads": threads,
        "model": dataclasses.asdict(cfg.model),
        "device_batch": device_batch,
        "optimizer": cfg.optim.optimizer,
        "precision": cfg.trainer.precision,
    }


def _key_hash(key: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:24]


def _read_cache(path: Path) -> dict[str, Any]:
    try:
        cache = json.loads(path.read_text())
    except (OSError, ValueError):  # none yet, or cut: measured again
        return {}
    return cache if isinstance(cache, dict) else {}


def measure_tokens_per_s(cfg: TrainConfig, device_batch: int, threads: int, steps: int = PROBE_STEPS) -> float:
    """Tokens per second of `steps` training steps of cfg's model on this CPU (module docstring)."""
    import torch

    from loopscale.model.transformer import LoopedTransformer

    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        torch.manual_seed(0)
        model = LoopedTransformer(cfg.model)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        shape = (device_batch, cfg.model.seq_len)
        idx = torch.randint(0, cfg.model.vocab_size, shape)
        targets = torch.randint(0, cfg.model.vocab_size, shape)

        def step() -> None:
            model(idx, targets).backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        step()  # warm-up: allocations and first-call dispatch
        started = time.perf_counter()
        for _ in range(steps):
            step()
        return steps * device_batch * cfg.model.seq_len / (time.perf_counter() - started)
    finally:
        torch.set_num_threads(previous)


def cpu_throughput(cfg: TrainConfig, device_batch: int, threads: int, use_cache: bool = True) -> Throughput:
    """The job's CPU tokens/s: from the machine's cache, else measured now (and cached)."""
    from loopscale.atomic import write_json_atomic

    key = probe_key(cfg, device_batch, threads)
    digest = _key_hash(key)
    try:
        path = cache_dir() / CACHE_FILE
    except (RuntimeError, KeyError):  # no home directory (a container's anonymous user): nothing on disk
        path, use_cache = None, False
    memo = (str(path), digest)
    if memo in _MEASURED:  # measured earlier in this process (an unwritable cache must not mean re-measuring)
        return Throughput(_MEASURED[memo], 0.0, True)
    cache = _read_cache(path) if use_cache else {}
    hit = cache.get(digest)
    if isinstance(hit, dict) and isinstance(hit.get("tokens_per_s"), (int, float)):
        return Throughput(float(hit["tokens_per_s"]), 0.0, True)
    started = time.perf_counter()
    tokens_per_s = measure_tokens_per_s(cfg, device_batch, threads)
    probe_s = time.perf_counter() - started
    _MEASURED[memo] = tokens_per_s
    if use_cache:
        cache = _read_cache(path)  # another plan may have added entries meanwhile
        cache[digest] = {"tokens_per_s": tokens_per_s, "probe_s": probe_s, "measured": time.time(), "key": key}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_json_atomic(path, cache)
        except OSError:  # a read-only home: the estimate stands, only the next plan measures again
            pass
    return Throughput(tokens_per_s, probe_s, False)
