"""Which table and fits `notebooks/phi_diagnostics.ipynb` opens, and the banner that says so.

The variables (each also a `loopscale notebook` option; docs/operations.md, "The phi notebook"):

    LOOPSCALE_RUNS       a sweep directory: its runs.csv (`loopscale collect`), fit.json and fit_free.json
    LOOPSCALE_TABLE      the runs table (default: LOOPSCALE_RUNS/runs.csv)
    LOOPSCALE_FIT        the fit JSON (default: fit.json in LOOPSCALE_RUNS or beside the table)
    LOOPSCALE_FREE       an optional looped-free fit (default: fit_free.json beside the table, when there)
    LOOPSCALE_COMPARE    optional fits of other recipes, comma-separated (delta-phi)
    LOOPSCALE_JOINT      an optional joint fit over recipes
    LOOPSCALE_CURVE_FIT  an optional looped-curve fit of the sweep's loss curves (default: fit_curves.json beside
                         the table, when there; `loopscale fit runs_curves.csv --law looped-curve`)
    LOOPSCALE_ADVISE_COMPUTE, LOOPSCALE_ADVISE_MAX_PARAMS   the advice's budget (FLOPs) and unique-parameter cap
    LOOPSCALE_CWD        where relative paths start (default: the shell's PWD, which a kernel inherits)

With none of the data variables set, the notebook shows the demo's runs (runs/demo after `make demo`, looked
for where the user stands, then in the checkout) or else the test fixtures, so it always runs. An empty value
turns an optional input off. Relative paths resolve from where the user started Jupyter or `loopscale
notebook` (LOOPSCALE_CWD, else PWD): a kernel's own working directory is the notebook's folder, which is
never what a user means by `runs/mine`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path

from loopscale.errors import InputError
from loopscale.fit.result import load_fit
from loopscale.plots.inputs import read_table

# the source checkout (the notebook, runs/demo of `make demo`, tests/fixtures) when loopscale is installed
# editable from it
CHECKOUT = Path(__file__).resolve().parents[2]
DATA_KEYS = ("runs", "table", "fit", "free", "compare", "joint", "curve_fit")
ADVICE_KEYS = ("advise_compute", "advise_max_params")
CURVE_FIT = "fit_curves.json"  # a sweep's looped-curve fit, by convention beside its runs.csv


def env_name(key: str) -> str:
    return f"LOOPSCALE_{key.upper()}"


def kernel_env(options: Mapping, cwd: Path, env: Mapping[str, str]) -> dict[str, str]:
    """The kernel's environment (`loopscale notebook`): `env` with each given option (key -> value, None when not
    given; "compare" a list) as its LOOPSCALE_* variable and LOOPSCALE_CWD = `cwd` (an option not given leaves the
    variable as the environment has it)."""
    out = {**env, "LOOPSCALE_CWD": str(cwd)}
    for key in (*DATA_KEYS, *ADVICE_KEYS):
        if options.get(key) is not None:
            out[env_name(key)] = ",".join(options[key]) if key == "compare" else str(options[key])
    return out


def user_dir(env: Mapping[str, str]) -> Path | None:
    """Where the user stands: LOOPSCALE_CWD, else the shell's PWD; None leaves relative paths to the process's
    own working directory (a plain Python process, where that is the same place)."""
    where = env.get("LOOPSCALE_CWD") or env.get("PWD")
    return Path(where) if where else None


def _resolve(path: str | Path, base: Path | None) -> str:
    path = Path(path).expanduser()
    # normpath, not resolve: "../mine" from /a/b reads /a/mine, and a symlinked folder keeps its name
    return str(path if base is None or path.is_absolute() else Path(os.path.normpath(base / path)))


def _demo_dir(root: Path, base: Path | None) -> Path | None:
    """runs/demo with a table and a fit: where the user stands first, then in the checkout."""
    for where in ([base] if base else []) + [root]:
        demo = where / "runs" / "demo"
        if (demo / "runs.csv").exists() and (demo / "fit.json").exists():
            return demo
    return None


def _beside(table: str, name: str) -> str:
    """`name` in the table's folder when it exists there, else "" (not given)."""
    path = Path(table).parent / name
    return str(path) if path.exists() else ""


def _defaults(root: Path, base: Path | None, given: Mapping[str, str]) -> dict[str, str]:
    """The inputs before the LOOPSCALE_* values in `given` override them (already resolved paths)."""
    if given.get("runs") or given.get("table"):
        # the user's own table: nothing of the demo's or the fixtures' fills its gaps
        runs = Path(given["runs"]) if given.get("runs") else None
        if runs is not None and runs.is_file():  # a runs table named where a sweep dir was expected
            runs, given = runs.parent, {**given, "table": given.get("table") or str(runs)}
        table = given.get("table") or str((runs or Path(".")) / "runs.csv")
        runs = runs or Path(table).parent
        fit = runs / "fit.json"
        free = runs / "fit_free.json"
        return {
            "table": table,
            "fit": str(fit) if fit.exists() else "",
            "free": str(free) if free.exists() else "",
            "compare": "",
            "joint": "",
            "curve_fit": _beside(table, CURVE_FIT),
        }
    demo = _demo_dir(root, base)
    if demo is not None:
        table = str(demo / "runs.csv")
        return {
            "table": table,
            "fit": str(demo / "fit.json"),
            "free": _beside(table, "fit_free.json"),
            "curve_fit": _beside(table, CURVE_FIT),
        }
    fixtures = root / "tests" / "fixtures" / "plots"
    return {
        "table": str(fixtures / "runs.csv"),
        "fit": str(fixtures / "fit.baseline.json"),
        "compare": f"{fixtures / 'fit.tbptt.json'},{fixtures / 'fit.hyper.json'}",
        "free": str(fixtures / "free.baseline.json"),
        "joint": str(fixtures / "fit.joint.json"),
    }


