"""`collect` sees every run once: it follows symlinked run dirs, reports copies and repeated points, lists
records it cannot read or trust as problem runs (one bad run.json never breaks the table), and replaces
runs.csv / runs.parquet / _problems.csv together or not at all. Real files; the command in-process
(support.cli.run_cli), and as a real process where a signal reaches it."""

from __future__ import annotations

import json
import shutil
import signal
import sys

import pandas as pd
import pytest

from loopscale.train.collect import collect
from loopscale.train.run_json import TABLE_COLUMNS
from support.cli import run_cli
from support.fs import leftovers, small_tmpfs
from support.procs import finish, start, wait_until


def _record(name: str, i: int) -> dict:
    record = {col: float(10 + i) for col in TABLE_COLUMNS}
    record.update(r=1 + i % 2, status="done", recipe="baseline", run_name=name, injection=None, parent=None)
    return {**record, "run_dir": name, "identity": f"{i:016x}"}


def _sweep(root, n: int = 4):
    sweep = root / "sweep"
    for i in range(n):
        name = f"run{i:03d}"
        (sweep / name).mkdir(parents=True)
        (sweep / name / "run.json").write_text(json.dumps(_record(name, i)))
    return sweep


def _statuses(problems) -> dict[str, str]:
    return {p["run_dir"].rsplit("/", 1)[-1]: p["status"] for p in problems}


def test_a_run_moved_to_scratch_and_linked_back_is_collected(tmp_path):
    sweep = _sweep(tmp_path)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    shutil.move(sweep / "run002", scratch / "run002")
    (sweep / "run002").symlink_to(scratch / "run002")
    (sweep / "loop").symlink_to(sweep)  # a link cycle is walked once
    rows, problems = collect(sweep)
    assert sorted(r["run_name"] for r in rows) == ["run000", "run001", "run002", "run003"] and problems == []


def test_a_link_to_a_run_of_the_sweep_does_not_hide_the_run(tmp_path):
    # "alias" sorts before "run001" and a link in a subfolder is met before the folder it points into: the
    # real folders are still the rows, by their own paths, and the links add nothing
    sweep = _sweep(tmp_path)
    (sweep / "alias").symlink_to("run001")
    (sweep / "a_group").mkdir()
    (sweep / "a_group" / "run003").symlink_to(sweep / "run003")
    rows, problems = collect(sweep)
    assert sorted(r["run_dir"] for r in rows) == [str(sweep / f"run{i:03d}") for i in range(4)]
    assert problems == []


def test_a_copied_run_dir_is_a_problem_not_a_second_row(tmp_path):
    sweep = _sweep(tmp_path)
    shutil.copytree(sweep / "run001", sweep / "run001.bak")
    shutil.copytree(sweep / "run002", sweep / "old" / "run002")  # the same name elsewhere below the sweep
    rows, problems = collect(sweep)
    assert sorted(r["run_name"] for r in rows) == ["run000", "run001", "run002", "run003"]
    assert _statuses(problems) == {"run001.bak": "inconsistent", "run002": "copy"}
    assert "run001" in problems[0]["reason"] or "run001" in problems[1]["reason"]


@pytest.mark.parametrize(
    "content, status, says",
    [
        (b'{"status": "done", "L": 3.', "unreadable", "not valid JSON"),
        (b"[1, 2, 3]\n", "unreadable", "not a record"),
        (b'{"status": "done", "run_name": "caf\xe9"}', "unreadable", "not UTF-8"),
        (None, "unreadable", "is a link"),
        ("L", "inconsistent", "its L is 'abc'"),
        ("name", "inconsistent", "a copy, or a record moved here"),
        ("identity", "inconsistent", "identity"),
        ("bare", "inconsistent", "neither an identity nor a config"),
    ],
)
def test_a_bad_record_is_a_problem_run_and_the_others_are_collected(tmp_path, content, status, says):
    sweep = _sweep(tmp_path)
    bad = sweep / "run003" / "run.json"
    if content is None:
        bad.unlink()
        bad.symlink_to(sweep / "run000" / "run.json")  # a record pointing at another run's
    elif content == "L":
        bad.write_text(json.dumps({**_record("run003", 3), "L": "abc"}))
    elif content == "name":
        bad.write_text(json.dumps(_record("run009", 3)))
    elif content == "identity":
        (sweep / "run003" / "identity.json").write_text(json.dumps({"hash": "f" * 16, "identity": {"seed": 1}}))
    elif content == "bare":
        bad.write_text(json.dumps({k: v for k, v in _record("run003", 3).items() if k != "identity"}))
    else:
        bad.write_bytes(content)
    res = run_cli(["collect", sweep], cwd=tmp_path)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr[-3000:]
    assert len(pd.read_csv(sweep / "runs.csv")) == 3 and len(pd.read_parquet(sweep / "runs.parquet")) == 3
    problems = pd.read_csv(sweep / "runs_problems.csv")
    assert list(problems["status"]) == [status] and says in problems["reason"][0], problems.to_dict("records")
    status_res = run_cli(["status", sweep, "--json"], cwd=tmp_path)
    assert status_res.returncode == 0 and json.loads(status_res.stdout)["counts"][status] == 1


