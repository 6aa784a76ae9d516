"""Small things a new user hits, each one line and a non-zero exit instead of a traceback: a sweep listed
without an experiment, a LOOPSCALE_CONFIG_PATH that is not a directory, a corpus file that is not UTF-8
text, a config error that OmegaConf reports over several lines, and a full disk, which `data prepare` and
`data pack` report alike (exit 2). The `loopscale` command runs in-process (support.cli.run_cli); `loopscale-train`,
a Hydra app, as a child process."""

from __future__ import annotations

import pytest

from support.cli import run_cli
from support.fs import fill, small_tmpfs
from support.procs import run_loopscale


def _one_line(res, code: int, *says: str) -> str:
    assert res.returncode == code and "Traceback" not in res.stderr, res.stderr[-3000:]
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and all(s in lines[0] for s in says), res.stderr[-3000:]
    return lines[0]


def test_a_sweep_without_an_experiment_lists_its_jobs(tmp_path):
    res = run_cli(["sweep", "model.r=1,2", "--count"], cwd=tmp_path)
    assert res.returncode == 0 and res.stdout.strip() == "2", res.stderr[-2000:]


@pytest.mark.parametrize(
    "command, module, code",
    [
        (["sweep", "--count"], "loopscale", 2),
        pytest.param(["--cfg", "job"], "loopscale.train", 1, marks=pytest.mark.system),
    ],
)
def test_a_config_path_that_is_not_a_directory_is_one_line(tmp_path, command, module, code):
    env = {"LOOPSCALE_CONFIG_PATH": str(tmp_path / "missing")}
    if module == "loopscale":
        res = run_cli(command, cwd=tmp_path, env=env)
    else:
        res = run_loopscale(command, cwd=tmp_path, module=module, env=env)
    _one_line(res, code, "LOOPSCALE_CONFIG_PATH names", "missing", "not a directory")


def test_a_config_error_reported_over_several_lines_is_one_line(tmp_path):
    res = run_cli(["demo", "--out", tmp_path / "demo", "point=zzz"], cwd=tmp_path)
    _one_line(res, 2, "fork point 'zzz' must look like")


def _corpus(tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "a.txt").write_text("To be, or not to be, that is the question.\n" * 50)
    (folder / "c.txt").write_text("Now is the winter of our discontent.\n" * 50)
    return folder


def test_a_corpus_file_that_is_not_text_is_named(tmp_path):
    folder = _corpus(tmp_path)
    (folder / "b.txt").write_bytes(bytes(range(256)) * 20)  # binary, not UTF-8
    pack = ["data", "pack", "--source", "text", "--path", folder, "--data-dir", tmp_path / "cache"]
    res = run_cli([*pack, "--seq-len", "16", "--vocab-size", "300", "--no-progress"], cwd=tmp_path)
    _one_line(res, 2, f"{folder / 'b.txt'} is not UTF-8 text")


def test_data_pack_and_prepare_report_a_full_disk_alike(tmp_path):
    folder = _corpus(tmp_path)
    common = ["--source", "text", "--path", folder, "--vocab-size", "300", "--no-progress", "--num-proc", "1"]
    with small_tmpfs(tmp_path / "disk", "4m") as disk:
        prepared = run_cli(["data", "prepare", *common, "--data-dir", disk / "cache"], cwd=tmp_path)
        assert prepared.returncode == 0, prepared.stderr[-2000:]
        fill(disk, 8192)  # the token shards fit; the packed rows do not
        res = run_cli(["data", "pack", *common, "--data-dir", disk / "cache", "--seq-len", "16"], cwd=tmp_path)
        _one_line(res, 2, "no space left", "nothing was left behind")
        assert [p.name for p in (disk / "cache").iterdir() if p.name.startswith(".tmp")] == []
