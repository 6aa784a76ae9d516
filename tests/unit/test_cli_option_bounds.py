"""The numeric options of validate, isoflop and advise at and past their bounds (issue 58), in-process and before
any fit: loopscale/cli/validate.py (--starts >= 1, --pin-E > 0), loopscale/cli/isoflop.py (--bootstrap >= 20, the
column defaults), loopscale/cli/advise.py (--level in [0.5, 1), --r integers >= 1, positive finite budgets, --dpi
10-1000). A value on its bound passes its check and is stopped by the next one (the fit or table that does not
exist); one past it is refused in its own line, exit 2, nothing printed."""

from __future__ import annotations

import pytest

from loopscale.cli import build_parser
from loopscale.fit.validation.approach2 import N_BOOTSTRAP
from support.cli import run_cli


def one_line(args) -> str:
    res = run_cli(args)
    assert res.returncode == 2 and res.stdout == "", (res.returncode, res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 or lines[0].startswith("usage:"), res.stderr
    return lines[-1]


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--starts", "0"], "loopscale validate: error: --starts must be >= 1; got 0"),
        (["--starts", "1"], "cannot read fit JSON"),
        (["--pin-E", "0"], "loopscale validate: error: --pin-E must be > 0; got 0.0"),
        (["--pin-E", "1e-9"], "cannot read fit JSON"),
    ],
)
def test_validate_starts_and_pinned_e(tmp_path, flags, message):
    line = one_line(["validate", str(tmp_path / "missing.json"), *flags, "--out", str(tmp_path / "v.json")])
    assert line.startswith("loopscale validate: error: ") and message in line
    assert list(tmp_path.iterdir()) == []


def test_validate_and_isoflop_defaults():
    v = build_parser("validate").parse_args(["validate", "f.json"])
    assert (v.starts, v.jobs, v.pin_E, v.column, v.no_conventions, v.allow_changed_table, v.tables) == (
        16,
        None,
        None,
        [],
        False,
        False,
        [],
    )
    i = build_parser("isoflop").parse_args(["isoflop", "t.csv"])
    assert (i.n_col, i.c_col, i.d_col, i.loss_col, i.budget_col, i.bootstrap, i.seed) == (
        "N",
        "C",
        "D",
        "L",
        "C_budget",
        N_BOOTSTRAP,
        0,
    )


@pytest.mark.parametrize(
    "boot, message",
    [("19", "loopscale isoflop: error: --bootstrap must be >= 20; got 19"), ("20", "missing.csv")],
)
def test_isoflop_bootstrap_at_and_below_twenty(tmp_path, boot, message):
    line = one_line(["isoflop", str(tmp_path / "missing.csv"), "--bootstrap", boot, "--md", str(tmp_path / "a.md")])
    assert message in line and not (tmp_path / "a.md").exists()
    if boot == "20":
        assert "--bootstrap" not in line


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--level", "0.49"], "--level must be in [0.5, 1); got 0.49"),
        (["--level", "1.0"], "--level must be in [0.5, 1); got 1.0"),
        (["--level", "0.5"], None),
        (["--level", "0.999"], None),
        (["--dpi", "9"], "--dpi must be between 10 and 1000; got 9"),
        (["--dpi", "1001"], "--dpi must be between 10 and 1000; got 1001"),
        (["--dpi", "10"], None),
        (["--dpi", "1000"], None),
        (["--r", "0,1"], "--r takes integers >= 1; got '0,1'"),
        (["--r", "1.5"], "--r takes comma-separated integers, e.g. 1,2,4,8; got '1.5'"),
        (["--r", "1,2"], None),
        (["--compute", "0"], "must be a positive number; got '0'"),
        (["--compute", "inf"], "must be a positive number; got 'inf'"),
        (["--compute", "x"], "not a number: 'x'"),
        (["--max-unique-params=-1e8"], "must be a positive number; got '-1e8'"),
        (["--compute", "1e-30"], "missing.json"),  # passed: stopped by the fit that does not exist
    ],
)
def test_advise_options_at_and_past_their_bounds(tmp_path, flags, message):
    line = one_line(["advise", str(tmp_path / "missing.json"), *flags])
    # None: passed every option check, stopped by the missing --compute (a missing file is no test-time fit)
    assert line.startswith("loopscale advise: error: ")
    assert (message or "--compute C is needed (training FLOPs)") in line, line


def test_advise_defaults():
    a = build_parser("advise").parse_args(["advise", "f.json"])
    assert (a.level, a.dpi, a.family, a.r, a.compute, a.override) == (0.95, 200, "auto", None, None, [])
