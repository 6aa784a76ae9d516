"""hydra/launcher=local_pool's defaults (loopscale/launch/pool_launcher.py): one single-thread worker per core,
cores // threads workers when threads are set, never more workers than jobs; nonsense refused in one line."""

from __future__ import annotations

import pytest

from loopscale.errors import ConfigError
from loopscale.launch.pool_launcher import pool_size
from loopscale.machine import usable_cores


@pytest.mark.parametrize(
    ("workers", "threads", "jobs", "cores", "expected"),
    [
        (None, None, 16, 8, (8, 1)),  # a worker per core, one thread each
        (None, 2, 16, 8, (4, 2)),  # cores // threads
        (None, None, 3, 8, (3, 1)),  # no idle workers
        (None, 16, 4, 8, (1, 16)),  # more threads than cores: still one worker
        (6, 1, 16, 2, (6, 1)),  # asked for: oversubscribing is the user's call
    ],
)
def test_pool_size(workers, threads, jobs, cores, expected):
    assert pool_size(workers, threads, jobs, cores) == expected


@pytest.mark.parametrize(("workers", "threads"), [(0, None), (None, -1), (-2, 1)])
def test_pool_size_refuses_nonsense(workers, threads):
    with pytest.raises(ConfigError, match="must be >= 1"):
        pool_size(workers, threads, 4, 8)


def test_usable_cores_is_this_process_s_affinity():
    assert 1 <= usable_cores() <= 4096
