"""A real SLURM cluster for tests (one node; two for the multi-node tests), and helpers to submit, wait for
and requeue jobs. A pytest plugin (tests/conftest.py registers it): the fixtures `slurm_cluster` and
`slurm_two_nodes` need no import; the helpers are imported.

Use it from a test module:

    from support.slurm import submit, wait_for_jobs

    pytestmark = pytest.mark.slurm

    def test_something(slurm_cluster, tmp_path):
        job = submit(["--wrap", "hostname"], cwd=tmp_path)
        assert wait_for_jobs([job], timeout_s=60) == {job: "COMPLETED"}

The session fixture `slurm_cluster` runs `slurm/cluster.sh start` (which writes /etc/slurm/slurm.conf
and starts munged, slurmctld and slurmd; it needs root and the packages of slurm/install.sh) unless a
cluster is already up, and stops the cluster at the end of the session only if it started it. When
the cluster cannot be started the tests that use the fixture are skipped with the reason, unless
LOOPSCALE_REQUIRE_SLURM=1 (set by CI), in which case they fail.

There is no slurmdbd, hence no sacct: job states come from `scontrol show job`, which keeps finished
jobs for MinJobAge (10 minutes in the test cluster's slurm.conf).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.paths import REPO_ROOT

CLUSTER_SH = REPO_ROOT / "slurm" / "cluster.sh"

# States after which a job will not run again by itself (see `man squeue`, JOB STATE CODES).
TERMINAL_STATES = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "BOOT_FAIL",
        "DEADLINE",
        "PREEMPTED",
        "SPECIAL_EXIT",
    }
)


@dataclass(frozen=True)
class SlurmCluster:
    """What a test needs to know about the running cluster."""

    node: str
    partition: str
    cpus: int
    memory_mb: int
    started_here: bool  # True when this pytest session started it (and will stop it)


def run_cluster_sh(action: str, *args: str, timeout_s: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(CLUSTER_SH), action, *args], capture_output=True, text=True, timeout=timeout_s)


def _unavailable(reason: str) -> None:
    """Skip, or fail when CI demands a cluster (LOOPSCALE_REQUIRE_SLURM=1)."""
    if os.environ.get("LOOPSCALE_REQUIRE_SLURM") == "1":
        pytest.fail(f"SLURM test cluster required (LOOPSCALE_REQUIRE_SLURM=1) but unavailable: {reason}")
    pytest.skip(f"SLURM test cluster unavailable: {reason}")


def _cluster_info(started_here: bool) -> SlurmCluster:
    # One line for the default partition's node: name, partition (default marked '*'), CPUs, MB.
    out = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %P %c %m"], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        node, partition, cpus, mem = line.split()
        if partition.endswith("*"):
            return SlurmCluster(node, partition.rstrip("*"), int(cpus), int(mem), started_here)
    raise RuntimeError(f"no default partition in sinfo output:\n{out}")


@pytest.fixture(scope="session")
def slurm_cluster():
    """A running one-node SLURM cluster (started by slurm/cluster.sh if none is up; a running multi-node
    one is switched back to the default single node)."""
    if shutil.which("sbatch") is None:
        _unavailable("sbatch not found; run `bash slurm/install.sh` (root, apt) first")
    started_now = False
    if run_cluster_sh("status", timeout_s=30).returncode != 0:
        if os.geteuid() != 0:
            _unavailable("slurm/cluster.sh start needs root (slurmd runs as root)")
        started = run_cluster_sh("start")
        if started.returncode != 0:
            _unavailable(f"`bash slurm/cluster.sh start` failed:\n{started.stderr[-3000:]}")
        started_now = True
    elif len(_node_names()) != 1:
        _set_node_count(1)
    try:
        yield _cluster_info(started_here=started_now)
    finally:
        if started_now:
            run_cluster_sh("stop")


def _node_names() -> list[str]:
    out = subprocess.run(["sinfo", "-h", "-N", "-o", "%N"], capture_output=True, text=True, timeout=30).stdout
    return sorted(set(out.split()))


def _set_node_count(nodes: int, drain_timeout_s: float = 60) -> None:
    """Restart the running cluster with `nodes` nodes. slurm/cluster.sh refuses while jobs are queued,
    running or completing, so wait for the last test's jobs to leave the queue first."""
    if os.geteuid() != 0:
        _unavailable(f"slurm/cluster.sh start --nodes {nodes} needs root (slurmd runs as root)")
    deadline = time.monotonic() + drain_timeout_s
    while subprocess.run(["squeue", "-h"], capture_output=True, text=True, timeout=30).stdout.strip():
        if time.monotonic() > deadline:
            break  # cluster.sh then says which jobs are in the way
        time.sleep(0.5)
    started = run_cluster_sh("start", "--nodes", str(nodes))
    if started.returncode != 0:
        _unavailable(f"`bash slurm/cluster.sh start --nodes {nodes}` failed:\n{started.stderr[-3000:]}")


