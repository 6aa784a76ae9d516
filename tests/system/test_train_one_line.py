"""Issue 41 (17, 19): what a user mistypes or a machine refuses, each one line and a non-zero exit instead of a
traceback: an unsafe run or sweep name (Hydra's own error formatting broke on it), a runs dir on a read-only
mount met by a relaunch, a submitit folder others can write; and `plan` with a LOOPSCALE_CACHE that cannot
hold its cache. loopscale-train as a child process, `loopscale plan` in-process."""

from __future__ import annotations

import subprocess

import pytest

from support.cli import run_cli
from support.fs import small_tmpfs
from support.procs import run_loopscale
from support.train import TINY


def _only_line(proc, code: int) -> str:
    assert proc.returncode == code and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr[-3000:]
    return lines[0]


@pytest.mark.parametrize("args", [["run_name=../escape"], ["-m", "sweep=ok,../x", "seed=0,1"]])
def test_an_unsafe_name_is_one_line_and_nothing_is_written(tmp_path, data_dir, args):
    proc = run_loopscale(
        [*args, *TINY, f"runs_dir={tmp_path / 'runs'}", f"data.data_dir={data_dir}"],
        cwd=tmp_path,
        module="loopscale.train",
    )
    line = _only_line(proc, 2)
    assert line.startswith("loopscale-train: error: ") and "is not a safe name" in line, line
    assert not (tmp_path / "runs").exists()


def test_a_relaunch_on_a_read_only_runs_dir_is_one_line(tmp_path, data_dir):
    args = [*TINY, "budget.tokens=5120", f"data.data_dir={data_dir}"]
    with small_tmpfs(tmp_path / "mount", size="64m") as runs:
        first = run_loopscale([*args, f"runs_dir={runs}"], cwd=tmp_path, module="loopscale.train.entry")
        assert first.returncode == 0, first.stderr[-3000:]
        assert subprocess.run(["mount", "-o", "remount,ro", str(runs)]).returncode == 0
        for extra in ([], ["seed=3"], ["-m", "seed=0,1", "hydra/launcher=local_pool"]):
            proc = run_loopscale([*extra, *args, f"runs_dir={runs}"], cwd=tmp_path, module="loopscale.train.entry")
            line = _only_line(proc, 1)
            assert line.startswith("loopscale-train: error: Read-only file system ("), line


def test_a_submitit_folder_others_can_write_is_one_line(tmp_path, data_dir):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    proc = run_loopscale(
        ["-m", "seed=0,1", "hydra/launcher=local", *TINY, f"runs_dir={tmp_path / 'runs'}", f"data.data_dir={data_dir}"],
        cwd=tmp_path,
        module="loopscale.train.entry",
        env={"LOOPSCALE_SUBMITIT_DIR": str(shared)},
    )
    line = _only_line(proc, 1)
    assert line.startswith("loopscale-train: error: hydra.launcher.submitit_folder=") and "is not private" in line


@pytest.mark.parametrize("cache, says", [("/etc/passwd", "is a file, not a folder"), ("/proc", "cannot write")])
def test_plan_refuses_a_cache_folder_it_cannot_use(tmp_path, cache, says):
    res = run_cli(["plan", "model=tiny", "budget.compute_flops=1e11"], env={"LOOPSCALE_CACHE": cache})
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr[-3000:]
    assert res.stderr.strip().startswith(f"loopscale plan: error: LOOPSCALE_CACHE={cache}") and says in res.stderr


def test_plan_creates_a_missing_cache_folder_and_says_where(tmp_path):
    cache = tmp_path / "new" / "cache"
    res = run_cli(["plan", "model=tiny", "budget.compute_flops=1e11"], env={"LOOPSCALE_CACHE": str(cache)})
    assert res.returncode == 0, res.stderr[-3000:]
    assert (cache / "throughput.json").is_file() and f"cached in {cache / 'throughput.json'}" in res.stdout


@pytest.mark.parametrize(
    "args, says",
    [
        (["model.recipe=hugin"], "model.recipe='hugin' is not a registered recipe (did you mean 'huginn'?"),
        (["model.recipe=nonexistent_x"], "the model's fields describe the 'baseline' recipe"),
        (["model.injection=huginm"], "(did you mean 'huginn'?)"),
        (["optim=adamx"], "optim='adamx' is not a config of the group 'optim'; choose one of 'adamw', 'muonh'"),
        (["model.recipes=huginn"], "ModelConfig has no key 'recipes' (did you mean 'recipe'?)"),
        (["-m", "model.recipe=hugin", "seed=0,1", "hydra/launcher=local_pool"], "(did you mean 'huginn'?"),
    ],
)
def test_an_unknown_name_is_one_line_with_the_known_ones_and_nothing_is_trained(tmp_path, data_dir, args, says):
    """Issue 57: a typo'd name of any registry or config group trained the baseline under it (or printed Hydra's
    report); now one line names what is known and the closest, before a run dir exists."""
    proc = run_loopscale(
        [*args, *TINY, f"runs_dir={tmp_path / 'runs'}", f"data.data_dir={data_dir}"],
        cwd=tmp_path,
        module="loopscale.train",
    )
    line = _only_line(proc, 1 if "-m" in args else 2)  # a sweep: its launcher refuses, as for any other refusal
    assert line.startswith("loopscale-train: error: ") and says in line, line
    assert not list((tmp_path / "runs").rglob("run.json")) and not list((tmp_path / "runs").rglob("*.log"))
