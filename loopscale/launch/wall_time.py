"""How long a sweep takes on the local pool (hydra/launcher=local_pool): jobs handed out in order, each to the
first worker that is free, as loopscale/launch/local_workers.py does. One rule for `loopscale plan`'s estimate
before the sweep and the pool's ETA during it (pool_launcher.py); pure, no torch.

Dividing the total by the workers is wrong whenever jobs do not split evenly: 3 equal jobs on 2 workers take
2 job-lengths, not 1.5. The list schedule below is what the pool really does (longest first), so its end is the
sweep's wall time given each job's duration. A job's duration is its training at the probed speed
(loopscale/launch/throughput.py: the job's model and optimizer, measured while the pool's other workers are
busy) plus its own set-up and validation; the sweep adds the workers' start and a first tokenizing.
"""

from __future__ import annotations

import heapq
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from omegaconf import OmegaConf

from loopscale.config.dirs import compose
from loopscale.data.corpus import _shakespeare_files, _text_files
from loopscale.data.shards import cache_key


def list_schedule_s(durations_s: Sequence[float], workers: int, busy_s: Sequence[float] = ()) -> float:
    """When the last job ends: `durations_s` handed out in order, each to the first of `workers` workers that
    is free; `busy_s` are the seconds the workers already running a job still need (the ETA of a sweep under
    way; at most `workers` of them)."""
    if workers < 1:
        raise ValueError(f"workers={workers}: at least one")
    free = [float(b) for b in busy_s][:workers] + [0.0] * max(0, workers - len(busy_s))
    heapq.heapify(free)
    for duration in durations_s:
        heapq.heappush(free, heapq.heappop(free) + float(duration))
    return max(free)


# CPU seconds measured on this machine's cores (benchmarks/bench_plan_estimate.py prints the measurement), turned
# into wall seconds by the core share the probes got (throughput.core_share), so a busier machine stretches them:
JOB_SETUP_CPU_S = 1.0  # a job's own start in its worker: Hydra's job set-up, data opened, model and Trainer built
POINT_CPU_S = 0.5  # each point's final validation and record (a forked job has one per cooldown branch)
TOKENIZE_CPU_S_PER_MB = 1.4  # training the BPE and tokenizing a local corpus, per MB of text


@dataclass(frozen=True)
class PoolPlan:
    """The local pool a sweep will run on, and what was measured about this machine for it."""

    workers: int
    threads: int
    start_s: float = 0.0  # a worker's start (spawn, imports), at the expected core share
    core_share: float = 1.0  # CPU seconds each of the pool's processes will get per wall second (expected_share)
    tokenize_s: float = 0.0  # the first preparation of a corpus not in the data cache yet (each worker's)
    speed_scale: float = 1.0  # the probes' core share / core_share: their wall times scaled to the sweep's
    load: float = 0.0  # what others loaded the machine with when the plan started (others_load)


def others_load(sample_s: float = 0.5) -> float:
    """What other work loads the machine with as the plan starts: the 1-minute load average, or the CPUs busy over
    the last `sample_s` when fewer are. The average decays over minutes, so right after a sweep ends it still
    counts that sweep (1.3 on an idle 2-core machine: a core share of 0.60 where the sweep then got ~1, and an
    estimate 1.55x the wall time; benchmarks/bench_plan_estimate.py); steady competing work shows in both."""
    average = os.getloadavg()[0]
    busy = busy_cpus(sample_s)
    return average if busy is None else min(average, busy)


def busy_cpus(sample_s: float) -> float | None:
    """How many CPUs were busy (not idle, not waiting on I/O) over the next `sample_s` seconds, from /proc/stat's
    all-CPU line; None where there is no /proc/stat."""
    try:
        before = _cpu_jiffies()
        time.sleep(sample_s)
        after = _cpu_jiffies()
    except (OSError, ValueError, IndexError):
        return None
    busy, total = after[0] - before[0], after[1] - before[1]
    return None if total <= 0 else busy / total * (os.cpu_count() or 1)


def _cpu_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs since boot (fields 4 and 5 of the line: idle and iowait)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return sum(fields) - fields[3] - fields[4], sum(fields)


def expected_share(load: float, workers: int, threads: int, cores: int) -> float:
    """The core share each of the pool's processes will get: the machine's cores over everything that will
    want one, the load before the plan (`others_load`: the other users' work, the 1-minute average unless the
    CPUs are idler now, a better guide to the next minutes than the probe's own second) plus the pool's workers
    x threads."""
    return min(1.0, cores / max(float(cores), load + workers * threads))


def job_wall_s(train_s: float, points: int, pool: PoolPlan) -> float:
    """One job on a worker: its training (`train_s`: the probed, contended speed, at the pool's core share),
    plus its own set-up and each point's validation at that share."""
    return train_s + (JOB_SETUP_CPU_S + POINT_CPU_S * points) / pool.core_share


def pool_wall_s(train_s: Sequence[float], points: Sequence[int], pool: PoolPlan) -> float:
    """The sweep's wall time on the pool: the launcher's start and the workers' (both about a worker's start:
    the same imports), the first tokenizing of the corpus, and the jobs handed out longest first (as the pool
    does) to the first free worker."""
    jobs = sorted((job_wall_s(t, p, pool) for t, p in zip(train_s, points)), reverse=True)
    workers_start_s = pool.start_s if pool.workers > 1 else 0.0  # one worker: the jobs run in the launcher
    return pool.start_s + workers_start_s + pool.tokenize_s + list_schedule_s(jobs, pool.workers)


def tokenize_cpu_s(overrides: Sequence[str]) -> float:
    """CPU seconds of preparing the sweep's corpus when the data cache does not hold it yet (a local corpus:
    the Shakespeare plays or text files, by size); 0 when it does, or for a hub dataset (not estimated)."""
    fixed = [o for o in overrides if "," not in o.split("=", 1)[-1]]  # one job's data: sweeps vary the rest
    data = OmegaConf.to_object(compose(fixed)).data
    if data.format != "windows" or (Path(data.data_dir).expanduser() / cache_key(data) / "meta.json").is_file():
        return 0.0
    if data.source == "shakespeare":
        files = _shakespeare_files()
    elif data.source == "text":
        files = _text_files(data.path)
    else:
        return 0.0
    return TOKENIZE_CPU_S_PER_MB * sum(f.stat().st_size for f in files) / 1e6
