"""The arguments several commands read the same way: a fit JSON named on the command line (read with a one-line
error), and `--dpi` (its default and range). Light on purpose: `fit` and `advise` take `--dpi` without loading
matplotlib, `equiv` and `compare` read a fit without loading the optimiser."""

from __future__ import annotations

import argparse

from loopscale.cli import UsageError
from loopscale.errors import LoopscaleError
from loopscale.fit.result import FitResult

# loopscale/plots/registry.py DPI, written out: a parser taking --dpi must not import matplotlib
DPI = 200


def check_dpi(dpi: int) -> None:
    if not 10 <= dpi <= 1000:
        raise UsageError(f"--dpi must be between 10 and 1000; got {dpi}")


def read_fit_arg(path: str) -> FitResult:
    """The fit JSON at `path`, or a one-line UsageError naming it."""
    try:
        return FitResult.from_json(path)
    except LoopscaleError:  # already one line naming the file (`result.read_fit_json`)
        raise
    except (OSError, ValueError, TypeError) as err:
        raise UsageError(f"cannot read fit JSON {path}: {str(err).splitlines()[0]}") from None


def add_probe_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--no-probe",
        dest="probe",
        action="store_false",
        help="skip the CPU throughput probe (a few training steps of each CPU job's model on this machine, "
        "~0.5 s per model shape, cached in $LOOPSCALE_CACHE or ~/.cache/loopscale) and its CPU hours",
    )
