"""Imports at the top (issue 36 item 3): a module's dependencies are read at its top. An import inside a
function is kept only where a heavy library must not load for everyone (torch for the injection forms'
modules, a probe, a worker process; datasets for reading a corpus; matplotlib for `fit --plot`), at most
MAX_DEFERRED of them in the package, each with a comment that says why. The command line imports only the
module of the command being run (loopscale/cli/__init__.py COMMANDS), so each command module imports its
libraries at its top and `loopscale --help` still loads none of them."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import loopscale
from support.procs import modules_loaded_by

PACKAGE = Path(loopscale.__file__).parent
MAX_DEFERRED = 40
HEAVY = {"torch", "lightning", "scipy", "pandas", "matplotlib", "datasets"}


def imports_in_functions(source: str) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement inside a function body (nested functions and classes in them included)."""
    found = []

    def walk(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if in_function and isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append(child)
            walk(child, inside)

    walk(ast.parse(source), False)
    return found


def deferred_imports() -> dict[str, list[ast.Import | ast.ImportFrom]]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        nodes = imports_in_functions(path.read_text())
        if nodes:
            found[str(path.relative_to(PACKAGE.parent))] = nodes
    return found


def says_why(lines: list[str], node: ast.Import | ast.ImportFrom) -> bool:
    """A comment on the import's own lines, or on the run of imports and comments right above it."""
    if any("#" in line for line in lines[node.lineno - 1 : node.end_lineno]):
        return True
    i = node.lineno - 2
    while i >= 0 and lines[i].strip().startswith(("import ", "from ", "#")):
        if "#" in lines[i]:
            return True
        i -= 1
    return False


def test_the_counter_finds_imports_in_functions_only():
    source = (
        "import os\nif os.name:\n    import sys\n\n"
        "def f():\n    import json  # why\n\n    def g():\n        from math import pi\n\n"
        "class C:\n    import re\n\n    def m(self):\n        import csv\n"
    )
    assert [ast.unparse(n) for n in imports_in_functions(source)] == [
        "import json",
        "from math import pi",
        "import csv",
    ]


def test_at_most_40_imports_inside_functions():
    found = deferred_imports()
    listing = [f"{path}:{n.lineno}: {ast.unparse(n)}" for path, nodes in found.items() for n in nodes]
    assert 0 < len(listing) <= MAX_DEFERRED, "\n".join(listing)


def test_each_import_inside_a_function_says_why():
    missing = []
    for path, nodes in deferred_imports().items():
        lines = (PACKAGE.parent / path).read_text().splitlines()
        missing += [f"{path}:{n.lineno}: {ast.unparse(n)}" for n in nodes if not says_why(lines, n)]
    assert missing == []


def test_says_why_reads_the_line_and_the_block_above():
    source = "def f():\n    # torch: only here\n    import torch\n    import numpy\n\n    import json\n"
    nodes = imports_in_functions(source)
    assert [says_why(source.splitlines(), n) for n in nodes] == [True, True, False]


def loaded_by_command(argv: list[str]) -> set[str]:
    return modules_loaded_by(
        "import contextlib, io\nfrom loopscale.cli import main\n"
        f"with contextlib.redirect_stdout(io.StringIO()):\n    main({json.dumps(argv)})"
    )


def test_a_command_imports_only_its_own_module():
    """`loopscale params` builds the parser with params' options only: no other command's module, and none of
    the heavy libraries (which `fit`, `plot` or `demo` import at their tops)."""
    loaded = loaded_by_command(["params", "--r", "2"])
    commands = {m for m in loaded if m.startswith("loopscale.cli.")}
    assert commands == {"loopscale.cli.params"}
    assert not {m.split(".")[0] for m in loaded} & HEAVY


def test_help_lists_every_command_without_importing_one():
    loaded = modules_loaded_by(  # --help exits (SystemExit): caught here
        "import contextlib, io\nfrom loopscale.cli import COMMANDS, main\n"
        "out = io.StringIO()\ntry:\n    with contextlib.redirect_stdout(out):\n        main(['--help'])\n"
        "except SystemExit:\n    pass\n"
        "assert all(name in out.getvalue() for name in COMMANDS), out.getvalue()"
    )
    assert not {m for m in loaded if m.startswith("loopscale.cli.")}
    assert not {m.split(".")[0] for m in loaded} & HEAVY


def test_the_architecture_doc_states_the_count():
    """docs/architecture.md says how many imports sit inside functions ("at most 40; N now"): the number it
    states is the one the package has, so the doc cannot drift as imports come and go."""
    text = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    stated = re.search(rf"at most {MAX_DEFERRED}; (\d+) now", text)
    assert stated is not None and int(stated.group(1)) == sum(len(nodes) for nodes in deferred_imports().values())
