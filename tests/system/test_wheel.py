"""The package works installed, not only from a checkout (issue 17): build a wheel from the package's own
files, install it into a fresh venv outside the repository, and from an empty directory count a sweep's
jobs, train two steps and fit a table.

21-33 s on this 2-core machine (measured: `pytest tests/system/test_wheel.py`, idle vs busy), so it stays in the
default suite.
Offline and without re-downloading torch: the venv gets the wheel alone (`pip install --no-deps`), and a
.pth file makes the dependencies already installed for this interpreter importable. A .pth file's lines
only add directories, never the .pth files inside them, so the editable install of loopscale there stays
invisible: `loopscale` comes from the wheel, which the tests check."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from importlib.metadata import version
from pathlib import Path

import pytest

from support.paths import FIXTURES, REPO_ROOT

# What the wheel is built from: the package, the Hydra plugins and what pyproject.toml names.
WHEEL_SOURCES = ("pyproject.toml", "README.md", "LICENSE", "loopscale", "hydra_plugins", "sweeps")


def _clean_env(**extra: str) -> dict[str, str]:
    """The environment without anything that would put a checkout's loopscale on sys.path."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    return {**env, "PYTHONUNBUFFERED": "1", **extra}


def _run(args: list, cwd: Path, timeout_s: float = 600, **env: str) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=timeout_s, env=_clean_env(**env)
    )
    assert proc.returncode == 0, f"{args}: exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A venv outside the repository holding loopscale from a freshly built wheel."""
    setuptools_major = int(version("setuptools").split(".")[0])
    assert setuptools_major >= 77, f"setuptools {version('setuptools')} cannot build the wheel: install '.[dev]'"
    root = tmp_path_factory.mktemp("wheel")
    src = root / "src"
    src.mkdir()
    for name in WHEEL_SOURCES:
        if (REPO_ROOT / name).is_dir():
            shutil.copytree(REPO_ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(REPO_ROOT / name, src / name)
    wheels = root / "wheels"
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-q",
            "-w",
            wheels,
            src,
        ],
        cwd=root,
    )
    (wheel,) = wheels.glob("loopscale-*.whl")
    venv = root / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=root)
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            venv / "bin" / "python",
            "install",
            "--no-deps",
            "--no-index",
            "-q",
            wheel,
        ],
        cwd=root,
    )
    site = Path(
        _run(
            [venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=root
        ).stdout.strip()
    )
    # the dependencies of this interpreter, after the venv's own site-packages (so the wheel's loopscale wins)
    deps = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "zz_test_dependencies.pth").write_text("".join(f"{d}\n" for d in sorted(deps)))
    return venv


@pytest.fixture()
def empty_dir(tmp_path) -> Path:
    work = tmp_path / "empty"
    work.mkdir()
    return work


def test_loopscale_comes_from_the_wheel_with_its_configs(venv, empty_dir):
    out = _run(
        [
            venv / "bin" / "python",
            "-c",
            "import json, loopscale; from loopscale.config.dirs import config_dir; "
            "print(json.dumps([loopscale.__file__, str(config_dir()), loopscale.__version__]))",
        ],
        cwd=empty_dir,
    ).stdout
    package_file, conf, version = json.loads(out)
    assert Path(package_file).resolve().is_relative_to(venv.resolve())
    assert Path(conf).resolve().is_relative_to(venv.resolve()) and (Path(conf) / "train.yaml").is_file()
    assert (Path(conf) / "hydra" / "launcher" / "slurm.yaml").is_file()
    assert version != "0+unknown"


def test_sweep_count_from_an_empty_directory(venv, empty_dir):
    """The sweep designs (the repository's top-level sweeps/) ship as loopscale.sweeps and are found."""
    out = _run([venv / "bin" / "loopscale", "sweep", "experiment=isodepth", "--count"], cwd=empty_dir).stdout
    assert out.strip() == "116"  # the published grid (sweeps/grid/paper.yaml)
    out = _run([venv / "bin" / "loopscale", "sweep", "experiment=isodepth_cpu_demo", "--count"], cwd=empty_dir).stdout
    assert out.strip() == "16"  # the demo's forked jobs (sweeps/grid/cpu_demo.yaml)
    where = _run(
        [venv / "bin" / "python", "-c", "from loopscale.config.dirs import sweeps_dir; print(sweeps_dir())"],
        cwd=empty_dir,
    ).stdout.strip()
    assert (
        Path(where).resolve().is_relative_to(venv.resolve())
        and (Path(where) / "experiment" / "isodepth.yaml").is_file()
    )