def test_collect_warns_about_repeated_points(tmp_path):
    sweep = _sweep(tmp_path, 2)
    twin = {**_record("run000", 0), "run_name": "twin", "identity": "e" * 16}  # another run, the same point
    (sweep / "twin").mkdir()
    (sweep / "twin" / "run.json").write_text(json.dumps(twin))
    res = run_cli(["collect", sweep], cwd=tmp_path)
    assert res.returncode == 0 and "appears 2 times" in res.stderr and "twin" in res.stderr, res.stderr


def test_collect_writes_the_curves_beside_the_runs(tmp_path):
    """One row per (run, evaluation) of each run's curve, with the run's model; a run without a curve (a
    record from before curves) has none; a forked branch's rows up to its fork are marked from_parent."""
    sweep = _sweep(tmp_path, 3)
    curve = [
        {"step": s, "tokens": 1024 * s, "lr": 0.01, "lr_multiplier": 1.0, "train_loss": 5.0, "val_loss": 5.1}
        for s in (1, 4, 8)
    ]
    for i, extra in ((0, {}), (1, {"fork_step": 4, "parent": "p"})):
        path = sweep / f"run{i:03d}" / "run.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), "curve": curve, **extra}))
    res = run_cli(["collect", sweep], cwd=tmp_path)
    assert res.returncode == 0 and "6 curve evaluations -> runs_curves.csv" in res.stdout, res.stdout
    table = pd.read_csv(sweep / "runs_curves.csv")
    assert list(table.groupby("run").step.apply(list)) == [[1, 4, 8], [1, 4, 8]]
    assert table[table.run == "run001"].from_parent.tolist() == [True, True, False]
    assert not table[table.run == "run000"].from_parent.any() and set(table.r) == {1, 2}


def _outputs(sweep):
    return {p: (sweep / p).read_bytes() for p in ("runs.csv", "runs.parquet", "runs_problems.csv")}


def test_a_full_disk_replaces_none_of_the_three_outputs(tmp_path):
    sweep = _sweep(tmp_path, 300)
    with small_tmpfs(tmp_path / "disk", "1m") as disk:
        first = run_cli(["collect", sweep, "--out", disk / "runs.csv"], cwd=tmp_path)
        assert first.returncode == 0, first.stderr
        before = _outputs(disk)
        (sweep / "run000" / "run.json").write_text(json.dumps({**_record("run000", 0), "L": 99.0}))
        free = shutil.disk_usage(disk).free
        # room for a new runs.csv but not for the parquet beside it (what left a new CSV with a stale
        # parquet before)
        (disk / "filler").write_bytes(b"\0" * (free - len(before["runs.csv"]) - 8192))
        res = run_cli(["collect", sweep, "--out", disk / "runs.csv"], cwd=tmp_path)
        assert res.returncode == 1 and "nothing was replaced" in res.stderr, res.stderr[-2000:]
        assert _outputs(disk) == before and leftovers(disk) == []


@pytest.mark.system
def test_sigterm_while_collect_writes_leaves_no_temporary_file(tmp_path):
    """SIGTERM arrives while collect writes its outputs (a hook pauses it there, after the CSV's temporary
    file is complete): it exits 143 and leaves the old outputs and no temporary file."""
    sweep = _sweep(tmp_path, 3)
    assert run_cli(["collect", sweep], cwd=tmp_path).returncode == 0
    before = _outputs(sweep)
    (sweep / "run000" / "run.json").write_text(json.dumps({**_record("run000", 0), "L": 99.0}))
    flag = tmp_path / "writing"
    code = (
        "import signal, sys, pandas as pd\n"
        "def paused(self, *a, **k):\n"
        f"    open({str(flag)!r}, 'w').close(); signal.pause()\n"
        "pd.DataFrame.to_parquet = paused\n"
        "from loopscale.cli import main\n"
        f"sys.exit(main(['collect', {str(sweep)!r}]))\n"
    )
    proc = start([sys.executable, "-c", code], tmp_path)
    wait_until(proc, lambda _: flag.exists())
    assert list(sweep.glob(".runs.*.tmp.csv"))  # the new CSV waits beside the old one
    proc.send_signal(signal.SIGTERM)
    rc, _, out = finish(proc, 0.0)
    assert rc == 143 and out.strip().splitlines()[-1] == "loopscale collect: terminated", out[-2000:]
    assert _outputs(sweep) == before and leftovers(sweep) == []


def test_collect_counts_seeds_and_does_not_warn_about_seed_replicates(tmp_path):
    sweep = _sweep(tmp_path, 2)
    other_seed = {**_record("run000", 0), "run_name": "seed1", "identity": "d" * 16, "seed": 99.0, "L": 9.5}
    (sweep / "seed1").mkdir()
    (sweep / "seed1" / "run.json").write_text(json.dumps(other_seed))
    res = run_cli(["collect", sweep], cwd=tmp_path)
    assert res.returncode == 0 and "appears" not in res.stderr, res.stderr
    assert "2 points: 1 with 1 seed, 1 with 2 seeds" in res.stdout, res.stdout
    assert sorted(pd.read_csv(sweep / "runs.csv")["seed"]) == [10.0, 11.0, 99.0]
