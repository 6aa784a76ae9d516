"""loopscale's layers: the declared contract (pyproject.toml [tool.importlinter]: the stages, the fit's inner
layers, what may not reach the optimiser or the trainer) holds, checked by import-linter with deferred imports
counted; and no import cycle, neither among the imports a module runs when it is loaded nor counting the imports
deferred into functions (read from the source with ast, so the test sees every module whether or not anything
imports it)."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import loopscale
from support.procs import modules_loaded_by

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
    assert {"loopscale.train.entry", "loopscale.train.plan", "loopscale.cli.fit", "loopscale.cli"} <= graph.keys()
    assert "loopscale.train.plan" in graph["loopscale.train.forks"]
    assert "loopscale.cli" in graph["loopscale.cli.fit"]  # `from . import UsageError`
    assert "loopscale.fit.laws.registry" in graph["loopscale.fit.runs_table"]  # `from .laws.registry import make_law`


def test_find_cycle_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_no_cycle_among_module_level_imports():
    assert find_cycle(import_graph(module_level_only=True)) is None


def test_no_cycle_counting_imports_inside_functions():
    """A deferred import keeps start-up fast; it must not hide two modules that need each other (train.py
    and forks.py once did: planning now sits below both)."""
    assert find_cycle(import_graph(module_level_only=False)) is None


# What reads a fit record (figures, report, conditioning numbers) and what fits one.
PLOT_MODULES = ("inputs", "layout", "curves", "single_fit", "recipes", "registry")
FIT_READERS = (
    "loopscale.plots",
    *(f"loopscale.plots.{m}" for m in PLOT_MODULES),
    "loopscale.analysis.report",
    "loopscale.analysis.conditioning",
    "loopscale.fit.result",
)
OPTIMISER = {
    "loopscale.fit.fit_table",
    "loopscale.fit.objective",
    "loopscale.fit.starts",
    "loopscale.fit.optimize",
    "loopscale.fit.uncertainty",
}


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in graph[todo.pop()] - seen:
            seen.add(nxt)
            todo.append(nxt)
    return seen


def lint_imports(root: Path, env_path: Path | None = None) -> subprocess.CompletedProcess:
    """import-linter over the package found first on sys.path (env_path, else the installed one), with the
    contract of `root`/pyproject.toml."""
    env = {"PATH": str(Path(sys.executable).parent), **({"PYTHONPATH": str(env_path)} if env_path else {})}
    lint = Path(sys.executable).parent / "lint-imports"
    return subprocess.run([str(lint), "--no-cache"], cwd=root, capture_output=True, text=True, env=env, timeout=300)


def test_the_declared_layers_hold():
    proc = lint_imports(PACKAGE.parent)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "0 broken" in proc.stdout and "loopscale stages KEPT" in proc.stdout


def test_an_arrow_against_the_layers_breaks_the_contract(tmp_path):
    """The contract is not vacuous: a copy of the package whose config layer imports the CLI breaks it."""
    shutil.copytree(PACKAGE, tmp_path / "loopscale", ignore=shutil.ignore_patterns("__pycache__", "conf"))
    shutil.copy(PACKAGE.parent / "pyproject.toml", tmp_path / "pyproject.toml")
    checks = tmp_path / "loopscale" / "config" / "checks.py"
    checks.write_text(checks.read_text() + "\n\ndef _arrow():\n    import loopscale.cli  # noqa\n")
    proc = lint_imports(tmp_path, env_path=tmp_path)
    assert proc.returncode != 0
    assert "loopscale.config is not allowed to import loopscale.cli" in proc.stdout


def test_importing_the_readers_loads_neither_the_optimiser_nor_scipy_optimize():
    loaded = modules_loaded_by(f"import {', '.join(FIT_READERS)}")
    assert set(FIT_READERS) <= loaded  # the import did run
    assert not loaded & (OPTIMISER | {"loopscale.fit.joint", "scipy.optimize"})


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
    tests_modules = {p.stem for p in (BENCHMARKS.parent / "tests").rglob("*.py")} | {"support"}
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
