"""The how-tos of docs/architecture.md run as written: a loop design (an injection and a recipe), a command and a
figure are each added to a copy of the repository from the doc's marked steps (`<!-- howto NAME: new FILE -->`
before a block: the file; `<!-- howto NAME: in FILE after "LINE" -->`: the block inserted after the line that
starts with LINE), and the copy then passes what a new one must: the module map, the registry that finds it, the
command line. A step the doc forgets fails here, so the docs cannot drift from what adding one takes. Cheap: a
copy of a few folders and one child process per how-to."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from support.paths import REPO_ROOT

DOC = REPO_ROOT / "docs" / "architecture.md"
STEP = re.compile(r'^<!-- howto (\w+): (new|in) (\S+)(?: after "([^\n]*)")? -->\n```\w*\n(.*?)```', flags=re.M | re.S)
COPIED = ("loopscale", "docs", "tests", "sweeps", "hydra_plugins", "pyproject.toml")
FIXTURES = REPO_ROOT / "tests" / "fixtures"


def steps(howto: str) -> list[tuple[str, str, str | None, str]]:
    """(new | in, file, the line to insert after, text) of each marked step of one how-to, in the doc's order."""
    return [
        (kind, path, after, text) for name, kind, path, after, text in STEP.findall(DOC.read_text()) if name == howto
    ]


def apply(howto: str, root: Path) -> None:
    """The how-to's steps applied to the copy at `root` (an anchor line that is not there fails the test)."""
    for kind, rel, after, text in steps(howto):
        path = root / rel
        if kind == "new":
            assert not path.exists(), f"{rel} exists already"
            path.write_text(text)
            continue
        lines = path.read_text().splitlines(keepends=True)
        at = next((i for i, line in enumerate(lines) if line.startswith(after)), None)
        assert at is not None, f"no line of {rel} starts with {after!r}"
        path.write_text("".join(lines[: at + 1]) + text + "".join(lines[at + 1 :]))


@pytest.fixture
def copy(tmp_path) -> Path:
    """The repository's package, docs, tests and configs copied to tmp_path (what the how-tos edit)."""
    for name in COPIED:
        src, dst = REPO_ROOT / name, tmp_path / name
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy(src, dst)
    return tmp_path


def run_in(root: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    """`python ARGS` with the copy's package first on the path (not the installed one), in the copy."""
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{root / 'tests'}", "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([sys.executable, *args], cwd=root, env=env, capture_output=True, text=True, timeout=timeout)


def pytest_in(root: Path, *nodes: str) -> subprocess.CompletedProcess:
    return run_in(root, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", *nodes)


MODULE_MAP = "tests/unit/test_code_shape.py::test_the_module_map_lists_every_module"


def test_each_howto_has_its_steps_in_the_doc():
    assert {name for name, *_ in STEP.findall(DOC.read_text())} == {"design", "command", "figure"}
    assert [kind for kind, *_ in steps("design")] == ["new", "new", "in", "in", "in"]


def test_the_module_map_check_fails_on_a_copy_missing_a_step(copy):
    """The copy runs the repository's own checks: a new module without its map line fails them."""
    (copy / "loopscale" / "analysis" / "unlisted.py").write_text('"""Not in the module map."""\n')
    res = pytest_in(copy, MODULE_MAP)
    assert res.returncode == 1 and "analysis/unlisted.py" in res.stdout


def test_a_loop_design_is_the_files_and_lines_the_howto_lists(copy):
    apply("design", copy)
    res = pytest_in(copy, MODULE_MAP, "tests/unit/test_recipes.py::test_every_recipe_states_its_r1_reduction")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    res = run_in(copy, "-m", "loopscale", "params", "--recipe", "gated_loop", "--r", "4")
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert (report["recipe"], report["injection"]) == ("gated_loop", "gated")


def test_a_command_is_the_files_and_lines_the_howto_lists(copy):
    apply("command", copy)
    table = FIXTURES / "looped_synthetic_small.csv"
    res = run_in(copy, "-m", "loopscale", "count", str(table))
    assert res.returncode == 0, res.stderr
    per_r = pd.read_csv(table).groupby("r").size()
    assert res.stdout.splitlines() == [f"r = {int(r)}: {n} runs" for r, n in per_r.items()]
    assert "count" in run_in(copy, "-m", "loopscale", "--help").stdout
    bad = run_in(copy, "-m", "loopscale", "count", str(copy / "missing.csv"))
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0 and "no such file" in bad.stderr
    assert pytest_in(copy, MODULE_MAP).returncode == 0


def test_a_figure_is_the_file_and_line_the_howto_lists(copy):
    apply("figure", copy)
    plots = FIXTURES / "plots"
    script = (
        "import sys; from pathlib import Path; from loopscale.plots.inputs import read_table; "
        "from loopscale.plots.registry import FIGURE_NAMES, save_all; "
        f"paths = save_all(read_table({str(plots / 'runs.csv')!r}), {str(plots / 'fit.baseline.json')!r}, 'out'); "
        "print('loss_by_r' in FIGURE_NAMES, *sorted(p.name for p in paths))"
    )
    res = run_in(copy, "-c", script)
    assert res.returncode == 0, res.stderr[-3000:]
    registered, *written = res.stdout.split()
    assert registered == "True" and {"loss_by_r.png", "loss_by_r.pdf"} <= set(written)
    assert (copy / "out" / "loss_by_r.png").stat().st_size > 2000
    assert pytest_in(copy, MODULE_MAP).returncode == 0
