"""`loopscale notebook`: notebooks/phi_diagnostics.ipynb executed top to bottom on a real kernel (nbclient, the
`python3` kernelspec of this venv's ipykernel) on a user's sweep given by relative paths from another
directory, written as a notebook with outputs and as HTML. How it is committed and what it opens:
tests/unit/test_notebook_inputs.py."""

import argparse
import os
import shutil
import sys

import nbformat
import pytest

from support.paths import FIXTURES, REPO_ROOT

NOTEBOOK = REPO_ROOT / "notebooks" / "phi_diagnostics.ipynb"
FIXTURE = FIXTURES / "plots"


def _command(argv):
    from loopscale.cli import notebook

    parser = argparse.ArgumentParser()
    notebook.register(parser.add_subparsers())
    args = parser.parse_args(["notebook", *argv])
    return args.func(args)


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
    assert _command([*argv, "--notebook", "../../nbdir/diag.ipynb", "--out", "out/report.ipynb"]) == 0
    printed = capsys.readouterr().out
    assert f"showing your data (table {mine / 'runs.csv'}, fit {mine / 'fit.json'})" in printed
    assert f"wrote {elsewhere / 'out' / 'report.ipynb'}" in printed

    done = nbformat.read(elsewhere / "out" / "report.ipynb", as_version=4)
    outputs = [o for c in done.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    banner = "".join(o.get("text", "") for o in done.cells[1].outputs)
    assert banner.startswith(f"showing your data (table {mine / 'runs.csv'}") and "fixtures" not in banner
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    # collapse, profile, residuals, iso-FLOP, compute-optimal, advice, delta-phi, joint delta-phi
    assert len(images) == 8
    html = "".join(o.get("data", {}).get("text/html", "") for o in outputs)
    assert "phi" in html and "ci95_low" in html  # the parameter table rendered
    assert "width_ratio" in html and "lr_p_value" in html  # the joint fit's delta-phi table
    markdown = "".join(o.get("data", {}).get("text/markdown", "") for o in outputs)
    assert "shared-parameter check" in markdown
    assert "best: r = " in markdown and "break-even at C = " in markdown  # the advice section
    probe = "".join(o.get("text", "") for o in done.cells[-1].outputs).split("\n")
    assert probe[0] == sys.prefix  # the kernel is this venv's Python
    assert probe[1] == str(tmp_path / "nbdir")  # ... in the notebook's folder, yet the paths were the user's
    assert probe[2] == repr([str(mine / "hyper.json")])

    # the same, as one HTML page with the figures inline
    from loopscale.cli.notebook import write_notebook

    write_notebook(done, tmp_path / "report.html")
    page = (tmp_path / "report.html").read_text()
    assert page.count('src="data:image/png;base64,') == 8 and "showing your data" in page


def test_a_failing_cell_is_named_and_the_notebook_up_to_it_written(tmp_path, monkeypatch):
    from loopscale.cli.notebook import NotebookFailed

    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell("print('before')"), nbformat.v4.new_code_cell("1 / 0")]
    )
    nbformat.write(nb, tmp_path / "broken.ipynb")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(NotebookFailed, match=r"cell 1 \(.+\) failed: ZeroDivisionError: division by zero; .*out.ipynb"):
        _command(["--notebook", "broken.ipynb", "--out", "out.ipynb"])
    done = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    assert done.cells[0].outputs[0]["text"] == "before\n" and done.cells[1].outputs[0]["ename"] == "ZeroDivisionError"
