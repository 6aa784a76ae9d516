"""loopscale's modules form layers (issue 17): no import cycle, neither among the imports a module runs when
it is loaded nor counting the imports deferred into functions. Read from the source with ast, so the test
sees every module whether or not anything imports it."""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

from train_helpers import modules_loaded_by

import loopscale

PACKAGE = Path(loopscale.__file__).parent


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imported_modules(importer: str, node: ast.Import | ast.ImportFrom) -> set[str]:
    """The loopscale modules an import statement loads (`from loopscale.x import y`, `from . import y`,
    `import loopscale.x`), the importer itself left out."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        if node.level:  # relative: from the importer's package, up level - 1 packages
            package = importer if MODULES[importer].name == "__init__.py" else importer.rpartition(".")[0]
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            module = ".".join([*base, *([node.module] if node.module else [])])
        else:
            module = node.module or ""
        names = [module, *(f"{module}.{alias.name}" for alias in node.names)]
    found = set()
    for name in names:
        while name and name not in MODULES:  # loopscale.x.func -> loopscale.x
            name = name.rpartition(".")[0]
        if name and name != importer:
            found.add(name)
    return found


def _type_checking_only(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def module_level_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """The imports that run when the module is loaded: top-level statements, including inside top-level
    try/if blocks, but not `if TYPE_CHECKING:` blocks or function and class bodies."""
    found, todo = [], list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif isinstance(node, (ast.If, ast.Try, ast.With)) and not _type_checking_only(node):
            for field in ("body", "orelse", "finalbody", "handlers"):
                todo.extend(getattr(node, field, []))
        elif isinstance(node, ast.ExceptHandler):
            todo.extend(node.body)
    return found


def import_graph(module_level_only: bool) -> dict[str, set[str]]:
    graph = {}
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        if module_level_only:
            nodes = module_level_imports(tree)
        else:
            nodes = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
        graph[name] = set().union(*(imported_modules(name, n) for n in nodes))
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as [a, b, ..., a], or None (depth-first search, three colours)."""
    state: dict[str, str] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_walk_sees_the_package():
    graph = import_graph(module_level_only=False)
    assert {"loopscale.train", "loopscale.planning", "loopscale.cli.fit", "loopscale.cli"} <= graph.keys()
    assert "loopscale.planning" in graph["loopscale.forks"]
    assert "loopscale.cli" in graph["loopscale.cli.fit"]  # `from . import UsageError`
    assert "loopscale.laws" in graph["loopscale.tables"]  # `from .laws import make_law`


def test_find_cycle_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_no_cycle_among_module_level_imports():
    assert find_cycle(import_graph(module_level_only=True)) is None


def test_no_cycle_counting_imports_inside_functions():
    """A deferred import keeps start-up fast; it must not hide two modules that need each other (train.py
    and forks.py once did: planning now sits below both)."""
    assert find_cycle(import_graph(module_level_only=False)) is None


def test_planning_sits_below_training():
    graph = import_graph(module_level_only=False)
    below = {"loopscale.planning", "loopscale.config", "loopscale.accounting", "loopscale.schedule"}
    below |= {"loopscale.model_config", "loopscale.naming", "loopscale.config_checks"}  # config.py's parts
    for name in below:
        assert not graph[name] & {"loopscale.train", "loopscale.runner", "loopscale.forks", "loopscale.sweep"}, name


# What reads a fit record (figures, report, conditioning numbers) and what fits one.
PLOT_MODULES = ("inputs", "layout", "curves", "single_fit", "recipes", "registry")
FIT_READERS = (
    "loopscale.plots",
    *(f"loopscale.plots.{m}" for m in PLOT_MODULES),
    "loopscale.report",
    "loopscale.conditioning",
    "loopscale.fit_result",
)
OPTIMISER = {"loopscale.fit", "loopscale.objective", "loopscale.starts", "loopscale.optimize", "loopscale.uncertainty"}


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in graph[todo.pop()] - seen:
            seen.add(nxt)
            todo.append(nxt)
    return seen


def test_the_fit_modules_form_layers():
    """record and box below the objective, below the starts, below the optimiser, below the uncertainty
    steps, below fit_table: each imports only from the layers under it (deferred imports counted)."""
    graph = import_graph(module_level_only=False)
    layers = ["fit_bounds", "fit_result", "objective", "starts", "optimize", "uncertainty", "fit"]
    for i, name in enumerate(layers):
        above = {f"loopscale.{m}" for m in layers[i + 1 :]}
        assert not reachable(graph, f"loopscale.{name}") & above, name


def test_reading_a_fit_never_reaches_the_optimiser():
    """Plots, the report and the conditioning numbers read fit records without the fitter: no import of
    theirs, deferred ones included, leads to the optimiser modules (or to joint.py, which fits)."""
    graph = import_graph(module_level_only=False)
    for name in FIT_READERS:
        assert not reachable(graph, name) & (OPTIMISER | {"loopscale.joint"}), name


def test_importing_the_readers_loads_neither_the_optimiser_nor_scipy_optimize():
    loaded = modules_loaded_by(f"import {', '.join(FIT_READERS)}")
    assert set(FIT_READERS) <= loaded  # the import did run
    assert not loaded & (OPTIMISER | {"loopscale.joint", "scipy.optimize"})


BENCHMARKS = Path(loopscale.__file__).parents[1] / "benchmarks"


def benchmark_imports() -> dict[str, list[tuple[str, str | None]]]:
    """Per benchmark script, every (module, name) it imports, deferred imports included."""
    found = {}
    for path in sorted(BENCHMARKS.glob("*.py")):
        pairs = []
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                pairs += [(alias.name, None) for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                pairs += [(node.module, alias.name) for alias in node.names]
        found[path.name] = pairs
    return found


def test_benchmarks_import_only_the_package_and_each_other():
    """Benchmarks measure the installed package: nothing from tests/ (no sys.path into it) or from the
    command lines, and every loopscale name they import exists (a rename cannot leave one broken)."""
    imports = benchmark_imports()
    assert {"bench_demo.py", "bench_optim.py", "step_timing.py"} <= imports.keys()
    local = {p.stem for p in BENCHMARKS.glob("*.py")}
    tests_modules = {p.stem for p in (BENCHMARKS.parent / "tests").glob("*.py")}
    for script, pairs in imports.items():
        assert '"tests"' not in (BENCHMARKS / script).read_text(), script
        for module, name in pairs:
            top = module.split(".")[0]
            assert top not in tests_modules - local, (script, module)
            assert not module.startswith("loopscale.cli"), (script, module)
            if top == "loopscale":
                imported = importlib.import_module(module)
                assert name is None or hasattr(imported, name) or importlib.util.find_spec(f"{module}.{name}"), (
                    script,
                    module,
                    name,
                )