def source_line(inputs: Mapping, root: str | Path | None = None) -> str:
    """What the notebook shows, in words: "the test fixtures" only when every input shown is one of them."""
    root = Path(root) if root is not None else CHECKOUT
    fixtures = (root / "tests" / "fixtures" / "plots").resolve()
    shown = [inputs["table"], inputs["fit"], *inputs["compare"], inputs["free"], inputs["joint"]]
    shown = [Path(p) for p in shown if p]
    from_fixtures = [p.resolve().is_relative_to(fixtures) for p in shown]
    files = f"table {inputs['table']}, fit {inputs['fit']}"
    if all(from_fixtures):
        return f"the test fixtures ({files}); set LOOPSCALE_RUNS or run `make demo` to see your own"
    if Path(inputs["table"]).parent.name == "demo" and Path(inputs["fit"]).parent.name == "demo":
        return f"the demo's own runs ({files})"
    mixed = " mixed with the test fixtures" if any(from_fixtures) else ""
    return f"your data{mixed} ({files})"


def diagnostics_inputs(root: str | Path | None = None, env: Mapping[str, str] | None = None) -> dict:
    """{"source", "table", "fit", "compare" (list), "free", "joint", "curve_fit", "advise_compute", "advise_max_params"
    (floats or None)}. `root`: where runs/demo and tests/fixtures are looked for (default: the checkout);
    `env`: the LOOPSCALE_* values (default: the environment)."""
    env = os.environ if env is None else env
    root = Path(root) if root is not None else CHECKOUT
    base = user_dir(env)
    # an empty value stays empty (turns an optional input off); a set path resolves from where the user stands
    given = {
        k: ",".join(_resolve(p, base) for p in env[env_name(k)].split(",") if p)
        for k in DATA_KEYS
        if env_name(k) in env
    }
    chosen = {**{"compare": "", "joint": "", "free": "", "curve_fit": ""}, **_defaults(root, base, given), **given}
    inputs = {
        "table": chosen["table"],
        "fit": chosen["fit"],
        "compare": [p for p in chosen["compare"].split(",") if p],
        "free": chosen["free"] or None,
        "joint": chosen["joint"] or None,
        "curve_fit": chosen["curve_fit"] or None,
        **{k: _number(env, k) for k in ADVICE_KEYS},
    }
    return {"source": source_line(inputs, root), **inputs}


def _number(env: Mapping[str, str], key: str) -> float | None:
    """A positive, finite number (a budget in FLOPs, a parameter cap), or None when not given."""
    value = env.get(env_name(key))
    if not value:
        return None
    try:
        number = float(value)
    except ValueError:
        raise InputError(f"{env_name(key)}={value!r} is not a number") from None
    if not (math.isfinite(number) and number > 0):
        raise InputError(f"{env_name(key)}={value!r} must be a positive, finite number")
    return number


def missing_inputs(inputs: Mapping) -> list[str]:
    """The inputs the notebook would fail to open, as lines naming the variable to set; empty when all can be
    read: each file exists and is what it should be (the table a runs table with runs, each fit a fit JSON),
    read here as the notebook's cells read them, so a bad input stops before a kernel starts."""
    problems = []
    if not inputs["fit"]:
        problems.append(f"no fit JSON beside {inputs['table']}: set LOOPSCALE_FIT (loopscale notebook --fit)")
    files = [(key, inputs[key]) for key in ("table", "fit", "free", "joint", "curve_fit") if inputs.get(key)]
    files += [("compare", path) for path in inputs["compare"]]
    for key, path in files:
        if not Path(path).is_file():
            problems.append(f"{env_name(key)}: {path} does not exist")
            continue
        why = _unreadable(key, path)
        if why is not None:
            problems.append(f"{env_name(key)}: {path} {why}")
    return problems


def _unreadable(key: str, path: str) -> str | None:
    """Why the notebook could not read `path` as its `key` input (plots.read_table, load_fit), or None."""
    try:
        if key == "table":
            return None if len(read_table(path)) else "holds no runs"
        load_fit(path)
    except (ValueError, OSError, KeyError, TypeError) as err:  # what a table or fit record that is not one raises
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        return f"is not a {'runs table' if key == 'table' else 'fit JSON'} ({first})"
    return None
