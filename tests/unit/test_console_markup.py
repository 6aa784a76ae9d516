"""What the commands print of their data reaches the screen as it is: rich reads "[...]" as markup, so an open interval
"[open, 0.61]" or "[nan, nan]" vanished from `fit`'s output, and a failed run's reason with a path in brackets
("[/tmp/x]") ended `collect` with rich's MarkupError."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from loopscale.cli.collect import _print_problems
from loopscale.cli.fit_output import print_result
from loopscale.fit.fit_table import fit_table
from loopscale.fit.result import FitResult
from loopscale.fit.runs_table import canonical_table
from support.paths import FIXTURES


def squeezed(text: str) -> str:
    return "".join(text.split())  # rich wraps to the terminal's width


def test_fit_prints_an_open_profile_interval_and_a_nan_interval(capsys):
    table = canonical_table(pd.read_csv(FIXTURES / "looped_synthetic_small.csv"), "looped")
    with np.errstate(all="ignore"):
        record = fit_table(table, "looped", profile=True).to_json_dict()
    record["profile_phi"]["interval"] = [None, 0.61]
    record["ci95"]["alpha"] = [math.nan, math.nan]
    print_result(FitResult.from_dict(record))
    out = squeezed(capsys.readouterr().out)
    assert "phiprofileinterval(robustLR,95%):[open,0.61]" in out
    assert "[nan,nan]" in out


def test_collect_prints_a_reason_with_brackets_as_it_is(capsys):
    reason = "cannot write [/tmp/x]: read-only; model [bold] r=[1,2]"
    _print_problems([{"run_dir": "/runs/s/baseline-r2-d16", "status": "failed", "step": 3, "reason": reason}])
    assert squeezed(reason) in squeezed(capsys.readouterr().err)
