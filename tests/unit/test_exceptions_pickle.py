"""Every exception loopscale defines crosses a process boundary intact (worker pools, submitit): it pickles
and unpickles to the same type, message and fields. `Diverged` once did not (its message was its only
pickled argument), which killed the demo pool's result thread and hung `loopscale demo` forever."""

from __future__ import annotations

import importlib
import inspect
import pickle
import pkgutil
from pathlib import Path

import pytest

import loopscale

# One instance of each exception type, built as the code raises it. A new exception type must be added
# here: test_every_exception_type_is_covered finds the ones that are missing.
SAMPLES = {
    "loopscale.errors.LoopscaleError": lambda m: m.LoopscaleError("something the user fixes"),
    "loopscale.errors.ConfigError": lambda m: m.ConfigError("r=3 is not allowed"),
    "loopscale.errors.InputError": lambda m: m.InputError("cannot read runs.csv"),
    "loopscale.errors.UnknownName": lambda m: m.UnknownName(
        "model.recipe='hugin' is not one of ...; did you mean 'huginn'?"
    ),
    "loopscale.train.lightning_module.Diverged": lambda m: m.Diverged(3, float("nan")),
    "loopscale.train.lightning_module.InjectedFailure": lambda m: m.InjectedFailure("trainer.fail_at_step=7 reached"),
    "loopscale.train.lock.RunLocked": lambda m: m.RunLocked(
        Path("runs/x/y"), {"host": "n1", "pid": 12, "slurm_job_id": "7_1", "started": 1.0}
    ),
    "loopscale.launch.launchers.LayoutError": lambda m: m.LayoutError("hydra.launcher.nodes=2 but trainer.num_nodes=1"),
    "loopscale.launch.launchers.UnsafeSubmititFolder": lambda m: m.UnsafeSubmititFolder("/shared is not private"),
    "loopscale.launch.launchers.LaunchRefused": lambda m: m.LaunchRefused("refused before submission (1 problem(s))"),
    "loopscale.signals.Terminated": lambda m: m.Terminated(),
    "loopscale.signals.Interrupted": lambda m: m.Interrupted(),
    "loopscale.cli.UsageError": lambda m: m.UsageError("--bootstrap must be >= 0"),
    "loopscale.launch.local_workers.JobFailed": lambda m: m.JobFailed(
        "r1", "diverged", "nan at step 3", "runs/r1/run.json"
    ),
    "loopscale.train.identity.IdentityMismatch": lambda m: m.IdentityMismatch("runs/x holds a run of another config"),
    "loopscale.data.corpus.DataError": lambda m: m.DataError("path='x' does not exist"),
    "loopscale.train.run_json.BadRecord": lambda m: m.BadRecord("runs/x/run.json is not valid JSON"),
    "loopscale.train.checkpoint.CheckpointRefused": lambda m: m.CheckpointRefused("last.ckpt holds more than tensors"),
    "loopscale.train.entry.RunFailed": lambda m: m.RunFailed("loopscale-train: a run of this sweep failed"),
    "loopscale.analysis.notebook_run.NotebookFailed": lambda m: m.NotebookFailed(
        "cell 7 (collapse) raised ValueError: x"
    ),
    "loopscale.analysis.notebook_run.MissingExtra": lambda m: m.MissingExtra("nbclient is not installed"),
    "loopscale.analysis.fit_files.FigureFailed": lambda m: m.FigureFailed("figure collapse failed; fit.json kept"),
    "loopscale.fit.validation.conventions.Missing": lambda m: m.Missing("the table has no seq_len column"),
    "hydra_plugins.loopscale_searchpath.ConfigPathError": lambda m: m.ConfigPathError("LOOPSCALE_CONFIG_PATH ..."),
}


def _modules():
    names = [m.name for m in pkgutil.walk_packages(loopscale.__path__, "loopscale.") if not m.name.endswith("__main__")]
    return [importlib.import_module(n) for n in [*names, "hydra_plugins.loopscale_searchpath"]]


def _defined_exceptions() -> set[str]:
    found = set()
    for module in _modules():
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, BaseException) and obj.__module__ == module.__name__:
                found.add(f"{obj.__module__}.{obj.__qualname__}")
    return found


def test_every_exception_type_is_covered():
    assert _defined_exceptions() - set(SAMPLES) == set(), "add a sample of each new exception type to SAMPLES"


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_exception_pickles_and_unpickles(name):
    module_name, cls_name = name.rsplit(".", 1)
    module = importlib.import_module(module_name)
    err = SAMPLES[name](module)
    assert type(err).__name__ == cls_name
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is type(err) and str(back) == str(err) and back.args == err.args
    assert vars(back).keys() == vars(err).keys() and _nan_equal(back, err)


def _nan_equal(a, b) -> bool:
    """Fields equal, NaN included (Diverged keeps the non-finite loss it saw)."""
    import math

    for key in vars(b):
        x, y = getattr(a, key), getattr(b, key)
        if not (x == y or (isinstance(x, float) and math.isnan(x) and math.isnan(y))):
            return False
    return True


def test_every_user_fixable_error_is_a_loopscale_error():
    """One base for what the user fixes: each of these is reported as one line by every entry point
    (loopscale/errors.py), and stays a ValueError for callers that catch that."""
    from loopscale.cli import UsageError
    from loopscale.data.corpus import DataError
    from loopscale.errors import ConfigError, InputError, LoopscaleError, user_error
    from loopscale.launch.launchers import LaunchRefused, LayoutError, UnsafeSubmititFolder
    from loopscale.train.identity import IdentityMismatch
    from loopscale.train.run_json import BadRecord

    for cls in (DataError, IdentityMismatch, LayoutError, UnsafeSubmititFolder, LaunchRefused, BadRecord, UsageError):
        assert issubclass(cls, LoopscaleError), cls
    assert all(issubclass(c, ValueError) for c in (ConfigError, InputError, DataError, IdentityMismatch))
    found = user_error(ConfigError("model.r=3 is not allowed\n  (full key: model.r)"))
    assert (found.line, found.exit_code, found.disk) == ("model.r=3 is not allowed", 2, False)
    full = user_error(OSError(28, "No space left on device", "/runs/x"))
    assert (full.line, full.exit_code, full.disk) == ("No space left on device (/runs/x)", 1, True)
    assert user_error(RuntimeError("a bug")) is None and user_error(KeyError("x")) is None
