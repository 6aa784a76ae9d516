"""Laws by capability (issue 36): outside a law's own module, no code of the package compares a law's name
(`fit.law == "looped"`, `law in ("chinchilla", ...)`), keys a table by law names or keeps a hand list of them;
it asks the law's class (`loopscale.fit.laws.registry.law_class`) what the law has and needs. Read from the
source with ast, so comments, docstrings and messages that mention a law are not comparisons."""

from __future__ import annotations

import ast
from pathlib import Path

import loopscale
from loopscale.fit.laws.registry import law_class, law_names

PACKAGE = Path(loopscale.__file__).parent


def _names_in(node: ast.AST, names: set[str]) -> list[str]:
    """The law names a constant, or a tuple / list / set of constants, holds."""
    if isinstance(node, ast.Constant) and node.value in names:
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in names]
    return []


def name_comparisons(source: str, names: set[str]) -> list[tuple[int, str]]:
    """(line, what) of each comparison with a law name (==, !=, in, not in, a match case), each dict keyed by
    two or more law names (a table by law) and each literal list of two or more law names in the source."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            for side in [node.left, *node.comparators]:
                found += [(node.lineno, f"compares {n!r}") for n in _names_in(side, names)]
        elif isinstance(node, ast.MatchValue):
            found += [(node.lineno, f"matches {n!r}") for n in _names_in(node.value, names)]
        elif isinstance(node, ast.Dict):
            keys = [n for k in node.keys if k is not None for n in _names_in(k, names)]
            found += [(node.lineno, f"keys a dict by {keys}")] if len(keys) >= 2 else []
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)) and len(_names_in(node, names)) >= 2:
            found.append((node.lineno, f"lists {_names_in(node, names)}"))
    return sorted(found)


def own_modules() -> dict[str, str]:
    """law name -> the path (below loopscale/) of the module that defines its class."""
    out = {}
    for name in law_names():
        module = law_class(name).__module__
        out[name] = Path(*module.split(".")[1:]).with_suffix(".py").as_posix()
    return out


def test_the_check_finds_comparisons_and_only_them():
    names = {"looped", "chinchilla"}
    source = (
        'if fit.law == "looped" or law in ("chinchilla", "x"):\n    pass\n'
        'TEXT = {"looped": "L = ...", "chinchilla": "L = E + ..."}\nLAWS = ["looped", "chinchilla"]\n'
        'match law:\n    case "chinchilla":\n        pass\n'
        'def f(law="looped"):\n    """the looped law"""\n    return make_law("looped"), f"{law} == looped"\n'
    )
    found = name_comparisons(source, names)
    assert [line for line, _ in found] == [1, 1, 3, 4, 6]
    assert name_comparisons('fit_table(table, "looped")\nx = {"looped": 1, "level": 2}\n', names) == []


def test_no_law_name_is_compared_outside_its_own_module():
    own = own_modules()
    assert {"chinchilla", "looped", "looped-free", "looped-joint"} <= own.keys()
    offences = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        names = {n for n, module in own.items() if module != rel}  # a law's module may say its own name
        found = name_comparisons(path.read_text(), names)
        if found:
            offences[rel] = found
    assert offences == {}
