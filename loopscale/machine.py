"""What this process may use of the machine: the cores it may run on. One rule for every pool loopscale starts
(the bootstrap's `--jobs`, `hydra/launcher=local_pool`, the CPU estimates of `plan` / `sweep`)."""

from __future__ import annotations

import os


def usable_cores() -> int:
    """Cores this process may run on (its affinity mask: a SLURM allocation or taskset), else all; at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)
