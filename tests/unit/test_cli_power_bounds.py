"""`loopscale power`'s refusals at and past each bound (issue 58, loopscale/cli/power.py), in-process and before
anything is simulated: a value on its bound passes that check and is stopped by the next refusal, one past it is
refused with its own line (exit 2, nothing printed); --sigma and --detect positive; a stated law's parent share 1
unless given."""

from __future__ import annotations

import argparse

import pytest

from loopscale.cli import power as power_cli
from support.cli import run_cli

LAW = "E=1.5,A=80,alpha=0.3,B=150,beta=0.3,phi=0.5"
SEEDS_MSG = "--seeds must be in [1, 64]; got {}"
RECIPE_MSG = "--recipe picks a recipe's runs from --table; with overrides, set model.recipe=NAME"


def refusal(*flags: str) -> str:
    res = run_cli(["power", "--law", LAW, "--sigma", "0.003", "experiment=isodepth_cpu_demo", *flags])
    assert res.returncode == 2 and res.stdout == "", res.stderr
    (line,) = res.stderr.strip().splitlines()
    return line.removeprefix("loopscale power: error: ")


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--sims", "19"], "--sims 19: at least 20 simulated sweeps per design, at most 20,000"),
        (["--sims", "20", "--seeds", "0"], SEEDS_MSG.format(0)),  # 20 sims pass; 0 seeds do not
        (["--sims", "20000", "--seeds", "65"], SEEDS_MSG.format(65)),
        (["--sims", "20001"], "--sims 20001: at least 20 simulated sweeps per design, at most 20,000"),
        (["--seeds", "1", "--recipe", "lora"], RECIPE_MSG),  # 1 and 64 seeds pass
        (["--seeds", "64", "--recipe", "lora"], RECIPE_MSG),
        (["--delta", "inf"], "--delta inf: the planted delta-phi must be a finite number"),
        (["--delta=-inf"], "--delta -inf: the planted delta-phi must be a finite number"),
        (["--delta=-0.3", "--recipe", "lora"], RECIPE_MSG),  # a negative delta is a delta
    ],
)
def test_each_bound_at_and_past_it(flags, message):
    assert refusal(*flags) == message


@pytest.mark.parametrize("flag", ["--sigma", "--detect"])
@pytest.mark.parametrize("value", ["0", "-0.01"])
def test_sigma_and_detect_must_be_positive(flag, value):
    res = run_cli(["power", "--law", LAW, "experiment=isodepth_cpu_demo", flag, value])
    assert res.returncode == 2 and res.stdout == ""
    assert f"argument {flag}: must be > 0; got {value}" in res.stderr
    assert power_cli._positive("1e-9") == 1e-9


def test_a_stated_law_shares_all_of_a_runs_noise_within_its_job_unless_told():
    def truth(share):
        args = argparse.Namespace(fit=None, law=LAW, sigma=0.004, parent_share=share)
        return power_cli._truth(args)

    t = truth(None)
    assert (t.sigma_log, t.parent_share, t.sigma_source) == (0.004, 1.0, "stated (--sigma)")
    assert dict(t.params) == {"E": 1.5, "A": 80.0, "alpha": 0.3, "B": 150.0, "beta": 0.3, "phi": 0.5}
    assert truth(0.4).parent_share == 0.4
