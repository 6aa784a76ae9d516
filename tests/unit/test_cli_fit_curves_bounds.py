"""`loopscale fit --curves`'s options at and past their bounds (issue 58, loopscale/cli/fit_curves.py), before any
fit: --curve-start in [0, 1) (0 and 0.99 pass, shown by the next refusal, -0.01 and 1 refused), --starts >= 1, the
multipower law's own --warmup-drops; each one line, exit 2, nothing written. A six-row curves table."""

from __future__ import annotations

import pytest

from loopscale.cli import build_parser
from loopscale.cli.fit_curves import DEFAULT_CURVE_START
from support.cli import run_cli

CURVES = "run,step,lr,val_loss\na,0,1.0,3.0\na,10,1.0,2.9\na,20,0.5,2.8\nb,0,1.0,3.1\nb,10,0.5,2.95\nb,20,0.1,2.85\n"
WARMUP = "--warmup-drops is an option of the multipower law, not of lr-annealing"
RIVAL = ["--law", "lr-annealing", "--warmup-drops"]


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--curve-start", "-0.01"], "--curve-start -0.01: a share of each run's steps, in [0, 1)"),
        (["--curve-start", "1"], "--curve-start 1.0: a share of each run's steps, in [0, 1)"),
        (["--curve-start", "0", *RIVAL], WARMUP),
        (["--curve-start", "0.99", *RIVAL], WARMUP),
        (["--starts", "0"], "--starts must be >= 1; got 0"),
        (["--starts", "1", *RIVAL], WARMUP),
    ],
)
def test_each_bound_at_and_past_it(tmp_path, flags, message):
    path = tmp_path / "curves.csv"
    path.write_text(CURVES)
    out = tmp_path / "fit.json"
    res = run_cli(["fit", path, "--curves", *flags, "--out", out])
    assert (res.returncode, res.stdout) == (2, "")
    assert res.stderr.strip() == f"loopscale fit: error: {message}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["curves.csv"]


def test_the_curve_options_defaults():
    args = build_parser("fit").parse_args(["fit", "c.csv", "--curves"])
    assert (args.run_col, args.step_col, args.lr_col, args.curve_start, args.lr_before_first) == (
        "run",
        "step",
        "lr",
        0.0,
        "zero",
    )
    assert DEFAULT_CURVE_START == 0.0
