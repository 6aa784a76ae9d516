"""Running a notebook on a real kernel of this Python (nbclient + ipykernel, the `notebook` extra) and writing it
with every output, as .ipynb or one self-contained HTML page (nbconvert): what `loopscale notebook` runs."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from nbconvert import HTMLExporter

from loopscale.atomic import write_text_atomic
from loopscale.errors import LoopscaleError


class NotebookFailed(LoopscaleError):
    """A cell raised: the notebook up to that cell was written, and the line names the cell and the error."""

    exit_code = 1


class MissingExtra(LoopscaleError):
    """nbclient / ipykernel / nbconvert are not installed."""


def check_extras(html: bool) -> None:
    needed = ["nbformat", "nbclient", "ipykernel"] + (["nbconvert"] if html else [])
    missing = [name for name in needed if importlib.util.find_spec(name) is None]
    if missing:
        raise MissingExtra(f"loopscale notebook needs {', '.join(missing)}: pip install -e '.[notebook]'")


def execute(notebook: Path, env: dict[str, str], timeout_s: float):
    """(the executed notebook, None) or (the notebook up to the failing cell, "cell N (id) failed: ...").

    The kernel runs in the notebook's own folder, as Jupyter starts it: the inputs are resolved from
    LOOPSCALE_CWD, never from the kernel's working directory."""
    nb = nbformat.read(notebook, as_version=4)
    client = NotebookClient(
        nb,
        kernel_name="python3",
        timeout=timeout_s,
        resources={"metadata": {"path": str(notebook.parent)}},
        # the kernel's own warnings (ipykernel 7 warns on every local TCP kernel) are not the user's; errors stay
        extra_arguments=["--IPKernelApp.log_level=ERROR"],
    )
    try:
        client.execute(env=env)
    except CellExecutionError as err:
        return nb, _failed_cell(nb, err)
    return nb, None


def _failed_cell(nb, err) -> str:
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                return f"cell {index} ({cell.get('id')}) failed: {output.get('ename')}: {output.get('evalue')}"
    return f"a cell failed: {str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__}"


def write_notebook(nb, out: Path) -> None:
    """The executed notebook as .ipynb, or as one self-contained HTML page (figures inline)."""
    if out.suffix == ".ipynb":
        write_text_atomic(out, nbformat.writes(nb))
        return

    html, _ = HTMLExporter().from_notebook_node(nb)
    write_text_atomic(out, html)
