"""`loopscale notebook`: notebooks/phi_diagnostics.ipynb executed top to bottom on a real kernel (nbclient, the
`python3` kernelspec of this venv's ipykernel) on a user's sweep given by relative paths from another
directory, through the command line's main: by default one HTML page in the sweep's dir; a failing cell
named, with the notebook up to it written (.ipynb). How it is committed and what it opens:
tests/unit/test_notebook_inputs.py."""

import html
import os
import re
import shutil
import sys

import nbformat

from loopscale.cli import main
from support.paths import FIXTURES, REPO_ROOT

NOTEBOOK = REPO_ROOT / "notebooks" / "phi_diagnostics.ipynb"
FIXTURE = FIXTURES / "plots"


def test_notebook_runs_on_the_users_sweep_from_where_they_stand(tmp_path, monkeypatch, capsys):
    for name in [k for k in os.environ if k.startswith("LOOPSCALE_")]:
        monkeypatch.delenv(name)
    # the user's sweep as collect and fit leave it, and two more fits beside it
    mine = tmp_path / "work" / "runs" / "mine"
    mine.mkdir(parents=True)
    for source, name in [
        ("runs.csv", "runs.csv"),
        ("fit.baseline.json", "fit.json"),
        ("free.baseline.json", "fit_free.json"),
        ("fit.hyper.json", "hyper.json"),
        ("fit.joint.json", "joint.json"),
    ]:
        shutil.copy(FIXTURE / source, mine / name)
    # a copy of the notebook with a probe cell, in a folder of its own: the kernel runs there, as in Jupyter
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("import os, sys; print(sys.prefix); print(os.getcwd()); print(COMPARE)"))
    (tmp_path / "nbdir").mkdir()
    nbformat.write(nb, tmp_path / "nbdir" / "diag.ipynb")
    elsewhere = tmp_path / "work" / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setenv("PWD", "/somewhere/else")  # a stale PWD: the command's own cwd wins
    argv = ["../runs/mine", "--compare", "../runs/mine/hyper.json", "--joint", "../runs/mine/joint.json"]
    # `loopscale notebook runs/mine ...` as the command line runs it: no --out writes runs/mine/phi_diagnostics.html
    assert main(["notebook", *argv, "--notebook", "../../nbdir/diag.ipynb"]) == 0  # a failed cell would be rc 1
    printed = capsys.readouterr().out
    page_path = mine / "phi_diagnostics.html"
    assert f"showing your data (table {mine / 'runs.csv'}, fit {mine / 'fit.json'})" in printed
    assert f"wrote {page_path}" in printed
    assert not list(elsewhere.iterdir())  # nothing where the user stands

    page = page_path.read_text()
    # collapse, profile, residuals, validation's held-out figure, iso-FLOP, compute-optimal, advice, delta-phi,
    # joint delta-phi: inline
    assert page.count('src="data:image/png;base64,') == 9
    text = html.unescape(re.sub(r"<[^>]*>", "", page))  # the page's text, as a reader sees it
    banner = next(line for line in text.splitlines() if line.startswith("showing "))
    assert banner.startswith(f"showing your data (table {mine / 'runs.csv'}") and "fixtures" not in banner
    assert "ci95_low" in text  # the parameter table rendered
    assert "width_ratio" in text and "lr_p_value" in text  # the joint fit's delta-phi table
    assert "shared-parameter check" in text
    assert "Verdict: the law predicts unseen budgets to" in text  # the validation section (loopscale validate)
    assert "best: r = " in text and "break-even at C = " in text  # the advice section
    probe = text[text.rindex(sys.prefix) :].split("\n")
    assert probe[0] == sys.prefix  # the kernel is this venv's Python
    assert probe[1] == str(tmp_path / "nbdir")  # ... in the notebook's folder, yet the paths were the user's
    assert probe[2] == repr([str(mine / "hyper.json")])


def test_a_failing_cell_is_named_and_the_notebook_up_to_it_written(tmp_path, monkeypatch, capsys):
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell("print('before')"), nbformat.v4.new_code_cell("1 / 0")]
    )
    nbformat.write(nb, tmp_path / "broken.ipynb")
    monkeypatch.chdir(tmp_path)
    rc = main(["notebook", "--notebook", "broken.ipynb", "--out", "out.ipynb"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1 and len(err) == 1, err
    assert re.fullmatch(
        r"loopscale notebook: error: cell 1 \(.+\) failed: ZeroDivisionError: division by zero; .*out\.ipynb.*", err[0]
    ), err
    done = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    assert done.cells[0].outputs[0]["text"] == "before\n" and done.cells[1].outputs[0]["ename"] == "ZeroDivisionError"


def test_the_notebook_runs_on_a_looped_logn_fit_the_demos_law(tmp_path, monkeypatch, capsys):
    """The demo fits looped-logn (m reads the size): every cell runs on such a fit, its advice section included
    (advice prices each width by its own m), as `make notebook` runs it on the demo's runs/demo."""
    for name in [k for k in os.environ if k.startswith("LOOPSCALE_")]:
        monkeypatch.delenv(name)
    shutil.copy(FIXTURE / "runs.csv", tmp_path / "runs.csv")
    monkeypatch.chdir(tmp_path)
    assert main(["fit", "runs.csv", "--law", "looped-logn", "--bootstrap", "20", "--out", "fit.json"]) == 0
    capsys.readouterr()
    assert main(["notebook", ".", "--fit", "fit.json", "--out", "page.html"]) == 0  # a failed cell would be rc 1
    text = html.unescape(re.sub(r"<[^>]*>", "", (tmp_path / "page.html").read_text()))
    assert "looped-logn" in text and "psi" in text
    assert "best: r = " in text and "break-even at C = " in text  # the advice section ran
