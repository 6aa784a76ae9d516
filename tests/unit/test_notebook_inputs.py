"""What notebooks/phi_diagnostics.ipynb opens (loopscale/analysis/notebook_inputs.py) and how it is committed;
`loopscale notebook`'s checks that stop before a kernel starts. Executing it: tests/system/test_notebook.py."""

from __future__ import annotations

import argparse
import json
import shutil

import pytest

from loopscale.analysis.notebook_inputs import diagnostics_inputs, missing_inputs
from loopscale.errors import InputError
from support.paths import FIXTURES, REPO_ROOT

NOTEBOOK = REPO_ROOT / "notebooks" / "phi_diagnostics.ipynb"


def _sweep(where, fit=True, free=False):
    """A sweep dir as `loopscale collect` and `loopscale fit --out` leave it (the fixture's table and fit)."""
    where.mkdir(parents=True)
    shutil.copy(FIXTURES / "plots" / "runs.csv", where / "runs.csv")
    if fit:
        shutil.copy(FIXTURES / "plots" / "fit.baseline.json", where / "fit.json")
    if free:
        shutil.copy(FIXTURES / "plots" / "free.baseline.json", where / "fit_free.json")
    return where


def test_relative_paths_resolve_from_where_the_user_stands(tmp_path):
    mine = _sweep(tmp_path / "work" / "runs" / "mine", free=True)
    # the kernel runs in notebooks/; the user stood in work/ (LOOPSCALE_CWD, or the shell's PWD it inherits)
    for where in ("LOOPSCALE_CWD", "PWD"):
        got = diagnostics_inputs(
            REPO_ROOT, env={where: str(tmp_path / "work"), "LOOPSCALE_TABLE": "runs/mine/runs.csv"}
        )
        assert got["table"] == str(mine / "runs.csv")
        assert got["fit"] == str(mine / "fit.json") and got["free"] == str(mine / "fit_free.json")
    # LOOPSCALE_CWD wins over PWD; ".." is normalised, not left in the path
    env = {"PWD": "/nowhere", "LOOPSCALE_CWD": str(tmp_path / "work" / "x"), "LOOPSCALE_RUNS": "../runs/mine"}
    got = diagnostics_inputs(REPO_ROOT, env=env)
    assert got["table"] == str(mine / "runs.csv") and missing_inputs(got) == []
    # a runs table where the sweep dir was expected: its folder is the sweep dir
    env["LOOPSCALE_RUNS"] = "../runs/mine/runs.csv"
    assert diagnostics_inputs(REPO_ROOT, env=env)["fit"] == str(mine / "fit.json")


def test_a_curve_fit_beside_the_table_is_shown_and_can_be_turned_off(tmp_path):
    mine = _sweep(tmp_path / "runs" / "mine")
    assert diagnostics_inputs(REPO_ROOT, env={"LOOPSCALE_RUNS": str(mine)})["curve_fit"] is None
    shutil.copy(FIXTURES / "plots" / "fit.baseline.json", mine / "fit_curves.json")
    assert diagnostics_inputs(REPO_ROOT, env={"LOOPSCALE_RUNS": str(mine)})["curve_fit"] == str(
        mine / "fit_curves.json"
    )
    off = {"LOOPSCALE_RUNS": str(mine), "LOOPSCALE_CURVE_FIT": ""}
    assert diagnostics_inputs(REPO_ROOT, env=off)["curve_fit"] is None
    bad = diagnostics_inputs(REPO_ROOT, env={"LOOPSCALE_RUNS": str(mine), "LOOPSCALE_CURVE_FIT": "nope.json"})
    assert any("LOOPSCALE_CURVE_FIT" in line for line in missing_inputs(bad))


def test_the_banner_says_test_fixtures_only_when_it_shows_them(tmp_path):
    fixtures = diagnostics_inputs(REPO_ROOT, env={})
    assert fixtures["source"].startswith("the test fixtures") and len(fixtures["compare"]) == 2
    mine = _sweep(tmp_path / "mine")
    own = diagnostics_inputs(REPO_ROOT, env={"LOOPSCALE_RUNS": str(mine)})
    assert own["source"].startswith("your data") and "test fixtures" not in own["source"]
    assert str(mine / "runs.csv") in own["source"]
    # the user's table is never completed with the fixtures' other recipes or joint fit
    assert own["compare"] == [] and own["joint"] is None and own["free"] is None
    # the user's fit over the fixture table: said to be mixed
    mixed = diagnostics_inputs(REPO_ROOT, env={"LOOPSCALE_FIT": str(mine / "fit.json")})
    assert mixed["source"].startswith("your data mixed with the test fixtures")


