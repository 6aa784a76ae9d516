"""`loopscale notebook`: run notebooks/phi_diagnostics.ipynb on your sweep into an HTML page (or a notebook)
with every output.

    loopscale notebook runs/mine          # runs.csv, fit.json there -> runs/mine/phi_diagnostics.html
    loopscale notebook runs/mine --fit fits/mine.json --out report.ipynb
    loopscale notebook --table a.csv --fit a.json --compare b.json --joint joint.json

Each option is the LOOPSCALE_* variable the notebook reads (loopscale/analysis/notebook_inputs.py); relative
paths resolve from where the command runs. Every input is checked before the kernel starts. The notebook
runs on a real kernel of this Python (nbclient + ipykernel, the `notebook` extra); HTML needs nbconvert.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from loopscale.analysis.notebook_inputs import CHECKOUT, diagnostics_inputs, kernel_env, missing_inputs
from loopscale.analysis.notebook_run import NotebookFailed, check_extras, execute, write_notebook
from loopscale.atomic import check_outputs_apart, check_writable
from loopscale.cli import COMMANDS
from loopscale.errors import InputError

NOTEBOOK_NAME = "phi_diagnostics.ipynb"
FORMATS = (".html", ".ipynb")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "notebook",
        help=COMMANDS["notebook"].help,
        description="Executes notebooks/phi_diagnostics.ipynb on a real kernel with the given table and fits and "
        "writes it with every output. With no inputs: the demo's runs/demo, else the test fixtures.",
    )
    p.add_argument(
        "runs_dir",
        nargs="?",
        default=None,
        metavar="RUNS_DIR",
        help="sweep directory holding runs.csv (and fit.json, fit_free.json)",
    )
    p.add_argument("--table", default=None, metavar="RUNS.csv", help="runs table (default: RUNS_DIR/runs.csv)")
    p.add_argument("--fit", default=None, metavar="FIT.json", help="fit JSON (default: fit.json beside the table)")
    p.add_argument(
        "--free",
        default=None,
        metavar="FREE.json",
        help="looped-free fit JSON (default: fit_free.json beside the table)",
    )
    p.add_argument(
        "--compare", nargs="+", default=None, metavar="FIT.json", help="fit JSONs of other recipes (delta-phi)"
    )
    p.add_argument("--joint", default=None, metavar="JOINT.json", help="joint fit JSON over recipes")
    p.add_argument(
        "--curve-fit",
        default=None,
        metavar="FIT.json",
        help="looped-curve fit of the loss curves (default: fit_curves.json beside the table)",
    )
    p.add_argument(
        "--advise-compute", default=None, metavar="FLOPS", help="the advice's budget in FLOPs (default: the largest)"
    )
    p.add_argument("--advise-max-params", default=None, metavar="PARAMS", help="the advice's cap on unique parameters")
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="report.html or report.ipynb (default: phi_diagnostics.html in RUNS_DIR, else here)",
    )
    p.add_argument(
        "--notebook",
        type=Path,
        default=None,
        metavar="NOTEBOOK.ipynb",
        help="the notebook to run (default: the checkout's)",
    )
    p.add_argument("--timeout-s", type=float, default=600.0, help="the longest one cell may run (default 600)")
    p.set_defaults(func=run_notebook)


def default_out(args, cwd: Path) -> Path:
    return Path(os.path.normpath(cwd / (args.runs_dir or "."))) / "phi_diagnostics.html"


def run_notebook(args) -> int:
    cwd = Path.cwd()
    out = Path(os.path.normpath(cwd / args.out)) if args.out else default_out(args, cwd)
    if out.suffix not in FORMATS:
        raise InputError(f"--out {out}: write .html or .ipynb")
    notebook = cwd / args.notebook if args.notebook else CHECKOUT / "notebooks" / NOTEBOOK_NAME
    if not notebook.is_file():
        raise InputError(f"no notebook at {notebook} (it ships with the source checkout; --notebook PATH)")
    check_extras(html=out.suffix == ".html")
    env = kernel_env({**vars(args), "runs": args.runs_dir}, cwd, dict(os.environ))
    # the same choice the notebook's first cell makes, so a missing input stops here, before a kernel starts
    inputs = diagnostics_inputs(env=env)
    problems = missing_inputs(inputs)
    if problems:
        raise InputError("; ".join(problems))

    given = [("the notebook", notebook)] + [
        (f"--{o}", cwd / getattr(args, o)) for o in ("table", "fit", "free", "joint") if getattr(args, o)
    ]
    check_outputs_apart([("--out", out)], given + [("a --compare fit", cwd / p) for p in args.compare or ()])
    check_writable(out, "--out")
    print(f"loopscale notebook: showing {inputs['source']}", flush=True)
    started = time.perf_counter()
    executed, failure = execute(notebook, env, args.timeout_s)
    write_notebook(executed, out)
    took_s = time.perf_counter() - started
    if failure is not None:
        raise NotebookFailed(f"{failure}; the notebook up to that cell is in {out}")
    print(f"loopscale notebook: wrote {out} ({took_s:.1f} s)")
    return 0
