"""How long a sweep takes on the local pool (hydra/launcher=local_pool): jobs handed out in order, each to the
first worker that is free, as loopscale/launch/local_workers.py does. One rule for `loopscale plan`'s estimate
before the sweep and the pool's ETA during it (pool_launcher.py); pure, no torch.

Dividing the total by the workers is wrong whenever jobs do not split evenly: 3 equal jobs on 2 workers take
2 job-lengths, not 1.5. The list schedule below is what the pool really does (longest first), so its end is the
sweep's wall time given each job's duration.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence


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