@pytest.fixture(scope="module")
def slurm_two_nodes(slurm_cluster):
    """The test cluster as two nodes of one CPU each (two slurmd daemons on this host), for one test
    module; the default single node is restored afterwards. Yields the node names."""
    _set_node_count(2)
    try:
        yield _node_names()
    finally:
        _set_node_count(1)


def submit(sbatch_args: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    """Run `sbatch --parsable ARGS` in cwd and return the job id."""
    out = subprocess.run(
        ["sbatch", "--parsable", *sbatch_args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if out.returncode != 0:
        raise RuntimeError(f"sbatch {sbatch_args} failed: {out.stderr}")
    return out.stdout.strip().split(";")[0]  # "id" or "id;cluster"


def job_records(job_id: str) -> dict[str, dict[str, str]]:
    """`scontrol show job -o` as {job id: fields}; an array job gives one entry per task, keyed
    `<array job id>_<task id>`. Empty when Slurm no longer knows the job."""
    out = subprocess.run(["scontrol", "show", "job", "-o", str(job_id)], capture_output=True, text=True, timeout=30)
    records = {}
    for line in out.stdout.splitlines():
        # Fields are space separated KEY=VALUE; values with spaces (Command, WorkDir) are not needed.
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        if "JobId" not in fields:
            continue
        task = fields.get("ArrayTaskId")
        key = f"{fields['ArrayJobId']}_{task}" if task not in (None, "N/A") else fields["JobId"]
        records[key] = fields
    return records


def job_states(job_id: str) -> dict[str, str]:
    return {key: rec["JobState"] for key, rec in job_records(job_id).items()}


def wait_for_jobs(job_ids: Iterable[str], timeout_s: float = 60, poll_s: float = 0.25) -> dict[str, str]:
    """Wait until every job (every task of an array job) is in a terminal state; return the states
    by job id (`<array id>_<task>` for array tasks). Raises TimeoutError with the last states."""
    job_ids = list(job_ids)
    deadline = time.monotonic() + timeout_s
    while True:
        states: dict[str, str] = {}
        for job_id in job_ids:
            found = job_states(job_id)
            states.update(found or {job_id: "UNKNOWN"})
        if all(s in TERMINAL_STATES for s in states.values()):
            return states
        if time.monotonic() > deadline:
            raise TimeoutError(f"jobs not finished after {timeout_s}s: {states}")
        time.sleep(poll_s)


def requeue(job_id: str, timeout_s: float = 60) -> None:
    """Requeue a running job and let it start again at once.

    `scontrol requeue` kills the job (SIGTERM, SIGKILL after KillWait) and puts it back as PENDING
    with a BeginTime about two minutes ahead; `StartTime=now` only takes once it is PENDING, so wait
    for that first. slurmd also revokes the killed instance's credential, and Slurm compares
    credential times in whole seconds: a relaunch within the same second as the requeue is killed
    with "Job credential revoked" (the job ends FAILED). So start it no earlier than the next second.
    """
    subprocess.run(["scontrol", "requeue", job_id], check=True, timeout=30)
    start_when_pending(job_id, timeout_s)


def start_when_pending(job_id: str, timeout_s: float = 60) -> None:
    """Wait until a requeued job is PENDING, then make it start at once (see `requeue`)."""
    deadline = time.monotonic() + timeout_s
    while True:
        state = job_states(job_id).get(job_id)
        if state == "PENDING":
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"job {job_id} not PENDING {timeout_s}s after requeue (state {state})")
        time.sleep(0.2)
    pending_second = int(time.time())
    while int(time.time()) <= pending_second:
        time.sleep(0.05)
    subprocess.run(["scontrol", "update", f"JobId={job_id}", "StartTime=now"], check=True, timeout=30)


def wait_for_file(pattern_dir: Path, pattern: str, timeout_s: float = 60) -> Path:
    """Wait until a file matching the glob appears in the directory; return the first match."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        matches = sorted(pattern_dir.glob(pattern))
        if matches:
            return matches[0]
        time.sleep(0.1)
    raise TimeoutError(f"no {pattern} in {pattern_dir} after {timeout_s}s")
