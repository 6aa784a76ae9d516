"""The arguments several commands read the same way: a fit JSON named on the command line (read with a one-line
error; light on purpose: `equiv` and `compare` read a fit without loading the optimiser), and `--no-probe`.
`--dpi`'s default and range are `loopscale.plots.files`."""

from __future__ import annotations

import argparse

from loopscale.cli import UsageError
from loopscale.errors import LoopscaleError
from loopscale.fit.result import FitResult


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