def test_the_demo_is_found_where_the_user_stands(tmp_path):
    demo = _sweep(tmp_path / "runs" / "demo")
    got = diagnostics_inputs(REPO_ROOT / "no-checkout", env={"PWD": str(tmp_path)})
    assert got["table"] == str(demo / "runs.csv") and got["source"].startswith("the demo's own runs")


def test_missing_inputs_name_the_variable(tmp_path):
    bare = _sweep(tmp_path / "bare", fit=False)
    got = diagnostics_inputs(REPO_ROOT, env={"LOOPSCALE_RUNS": str(bare), "LOOPSCALE_COMPARE": "nope.json"})
    problems = missing_inputs(got)
    assert any("set LOOPSCALE_FIT" in p for p in problems) and any(
        "LOOPSCALE_COMPARE: nope.json" in p for p in problems
    )
    with pytest.raises(InputError, match="LOOPSCALE_ADVISE_COMPUTE='lots' is not a number"):
        diagnostics_inputs(REPO_ROOT, env={"LOOPSCALE_ADVISE_COMPUTE": "lots"})


def _command(argv):
    from loopscale.cli import notebook

    parser = argparse.ArgumentParser()
    notebook.register(parser.add_subparsers())
    args = parser.parse_args(["notebook", *argv])
    return args.func(args)


def test_the_command_checks_its_inputs_before_a_kernel_starts(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    bare = _sweep(tmp_path / "bare", fit=False)
    with pytest.raises(InputError, match="no fit JSON beside .*bare/runs.csv: set LOOPSCALE_FIT"):
        _command(["bare"])
    with pytest.raises(InputError, match="LOOPSCALE_FIT: .*missing.json does not exist"):
        _command(["bare", "--fit", "missing.json"])
    with pytest.raises(InputError, match="write .html or .ipynb"):
        _command(["bare", "--out", "report.pdf"])
    assert sorted(p.name for p in bare.iterdir()) == ["runs.csv"]  # nothing written


def test_the_notebook_is_committed_with_cell_ids_and_without_outputs():
    raw = json.loads(NOTEBOOK.read_text())  # as committed: nbformat.read would add missing ids itself
    assert (raw["nbformat"], raw["nbformat_minor"]) >= (4, 5)
    ids = [cell.get("id") for cell in raw["cells"]]
    assert all(ids) and len(set(ids)) == len(ids), ids
    code = [cell for cell in raw["cells"] if cell["cell_type"] == "code"]
    assert all(cell["outputs"] == [] and cell["execution_count"] is None for cell in code)
    assert "parameters" in code[0]["metadata"].get("tags", [])
    # no logic in the notebook: it calls loopscale functions, it defines none (and no loops of its own)
    lines = [line.strip() for cell in code for line in "".join(cell["source"]).splitlines()]
    assert not [line for line in lines if line.startswith(("def ", "class ", "for ", "while ", "lambda"))]
    # every variable it reads is documented in its first cell
    intro = "".join(raw["cells"][0]["source"])
    for name in ("RUNS", "TABLE", "FIT", "FREE", "COMPARE", "JOINT", "ADVISE_COMPUTE", "ADVISE_MAX_PARAMS", "CWD"):
        assert f"LOOPSCALE_{name}" in intro, name


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--table", "empty.csv"], r"LOOPSCALE_TABLE: .*empty.csv is not a runs table \(.*has no rows"),
        (["--fit", "broken.json"], r"LOOPSCALE_FIT: .*broken.json is not a fit JSON"),
        (["--fit", "/etc/passwd"], r"LOOPSCALE_FIT: /etc/passwd is not a fit JSON \(cannot read fit JSON"),
        (["--compare", "broken.json"], r"LOOPSCALE_COMPARE: .*broken.json is not a fit JSON"),
        (["--advise-compute", "-5"], r"LOOPSCALE_ADVISE_COMPUTE='-5' must be a positive, finite number"),
        (["--advise-compute", "nan"], r"LOOPSCALE_ADVISE_COMPUTE='nan' must be a positive, finite number"),
    ],
)
def test_an_input_the_notebook_cannot_read_stops_before_a_kernel_starts(tmp_path, monkeypatch, argv, says):
    """Issue 41 (15): every input is read as the notebook's cells read it, before a kernel starts."""
    from loopscale.cli import notebook

    monkeypatch.chdir(tmp_path)
    sweep = _sweep(tmp_path / "mine")
    (tmp_path / "empty.csv").write_text("r,N_once,N_rec,D,L\n")
    (tmp_path / "broken.json").write_text('{"law": "looped", "params": 3}')
    monkeypatch.setattr(notebook, "execute", lambda *a: pytest.fail("a kernel was started"))
    with pytest.raises(InputError, match=says):
        _command(["mine", *argv])
    assert sorted(p.name for p in sweep.iterdir()) == ["fit.json", "runs.csv"]  # nothing written
