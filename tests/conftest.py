"""Shared test setup. Tests run on CPU with small shapes; nothing here reaches a network.

Three tiers, one folder each; the folder marks every test in it (`-m unit`, `-m integration`, `-m system`):
- tests/unit/: one module's behaviour in this process: no prepared corpus, no training run, no loopscale
  child process (a fresh interpreter only where what an import loads is the point). `make test-unit`, under
  3 minutes on two cores.
- tests/integration/: the stages together in this process: the prepared corpus, training through
  run_training, the `loopscale` command through loopscale.cli.main (support.cli.run_cli).
- tests/system/: the programs as a user or a scheduler runs them: child processes, signals, the SLURM test
  cluster, the wheel, DDP over processes, one smoke run of each command (test_commands.py). A test that
  starts a process but belongs beside the in-process tests of its topic stays there, marked
  `@pytest.mark.system`.
`slow` marks the long checks of any tier (`make test-slow`); the default suite (`make test`) is the rest.

Fixtures and helpers live in the package tests/support/ (importable as `support`: pyproject.toml's pytest
`pythonpath`). Its plugin modules, named in `pytest_plugins` below, provide the fixtures (data_dir,
default_cfg, default_prepared, small_packed; slurm_cluster, slurm_two_nodes; table, fit, baseline): tests
name them as arguments and never import them. Helpers (TINY, run_cli, run_loopscale, small_tmpfs, ...) are
imported from their module.
"""

import os
from pathlib import Path

import pytest

from loopscale.machine import usable_cores
from support.paths import REPO_ROOT

pytest_plugins = ["support.corpus", "support.slurm", "support.fit_fixtures"]

# No test may reach the HF hub or W&B servers.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")
os.environ.setdefault("MPLBACKEND", "Agg")

# pytest-xdist workers share the machine's cores: each worker (and every process it starts) gets its share of
# threads, set before anything imports torch or numpy. OpenMP threads spin while they wait, so two workers of
# two threads each on two cores made a training test ~4x slower (64 s against 17 s, two at once, measured).
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1:
    _SHARE = str(max(1, usable_cores() // _WORKERS))
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, _SHARE)

TIERS = ("unit", "integration", "system")


def pytest_collection_modifyitems(config, items):
    """Every test gets the marker of its tier: the folder it lives in, unless the test names its tier itself
    (`@pytest.mark.system` on a test that starts a process, kept in an integration module of its topic)."""
    tests = REPO_ROOT / "tests"
    for item in items:
        path = Path(item.path)
        if any(item.get_closest_marker(tier) for tier in TIERS):
            continue  # marked by hand: a test of another tier kept beside the tests of its topic
        if path.is_relative_to(tests) and path.relative_to(tests).parts[0] in TIERS:
            item.add_marker(path.relative_to(tests).parts[0])


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session", autouse=True)
def submitit_dir(tmp_path_factory) -> Path:
    """submitit's folder for every launcher the tests start (LOOPSCALE_SUBMITIT_DIR, read by
    conf/hydra/launcher/*.yaml): a private tmp dir, not the user's ~/.loopscale/submitit."""
    folder = tmp_path_factory.mktemp("submitit")
    os.environ.setdefault("LOOPSCALE_SUBMITIT_DIR", str(folder))
    return folder


@pytest.fixture(scope="session", autouse=True)
def throughput_cache_dir(tmp_path_factory) -> Path:
    """The CPU throughput probe's cache for every `plan` / `sweep` the tests run (LOOPSCALE_CACHE, read by
    loopscale/launch/throughput.py): a session tmp dir, not the user's ~/.cache/loopscale."""
    folder = tmp_path_factory.mktemp("loopscale_cache")
    os.environ["LOOPSCALE_CACHE"] = str(folder)
    return folder
