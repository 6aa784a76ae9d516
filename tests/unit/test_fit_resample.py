"""loopscale/fit/resample.py: bootstrap replicates give the same numbers for a seed whatever the number of
worker processes (--jobs), cluster resampling draws whole clusters, and a bootstrap that lasts draws a
progress bar on the stream it is given. The tests with worker processes are marked system (they start
processes)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

from loopscale.fit import resample
from loopscale.fit.laws.registry import law_data_from_table
from loopscale.fit.optimize import fit_law
from loopscale.fit.runs_table import canonical_table
from support.cli import run_cli
from support.paths import FIXTURES
from support.procs import cmdline, tree

SMALL = FIXTURES / "looped_synthetic_small.csv"


@pytest.fixture(scope="module")
def state():
    table = canonical_table(pd.read_csv(SMALL), "looped")
    with np.errstate(all="ignore"):
        return fit_law(law_data_from_table(table, "looped"), "looped")[1]


def test_chunks_draw_their_own_weights_whole_clusters_at_a_time():
    inverse = np.array([0, 0, 1, 1, 1, 2, 3])
    w = resample.chunk_weights(5, 2, 8, len(inverse), inverse, 4)
    assert w.shape == (8, 7) and np.all(w[:, [0, 2, 5, 6]].sum(axis=1) == 4)  # 4 clusters drawn per replicate
    assert np.all(w[:, 0] == w[:, 1]) and np.all(w[:, 2] == w[:, 3]) and np.all(w[:, 3] == w[:, 4])
    assert np.array_equal(w, resample.chunk_weights(5, 2, 8, 7, inverse, 4))  # its own generator: (seed, chunk)
    assert not np.array_equal(w, resample.chunk_weights(5, 3, 8, 7, inverse, 4))
    assert not np.array_equal(w, resample.chunk_weights(6, 2, 8, 7, inverse, 4))  # --seed draws other replicates
    rows = resample.chunk_weights(0, 0, 4, 10, None, 0)
    assert np.all(rows.sum(axis=1) == 10)


def test_a_lasting_bootstrap_draws_a_progress_bar(state, monkeypatch):
    monkeypatch.setattr(resample, "PROGRESS_DELAY_S", 0.0)
    stream = io.StringIO()
    boot = resample.bootstrap(state, 40, seed=1, progress=stream, label="bootstrap")
    assert len(boot["params"]["phi"]) == 40
    drawn = stream.getvalue()
    assert "bootstrap:" in drawn and "/40 [" in drawn and "replicate/s" in drawn
    quiet = io.StringIO()
    monkeypatch.setattr(resample, "PROGRESS_DELAY_S", 60.0)
    resample.bootstrap(state, 8, seed=1, progress=quiet)  # over well before a minute: no bar
    assert quiet.getvalue() == ""


@pytest.mark.system
def test_the_replicates_are_the_same_whatever_the_number_of_processes(state):
    one = resample.bootstrap(state, 40, seed=3, jobs=1)
    three = resample.bootstrap(state, 40, seed=3, jobs=3)
    assert one["params"] == three["params"]
    assert np.array_equal(one["objective"], three["objective"])
    labels = state.data.N_once.round(-5)  # a few sizes: whole clusters at a time
    assert (
        resample.bootstrap(state, 20, seed=4, clusters=labels, jobs=1)["params"]
        == (resample.bootstrap(state, 20, seed=4, clusters=labels, jobs=2)["params"])
    )


@pytest.mark.system
def test_fit_jobs_option_writes_the_same_fit(tmp_path):
    outs = []
    for jobs in (1, 2):
        outs.append(tmp_path / f"jobs{jobs}.json")
        res = run_cli(["fit", SMALL, "--bootstrap", 24, "--no-profile", "--jobs", jobs, "--out", outs[-1]])
        assert res.returncode == 0, res.stderr
        assert res.stderr == ""  # no progress bar when stderr is not a terminal
    a, b = (json.loads(p.read_text()) for p in outs)
    assert a["bootstrap"]["params"] == b["bootstrap"]["params"] and a["ci95"] == b["ci95"]


def _fit_workers(tmp_path, *options: str, cores: set[int] | None = None) -> tuple[set[int], dict]:
    """`loopscale fit --bootstrap 160` in a child process (pinned to `cores` when given): the worker processes
    seen under it while it ran (polled from /proc; multiprocessing's helper processes left out) and its fit."""
    out = tmp_path / f"fit{len(list(tmp_path.glob('fit*.json')))}.json"
    args = [sys.executable, "-m", "loopscale", "fit", SMALL, "--bootstrap", "160", "--no-profile", *options]
    proc = subprocess.Popen(
        [*map(str, args), "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=(lambda: os.sched_setaffinity(0, cores)) if cores else None,
    )
    workers: set[int] = set()
    while proc.poll() is None:
        for pid in tree(proc.pid):
            line = " ".join(cmdline(pid))
            if line and "resource_tracker" not in line and "forkserver" not in line:
                workers.add(pid)
        time.sleep(0.01)
    printed = proc.communicate()[0]
    assert proc.returncode == 0, printed[-3000:]
    return workers, json.loads(out.read_text())


@pytest.mark.system
def test_jobs_runs_the_replicates_in_that_many_worker_processes_and_by_default_on_every_usable_core(tmp_path):
    """Equal numbers for any --jobs would also hold if --jobs were ignored: here the workers are seen. With
    --jobs 2, two worker processes; by default, one per core of the process's affinity mask (pinned to one
    core: none, the replicates run in the process itself)."""
    two, fit_two = _fit_workers(tmp_path, "--jobs", "2")
    assert len(two) == 2, two
    alone, fit_alone = _fit_workers(tmp_path, cores={min(os.sched_getaffinity(0))})
    assert alone == set()
    assert fit_alone["bootstrap"]["params"] == fit_two["bootstrap"]["params"]
    cores = os.sched_getaffinity(0)
    if len(cores) >= 2:  # the default: every usable core (10 chunks of 16 replicates: enough for 10 cores)
        pinned = set(sorted(cores)[:10])
        every, _ = _fit_workers(tmp_path, cores=pinned)
        assert len(every) == len(pinned), (every, pinned)


def test_jobs_are_capped_at_the_usable_cores():
    """Issue 57: `--jobs 24` started 24 workers on 2 cores (4.7 GB); more workers than cores only cost memory."""
    from loopscale.fit.resample import resolve_jobs
    from loopscale.machine import usable_cores

    assert resolve_jobs(24 * usable_cores()) == usable_cores() == resolve_jobs(None) == resolve_jobs(0)
    assert resolve_jobs(1) == 1
