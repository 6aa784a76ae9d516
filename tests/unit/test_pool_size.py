"""hydra/launcher=local_pool's defaults (loopscale/launch/pool_launcher.py): one single-thread worker per core,
cores // threads workers when threads are set, never more workers than jobs; nonsense refused in one line."""

from __future__ import annotations

import os

import pytest

from loopscale.errors import ConfigError
from loopscale.launch.pool_launcher import pool_size
from loopscale.machine import usable_cores
from support.procs import run_python


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


@pytest.mark.system
def test_usable_cores_is_the_affinity_mask_not_the_machine():
    """In a child pinned to one core (as taskset or a SLURM allocation pins it), one usable core, whatever
    the machine has; pinned to two, two; and the local pool sizes itself from it."""
    code = (
        "import os, sys; os.sched_setaffinity(0, {int(c) for c in sys.argv[1].split(',')}); "
        "from loopscale.machine import usable_cores; from loopscale.launch.pool_launcher import pool_size; "
        "print(usable_cores(), pool_size(None, None, 16, usable_cores())[0])"
    )
    cores = sorted(os.sched_getaffinity(0))
    for pinned in (cores[:1], cores[:2]):
        proc = run_python(["-c", code, ",".join(map(str, pinned))])
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert proc.stdout.split() == [str(len(pinned))] * 2
    assert usable_cores() == len(cores)  # this process: its own mask


def test_a_jobs_share_of_the_eta_is_its_training_tokens():
    """The pool's bar advances by each job's training tokens and hands out the longest first: a plain run's
    tokens, and for a forked job its parent's and every cooldown's (the demo's d16 r = 1 job: 1,127,424
    tokens, what `loopscale sweep` shows for it), not one unit per job."""
    from loopscale.launch.pool_launcher import job_tokens
    from support.train import TINY, compose_cfg

    assert job_tokens(compose_cfg(TINY)) == 30720
    assert job_tokens(compose_cfg([*TINY, "budget.tokens=5120"])) == 5120
    demo_d16 = compose_cfg(["experiment=isodepth_cpu_demo", "model.r=1", "point=C2.5e11_3.54e11-d16"])
    assert job_tokens(demo_d16) == 1_127_424
