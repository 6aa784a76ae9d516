"""What `loopscale fit` prints per fit (issue 58, loopscale/cli/fit_output.py print_result): the title with the
group it fitted, each parameter's estimate to 6 significant digits and its 95% interval to 4 (a dash without
one), in the record's order, then the summary lines and each warning. A record written here; nothing fitted."""

from __future__ import annotations

from loopscale.cli.fit_output import print_result
from loopscale.fit import result as RS
from loopscale.fit.record_blocks import Settings


def test_each_parameter_row_and_the_title_with_its_group(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    fit = RS.FitResult(
        law="looped", params={"E": 1.4943558, "A": 22.514418, "alpha": 0.18419498, "phi": 0.41113632},
        objective=0.001234567, grad_norm=3.2e-9, n_starts=15000, n_refined=16, n_best_basin=11,
        settings=Settings(loss="huber", delta=0.002, n_refine=16), n_rows=44,
        ci95={"E": [1.3828037, 1.6135090], "phi": [0.37294054, 0.46131549]}, group={"column": "recipe"},
        warnings=["3 runs have no seed"],
    )  # fmt: skip
    print_result(fit, "tbptt")
    lines = [line.strip() for line in capsys.readouterr().out.splitlines()]
    assert lines[0] == "looped fit — recipe = tbptt"
    rows = [[cell.strip() for cell in line.strip("│┃").split("│")] for line in lines if line.startswith("│")]
    assert rows == [
        ["E", "1.49436", "[1.383, 1.614]"],
        ["A", "22.5144", "—"],
        ["alpha", "0.184195", "—"],
        ["phi", "0.411136", "[0.3729, 0.4613]"],
    ]
    assert lines[-2].startswith("rows 44; objective 0.00123457 (huber, delta 0.002);")
    assert lines[-1] == "warning: 3 runs have no seed"
    print_result(fit)
    assert capsys.readouterr().out.splitlines()[0].strip() == "looped fit"
    print_result(fit, 0)  # a group value of 0 (--group seed) is a group
    assert capsys.readouterr().out.splitlines()[0].strip() == "looped fit — recipe = 0"