def test_the_editable_install_reads_the_checkouts_sweeps():
    """In the development install (make install: pip install -e), the sweep designs are the checkout's own
    sweeps/ folder, so an edit there is what the next sweep runs."""
    from loopscale.config.dirs import sweeps_dir, train_config

    assert sweeps_dir().resolve() == (REPO_ROOT / "sweeps").resolve()
    assert train_config(["experiment=isodepth_hyper", "model.r=4"]).run_name == "hyper-r4-C1e18-s10"


def test_every_package_of_the_tree_is_listed_for_the_wheel():
    """pyproject.toml names every package (setuptools packages): each folder of Python or YAML files under
    loopscale/ and sweeps/, so nothing is left out of the wheel."""
    import tomllib

    listed = set(tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {"hydra_plugins"}
    for root, prefix in ((REPO_ROOT / "loopscale", "loopscale"), (REPO_ROOT / "sweeps", "loopscale.sweeps")):
        for folder in [root, *(p for p in root.rglob("*") if p.is_dir() and p.name != "__pycache__")]:
            if any(folder.rglob("*.py")) or any(folder.rglob("*.yaml")):  # a folder on the way to such files too
                found.add(".".join([prefix, *folder.relative_to(root).parts]))
    assert listed == found


@pytest.mark.slow  # ~1.3 min: a fresh venv from the wheel, then a user config dir (default suite under 15 min)
def test_a_user_config_dir_from_an_empty_directory(venv, empty_dir):
    user = empty_dir.parent / "my_conf"
    (user / "experiment").mkdir(parents=True)
    (user / "experiment" / "mine.yaml").write_text(
        "# @package _global_\ndefaults:\n  - override /model: tiny\nsweep: mine\n"
        "hydra:\n  sweeper:\n    params:\n      model.r: 1,2,4\n"
    )
    out = _run(
        [venv / "bin" / "loopscale", "sweep", "experiment=mine", "--json"],
        cwd=empty_dir,
        LOOPSCALE_CONFIG_PATH=str(user),
    ).stdout
    jobs = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert [(job["sweep"], job["r"], job["d_model"]) for job in jobs] == [
        ("mine", 1, 64),
        ("mine", 2, 64),
        ("mine", 4, 64),
    ]


def test_two_training_steps_from_an_empty_directory(venv, empty_dir):
    corpus = empty_dir.parent / "corpus"  # a folder of text files, one document each
    corpus.mkdir()
    for k, section in enumerate((REPO_ROOT / "docs" / "design.md").read_text().split("\n## ")):
        (corpus / f"doc{k}.txt").write_text(section)
    _run(
        [
            venv / "bin" / "loopscale-train",
            "model=tiny",
            "data=text",
            f"data.path={corpus}",
            "data.vocab_size=512",
            "data.val_tokens=2048",
            "budget.mode=tokens",
            "budget.tokens=512",
            "budget.batch_size=4",
            "trainer.progress=false",
            "sweep=wheel",
            "run_name=two_steps",
        ],
        cwd=empty_dir,
    )
    record = json.loads((empty_dir / "runs" / "wheel" / "two_steps" / "run.json").read_text())
    assert record["status"] == "done" and record["step"] == 2 and record["steps"] == 2
    assert record["L"] is not None and 0 < record["L"] < 10
    assert record["git_commit"] is None  # the installed code is not a checkout
    assert (empty_dir / "data" / "cache").is_dir()  # the token cache went to the working directory


def test_fit_from_an_empty_directory(venv, empty_dir):
    shutil.copy2(FIXTURES / "looped_synthetic_small.csv", empty_dir / "runs.csv")
    _run(
        [venv / "bin" / "loopscale", "fit", "runs.csv", "--no-profile", "--starts", "4", "--out", "fit.json"],
        cwd=empty_dir,
    )
    fit = json.loads((empty_dir / "fit.json").read_text())
    assert fit["law"] == "looped" and fit["n_rows"] == 56
    assert 0 < fit["params"]["phi"] <= 1.5
