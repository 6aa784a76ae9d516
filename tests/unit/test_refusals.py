"""`loopscale-train` refuses what its command line alone rules out before it imports the training stack
(loopscale/train/refusals.py, called first by loopscale/train/command.py): an unsafe run or sweep name, a
LOOPSCALE_CONFIG_PATH that names no directory. The refusal's line and code are tested end to end in
test_train_one_line.py and test_one_line_errors.py; here, what the refused process loaded."""

from __future__ import annotations

import pytest

from support.procs import modules_loaded_by

STACK = {"torch", "lightning"}

LAUNCH = """
import os, sys
os.environ.update({env})
sys.argv = ["loopscale-train", *{argv}]
from loopscale.train.command import main
try:
    main()
except SystemExit as exit:
    assert {check}, exit.code
else:
    raise AssertionError("main() returned")
"""


@pytest.mark.parametrize(
    "argv, env, check",
    [
        (["run_name=../escape"], {}, "exit.code == 2"),
        (["-m", "sweep=ok,../x", "seed=0,1"], {}, "exit.code == 2"),
        ([], {"LOOPSCALE_CONFIG_PATH": "/nonexistent/x"}, "exit.code.startswith('loopscale-train: error: ')"),
    ],
    ids=["run_name", "sweep-list", "config-path"],
)
def test_a_refused_launch_never_imports_the_training_stack(argv, env, check):
    modules = modules_loaded_by(LAUNCH.format(env=env, argv=argv, check=check))
    assert "loopscale.train.refusals" in modules
    assert STACK.isdisjoint(modules), sorted(STACK & modules)


def test_a_launch_that_passes_the_refusals_does_import_it():
    """The positive control: the same probe sees the stack when the launch goes on (`--help`: Hydra's help)."""
    modules = modules_loaded_by(LAUNCH.format(env={}, argv=["--help"], check="exit.code in (0, None)"))
    assert STACK <= modules
