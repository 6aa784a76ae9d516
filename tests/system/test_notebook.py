"""notebooks/phi_diagnostics.ipynb: committed without outputs, and executed top to bottom with nbclient
on a real kernel (the `python3` kernelspec that ipykernel installs into the venv) on the fixture table
and fits, with its parameters overridden through the environment as a user would."""

import sys

import nbformat
from nbclient import NotebookClient

from support.paths import FIXTURES, REPO_ROOT

NOTEBOOK = REPO_ROOT / "notebooks" / "phi_diagnostics.ipynb"
FIXTURE = FIXTURES / "plots"


def test_notebook_is_committed_without_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(not c.outputs and c.execution_count is None for c in code)
    assert "parameters" in code[0].metadata.get("tags", [])


def test_notebook_executes_on_the_fixture(tmp_path, monkeypatch):
    # parameters from the environment (the kernel inherits it); one comparison fit instead of the default two
    monkeypatch.setenv("LOOPSCALE_TABLE", str(FIXTURE / "runs.csv"))
    monkeypatch.setenv("LOOPSCALE_FIT", str(FIXTURE / "fit.baseline.json"))
    monkeypatch.setenv("LOOPSCALE_COMPARE", str(FIXTURE / "fit.hyper.json"))
    monkeypatch.setenv("LOOPSCALE_FREE", str(FIXTURE / "free.baseline.json"))
    monkeypatch.setenv("LOOPSCALE_JOINT", str(FIXTURE / "fit.joint.json"))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    # a probe cell: which Python runs the kernel, and which parameters the notebook saw
    nb.cells.append(nbformat.v4.new_code_cell("import sys; print(sys.prefix); print(COMPARE)"))
    client = NotebookClient(nb, kernel_name="python3", timeout=120, resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError on any failing cell

    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    # collapse, profile, residuals, iso-FLOP, compute-optimal, advice, delta-phi, joint delta-phi
    assert len(images) == 8
    html = "".join(o.get("data", {}).get("text/html", "") for o in outputs)
    assert "phi" in html and "ci95_low" in html  # the parameter table rendered
    assert "width_ratio" in html and "lr_p_value" in html  # the joint fit's delta-phi table
    markdown = "".join(o.get("data", {}).get("text/markdown", "") for o in outputs)
    assert "shared-parameter check" in markdown
    assert "best: r = " in markdown and "break-even at C = " in markdown  # the advice section
    probe = "".join(o.get("text", "") for o in nb.cells[-1].outputs).split("\n")
    assert probe[0] == sys.prefix  # the kernel is this venv's Python
    assert probe[1] == repr([str(FIXTURE / "fit.hyper.json")])
