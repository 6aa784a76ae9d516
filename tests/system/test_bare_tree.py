"""loopscale run from a bare copy of the tree, as the GPU node runs it (issue 34): `git archive` of HEAD, an
interpreter that has the node image's packages and the GPU bundle but not loopscale (tests/support/bare_tree.py
says how, and the first test checks it), an empty HOME, no network.

The sweep designs and configs resolve by one rule (loopscale/config/dirs.py: from the imported package's
directory) in all three layouts, each tested with the same point: here the plain checkout on sys.path, in
tests/system/test_wheel.py the wheel (test_sweep_count_from_an_empty_directory) and the editable install
(test_the_editable_install_reads_the_checkouts_sweeps)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.bare_tree import archive, bare_python, node_site, run_bare


@pytest.fixture(scope="module")
def bare(tmp_path_factory):
    """(tree, python, site, home): the committed tree and the node-like interpreter."""
    root = tmp_path_factory.mktemp("bare")
    return archive("HEAD", root / "tree"), bare_python(root / "venv"), node_site(root / "site"), root / "home"


def test_the_interpreter_has_the_nodes_packages_but_not_loopscale(bare, tmp_path):
    tree, python, site, _ = bare
    home = tmp_path / "home"
    code = (
        "import importlib.util, importlib.metadata as md, json\n"
        "found = {m: importlib.util.find_spec(m) is not None for m in ('loopscale', 'torch', 'lightning', 'hydra', "
        "'omegaconf', 'submitit', 'datasets', 'wandb')}\n"
        "try:\n    md.version('loopscale'); found['loopscale metadata'] = True\n"
        "except md.PackageNotFoundError:\n    found['loopscale metadata'] = False\n"
        "print(json.dumps(found))"
    )
    proc = run_bare(python, site, ["-c", code], cwd=tmp_path, home=home)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout)
    # loopscale only from the tree; the project's dependencies that the node lacks (datasets, wandb) absent too
    assert found == {
        "loopscale": False,
        "torch": True,
        "lightning": True,
        "hydra": True,
        "omegaconf": True,
        "submitit": True,
        "datasets": False,
        "wandb": False,
        "loopscale metadata": False,
    }
    assert not list(home.iterdir())  # HOME stays empty: nothing wrote there


def test_sweeps_and_configs_resolve_from_the_tree(bare, tmp_path):
    tree, python, site, home = bare
    code = (
        "import json, sys\n"
        f"sys.path.insert(0, {str(tree)!r})\n"  # what benchmarks/gpu_check.py does
        "import loopscale\n"
        "from loopscale.config.dirs import config_dir, sweeps_dir, train_config\n"
        "cfg = train_config(['experiment=isodepth_hyper', 'model.r=4'])\n"
        "print(json.dumps([loopscale.__file__, str(sweeps_dir()), str(config_dir()), cfg.run_name]))"
    )
    proc = run_bare(python, site, ["-c", code], cwd=tmp_path, home=home)
    assert proc.returncode == 0, proc.stderr[-3000:]
    package, sweeps, conf, run_name = json.loads(proc.stdout.splitlines()[-1])
    assert Path(package).parent == tree / "loopscale"
    assert Path(sweeps) == tree / "sweeps" and Path(conf) == tree / "loopscale" / "conf"
    assert run_name == "hyper-r4-C1e18-s10"  # the editable install's test gives the same name
    # the command line from the tree's root: the published grid's 116 jobs, and no plugin failed to import
    proc = run_bare(python, site, ["-m", "loopscale", "sweep", "experiment=isodepth", "--count"], cwd=tree, home=home)
    assert proc.returncode == 0 and proc.stdout.strip() == "116", proc.stderr[-3000:]
    assert "Error importing" not in proc.stderr, proc.stderr[-3000:]


def test_gpu_check_plans_the_grid_from_the_tree(bare, tmp_path):
    """The seconds-long sections of the GPU check from the bare tree (the whole smoke: test_gpu_check.py)."""
    tree, python, site, home = bare
    out = tmp_path / "gpu_check.json"
    proc = run_bare(
        python,
        site,
        ["benchmarks/gpu_check.py", "--smoke", "--sections", "grid", "--out", out, "--workdir", tmp_path / "work"],
        cwd=tree,
        home=home,
        timeout_s=300,
    )
    assert out.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    sections = json.loads(out.read_text())["sections"]
    assert list(sections) == ["device", "grid"]
    assert all(s["ok"] for s in sections.values()) and proc.returncode == 0, sections
    assert sections["grid"]["jobs"] == 308 and set(sections["grid"]["heaviest"]) == {"8", "16", "32"}
    assert sections["device"]["compile_probe"]["ok"]
