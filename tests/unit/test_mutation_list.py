"""The mutation benchmark's list stays true to the tree (issue 35): every mutation's snippet occurs exactly once in
its file, and every test it names exists, so a refactor that moves a snippet or renames a test fails here, in the
default suite, instead of turning the mutation into a silent `stale` or `broken` in the next `make mutations`
(three snippets had gone stale that way between two full runs)."""

from __future__ import annotations

import ast
import importlib.util
import json
import sys
from dataclasses import replace

import pytest

from support.paths import REPO_ROOT


def _benchmark():
    spec = importlib.util.spec_from_file_location("loopscale_mutations", REPO_ROOT / "benchmarks" / "mutations.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


BENCH = _benchmark()


def _test_functions(path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name.startswith("test")}


@pytest.mark.parametrize("mutation", BENCH.MUTATIONS, ids=lambda m: m.id)
def test_each_mutation_applies_and_names_tests_that_exist(mutation):
    problem = BENCH.snippet_problem(REPO_ROOT, mutation)
    assert problem is None, problem
    assert mutation.tests, "a mutation that names no test measures nothing"
    for node in mutation.tests:
        file, _, name = node.partition("::")
        path = REPO_ROOT / file
        assert path.is_file(), f"{mutation.id}: {file} does not exist"
        if name:
            assert name.split("[")[0] in _test_functions(path), f"{mutation.id}: no test {name} in {file}"


def test_a_moved_snippet_is_reported_stale():
    """The check above can fail: a snippet that is no longer in its file is a problem, as is one found twice."""
    mutation = BENCH.MUTATIONS[0]
    assert BENCH.snippet_problem(REPO_ROOT, replace(mutation, old=mutation.old + "\0moved")) is not None
    assert BENCH.snippet_problem(REPO_ROOT, replace(mutation, old="\n")) is not None
    assert BENCH.snippet_problem(REPO_ROOT, replace(mutation, file="loopscale/gone.py")) is not None


def test_the_list_has_unique_ids_and_at_least_the_issues_thirty():
    ids = [m.id for m in BENCH.MUTATIONS]
    assert len(ids) == len(set(ids))
    assert len(ids) >= 30


def test_a_blind_rounds_list_is_read_as_mutations(tmp_path):
    """`mutations.py --from LIST.json` (a blind round's list, docs/results.md): a JSON list, or a frozen record
    holding it under "mutations", read into the same Mutation entries the curated list has."""
    entry = {"id": "x", "file": "loopscale/errors.py", "old": "exit_code = 2", "new": "exit_code = 3"}
    entry |= {"tests": ["tests/unit/test_refusals.py"], "promise": "a user error exits 2"}
    plain, frozen = tmp_path / "round.json", tmp_path / "round.frozen.json"
    plain.write_text(json.dumps([entry]))
    frozen.write_text(json.dumps({"commit": "abc", "mutations": [entry]}))
    for path in (plain, frozen):
        (m,) = BENCH.listed_mutations(path)
        assert m == BENCH.Mutation("x", "loopscale/errors.py", "exit_code = 2", "exit_code = 3",
                                   ("tests/unit/test_refusals.py",), "a user error exits 2")  # fmt: skip
        assert BENCH.snippet_problem(REPO_ROOT, m) is None


def _tiny_tree(tmp_path):
    """A tree the runner can run a mutant in: a module and five tests of it (one skips, one is marked slow, one
    hangs, one kills its own pytest, one checks the module), with its own pytest.ini so the tests run there, not
    under this suite."""
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow: a slow test\n")
    (tree / "limit.py").write_text("LIMIT_TOKENS = 2\n")
    (tree / "test_limit.py").write_text(
        "import os\nimport signal\nimport time\nimport pytest\nimport limit\n\n"
        "def test_needs_root():\n    pytest.skip('needs root')\n\n"
        "@pytest.mark.slow\ndef test_slow():\n    assert limit.LIMIT_TOKENS == 2\n\n"
        "def test_hangs():\n    time.sleep(60)\n\n"
        "def test_killed():\n    os.kill(os.getpid(), signal.SIGKILL)\n\n"
        "def test_limit():\n    assert limit.LIMIT_TOKENS == 2\n"
    )
    return tree


def _mutant(test, new="LIMIT_TOKENS = 3"):
    return BENCH.Mutation("limit-off", "limit.py", "LIMIT_TOKENS = 2", new, (f"test_limit.py::{test}",), "p")


@pytest.mark.system  # runs pytest in a child process: the real output the runner reads
def test_a_mutant_no_test_ran_on_is_reported_not_run_never_caught(tmp_path):
    """A mutant whose named tests all skipped or were deselected is `not-run` with why, never caught; a
    pytest that printed nothing (killed outright, as by the OOM killer, or still running at the timeout) is
    broken or a timeout, not a crash of the runner (it read the last line of an empty output). A failing test
    still catches, a passing one survives, and the mutated file is restored after each."""
    tree = _tiny_tree(tmp_path)
    run = BENCH.run_mutation
    skipped = run(tree, _mutant("test_needs_root"), 120.0, [])
    assert (skipped["verdict"], skipped["detail"]) == (
        "not-run",
        "no test ran: every named test skipped or none reported passed: needs root",
    )
    deselected = run(tree, _mutant("test_slow"), 120.0, ["-m", "not slow"])
    assert deselected["verdict"] == "not-run"
    assert deselected["detail"].startswith("no test ran: none collected (every named test deselected?): ")
    assert "1 deselected" in deselected["detail"]
    killed = run(tree, _mutant("test_killed"), 120.0, [])
    assert (killed["verdict"], killed["detail"]) == ("broken", "pytest exit -9: (pytest printed nothing)")
    hung = run(tree, _mutant("test_hangs"), 3.0, [])
    assert (hung["verdict"], hung["detail"]) == (
        "timeout",
        "still running after 3 s; last output: (pytest printed nothing)",
    )
    caught = run(tree, _mutant("test_limit"), 120.0, [])
    assert (caught["verdict"], caught["detail"]) == ("caught", "test_limit.py::test_limit")
    survived = run(tree, _mutant("test_limit", new="LIMIT_TOKENS = 2  # same"), 120.0, [])
    assert (survived["verdict"], survived["detail"]) == ("SURVIVED", "every named test passed")
    quiet = run(tree, _mutant("test_limit", new="LIMIT_TOKENS = 2  # same"), 120.0, ["-x", "-q", "-p", "no:warnings"])
    assert quiet["verdict"] == "SURVIVED"  # the runner's -q and the user's: still a survivor, not not-run
    assert (tree / "limit.py").read_text() == "LIMIT_TOKENS = 2\n"


def test_a_failing_exit_with_no_failed_test_named_is_broken_not_caught():
    """pytest exit 1 with no FAILED/ERROR line (its summary turned off) names no test the mutant failed: broken.
    Exit 5 (nothing collected) is not-run; another exit is broken with pytest's last line."""
    assert BENCH.classify(1, "", 60.0) == (
        "broken",
        "pytest exit 1 but no failed test listed: (pytest printed nothing)",
    )
    assert BENCH.classify(1, "F\nFAILED t.py::test_a - assert 1\n1 failed in 0.1s\n", 60.0) == (
        "caught",
        "t.py::test_a",
    )
    assert BENCH.classify(5, "\n", 60.0)[0] == "not-run"
    assert BENCH.classify(4, "ERROR: not found: t.py::test_b\n1 warning in 0.01s\n", 60.0) == (
        "broken",
        "pytest exit 4: 1 warning in 0.01s",
    )
