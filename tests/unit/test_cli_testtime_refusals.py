"""`loopscale fit --law testtime`'s refusals, each flag it does not take by name (issue 58,
loopscale/cli/fit_testtime.py): one line, exit 2, before the table is read or anything written; the options at
their neutral values (--bootstrap 0, --drop-top-k 0) pass."""

from __future__ import annotations

import pytest

from support.cli import run_cli

TABLE = "model,r_train,r_eval,L\na,4,1,3.9\na,4,2,3.5\na,4,4,3.2\na,4,8,3.22\nb,s,1,3.6\nb,s,2,3.3\nb,s,4,3.1\n"
NOT_PER_MODEL = "is not available with --law testtime (each model and the joint fit are fitted)"


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--joint", "model"], f"--joint {NOT_PER_MODEL}"),
        (["--group", "model"], f"--group {NOT_PER_MODEL}"),
        (["--holdout-largest"], f"--holdout-largest {NOT_PER_MODEL}"),
        (["--cluster", "model"], f"--cluster {NOT_PER_MODEL}"),
        (["--drop-top-k", "1"], f"--drop-top-k {NOT_PER_MODEL}"),
        (
            ["--bootstrap", "1"],
            "--bootstrap is not available with --law testtime (its intervals are profile intervals)",
        ),
        (["--dpi", "9"], "--dpi must be between 10 and 1000; got 9"),
    ],
)
def test_each_option_it_does_not_take_is_named(tmp_path, flags, message):
    path = tmp_path / "t.csv"
    path.write_text(TABLE)
    out = tmp_path / "tt.json"
    res = run_cli(["fit", path, "--law", "testtime", *flags, "--out", out])
    assert (res.returncode, res.stdout) == (2, "")
    assert res.stderr.strip() == f"loopscale fit: error: {message}"
    assert not out.exists()


def test_two_tables_are_refused_and_neutral_values_pass_to_the_table(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text(TABLE)
    res = run_cli(["fit", path, path, "--law", "testtime"])
    assert res.returncode == 2 and res.stderr.strip() == "loopscale fit: error: --law testtime reads one table; got 2"
    # --bootstrap 0 and --drop-top-k 0 are the defaults: taken; stopped only by the table's missing column
    res = run_cli(["fit", path, "--law", "testtime", "--bootstrap", "0", "--drop-top-k", "0", "--r-eval-col", "x"])
    assert res.returncode == 2 and "no r_eval column 'x' (--r-eval-col)" in res.stderr
