"""Where the configs come from (issue 17): the package's own loopscale/conf/, the user's directories from
LOOPSCALE_CONFIG_PATH (searched first), Hydra's hydra.searchpath; and git_commit outside a checkout."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from hydra._internal.config_search_path_impl import ConfigSearchPathImpl
from hydra.errors import CompactHydraException

import loopscale
from loopscale.config.dirs import ENV_VAR, add_user_dirs, compose, config_dir, group_dir, sweeps_dir, user_config_dirs
from loopscale.provenance import git_commit
from support.procs import run_loopscale

TINY_96 = "d_model: 96\nhead_dim: 32\nn_prelude: 1\nn_coda: 1\ndepth: 6\nr: 1\nseq_len: 64\n"


def test_config_dir_is_inside_the_package_and_holds_every_group():
    conf = config_dir()
    assert conf.parent == Path(loopscale.__file__).parent
    assert (conf / "train.yaml").is_file()
    for group in ("model", "data", "optim", "budget", "trainer", "logger", "hydra/launcher"):
        assert list((conf / group).glob("*.yaml")), group
    # the sweep designs live in the top-level sweeps/ (the package loopscale.sweeps once installed)
    for group in ("experiment", "grid"):
        assert group_dir(group) == sweeps_dir() / group and list(group_dir(group).glob("*.yaml")), group
    assert not (conf / "experiment").exists() and not (conf / "grid").exists()


def test_a_user_dir_adds_an_experiment_and_replaces_a_shipped_file(tmp_path, monkeypatch):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "tiny.yaml").write_text(TINY_96)  # same name as the shipped d_model=64 one
    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "mine.yaml").write_text("# @package _global_\nsweep: mine\nseed: 7\n")
    assert compose(["model=tiny"]).model.d_model == 64
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    cfg = compose(["model=tiny", "experiment=mine"])
    assert cfg.model.d_model == 96 and cfg.sweep == "mine" and cfg.seed == 7
    assert compose(["model=cpu"]).model.d_model == 128  # what the user dir lacks still comes from the package


def test_user_dirs_keep_their_order_and_sit_just_before_the_shipped_configs(tmp_path, monkeypatch):
    """User dirs, then the shipped configs, then the sweep designs (first match wins)."""
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir(), second.mkdir()
    monkeypatch.setenv(ENV_VAR, f"{first}{os.pathsep}{second}")
    path = ConfigSearchPathImpl()
    path.append("hydra", "pkg://hydra.conf")
    path.append("main", str(config_dir()))
    add_user_dirs(path)
    assert [e.path for e in path.get_path()] == [
        "pkg://hydra.conf",
        f"file://{first}",
        f"file://{second}",
        str(config_dir()),
        f"file://{sweeps_dir()}",
    ]


def test_other_hydra_apps_do_not_see_the_user_dirs(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    path = ConfigSearchPathImpl()
    path.append("main", f"file://{tmp_path / 'some_other_app'}")
    add_user_dirs(path)
    assert [e.path for e in path.get_path()] == [f"file://{tmp_path / 'some_other_app'}"]


def test_a_config_path_entry_that_is_not_a_directory_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "missing"))
    # a compact Hydra error: Hydra and loopscale's commands print it as one line (test_one_line_errors.py)
    with pytest.raises(CompactHydraException, match=f"{ENV_VAR} names .*missing"):
        compose(["model=tiny"])
    with pytest.raises(NotADirectoryError, match=f"{ENV_VAR} names .*missing"):
        user_config_dirs()
    assert user_config_dirs({ENV_VAR: ""}) == []


def test_hydra_searchpath_adds_options_too(tmp_path):
    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "mine.yaml").write_text("# @package _global_\nsweep: from_searchpath\n")
    cfg = compose([f"hydra.searchpath=[file://{tmp_path}]", "experiment=mine"])
    assert cfg.sweep == "from_searchpath"


@pytest.mark.system
def test_loopscale_train_reads_the_user_dir_from_any_directory(tmp_path):
    (tmp_path / "conf" / "model").mkdir(parents=True)
    (tmp_path / "conf" / "model" / "tiny.yaml").write_text(TINY_96)
    (tmp_path / "empty").mkdir()
    proc = run_loopscale(
        ["--cfg", "job", "model=tiny"],
        cwd=tmp_path / "empty",
        timeout_s=120,
        env={ENV_VAR: str(tmp_path / "conf")},
        module="loopscale.train.entry",
    )
    assert proc.returncode == 0, proc.stderr
    assert "  d_model: 96\n" in proc.stdout


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        env={
            **os.environ,
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@t",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@t",
        },
    )


def test_git_commit_only_for_the_root_of_a_checkout(tmp_path):
    assert git_commit(tmp_path) is None  # not a repository at all
    repo = tmp_path / "repo"
    (repo / "site-packages").mkdir(parents=True)
    _git(repo, "init", "-q")
    (repo / "f.txt").write_text("x")
    _git(repo, "add", "f.txt")
    _git(repo, "commit", "-q", "-m", "x")
    sha = git_commit(repo)
    assert sha is not None and len(sha) == 40
    # a wheel installed into a .venv inside some repository: that repository's commit is not the code's
    assert git_commit(repo / "site-packages") is None
    (repo / "f.txt").write_text("changed")
    assert git_commit(repo) == f"{sha}+dirty"


def test_a_design_defined_in_config_alone_is_named_by_its_own_recipe(tmp_path, monkeypatch):
    """Issue 29, item 3: an experiment of one's own that only sets model fields (the additive injection) was
    run, tabled and fitted as `baseline` (runs baseline-r2-d16); now recipe=auto labels it by its fields, a
    label of one's own is kept, and a published label on other fields is refused."""
    from hydra.errors import ConfigCompositionException

    from loopscale.launch.sweep import expand

    (tmp_path / "experiment").mkdir()
    design = "# @package _global_\ndefaults:\n  - /grid: cpu_demo\nsweep: mine\nmodel:\n  injection: additive\n"
    (tmp_path / "experiment" / "mine.yaml").write_text(design)
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    point = "point=C2.5e11_3.54e11-d16"
    jobs = expand(["experiment=mine", "model.r=1,2", point])
    assert [(job.cfg.model.recipe, job.cfg.run_name) for job in jobs] == [
        ("baseline", "baseline-r1-d16"),  # r = 1 is the same dense model for every recipe
        ("additive", "additive-r2-d16"),
    ]
    (mine,) = expand(["experiment=mine", "model.r=2", "model.recipe=s_plus_e", point])
    assert (mine.cfg.model.recipe, mine.cfg.run_name) == ("s_plus_e", "s_plus_e-r2-d16")
    with pytest.raises((ValueError, ConfigCompositionException), match="describe a design of its own"):
        expand(["experiment=mine", "model.r=2", "model.recipe=baseline", point])
