"""benchmarks/bench_curve_calibration.py on the published-grid fixture's design (`--grid published`, issue 55): the
design each sweep draws on, the noise it draws along a run without a parent, and the options it refuses. Expected
values by hand from the fixture's grid and loopscale's wsd schedule (2% warmup, 20% linear cooldown to 0)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import loopscale
from loopscale.fit.laws.registry import law_class

BENCHMARKS = Path(loopscale.__file__).parents[1] / "benchmarks"


@pytest.fixture
def bench(monkeypatch):
    """The benchmark as a module (it imports bench_curves_phi from its own folder, as when run as a script)."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module("bench_curve_calibration")


def test_published_design_is_the_fixture_grid_trained_and_evaluated_as_loopscale_does(bench):
    design = bench.published_design(16)
    assert design["run"].nunique() == 108  # 27 (budget, width) cells x r in {1, 2, 4, 8}
    assert not {"val_loss", "L_clean", "L"} & set(design.columns)  # each sweep draws its own loss
    # run2: budget 4.64e17, width 384, r = 4; D = 2,166,095,872 tokens = 8263 steps of 262,144
    run = design[design["run"] == "run2"].set_index("step")
    assert run["r"].iloc[0] == 4 and run["width"].iloc[0] == 384 and run["C"].iloc[0] == 4.64e17
    assert run.index.max() == 8263 and run["tokens"].iloc[-1] == 8263 * 262_144 == run["D"].iloc[0]
    assert len(run) == 17  # 16 curve points and the corners, the last evaluation at the run's end
    # warmup round(0.02 x 8263) = 165 steps, cooldown from step 8263 - round(0.2 x 8263) = 6610 over 1653 steps;
    # row k holds the multiplier of update k: k / 165 in the warmup, 1 - (k - 1 - 6610) / 1653 in the cooldown
    assert {165, 6610, 8263} <= set(run.index)
    expected = {1: 1 / 165, 165: 1.0, 6610: 1.0, 6886: 1 - 275 / 1653, 8263: 1 / 1653}
    for step, mult in expected.items():
        assert run.loc[step, "lr_multiplier"] == pytest.approx(mult, rel=1e-12), step
    assert (run["tokens"] == run.index * 262_144).all()


def test_published_truth_at_a_run_end_is_the_fixture_law_after_a_full_anneal(bench):
    """The stated truth (fixture law, phi 0.46, K = 0.3 at lambda 0) at run2's last evaluation: E - K S2 + A
    (N_once + 4^phi N_rec)^-alpha + B S1^-beta, S2 = 1 - 1/1653 (the lr's drop from its peak to the last step's)."""
    design = bench.published_design(16)
    clean = law_class("looped-curve").predict_table(bench.PUBLISHED_TRUTH, design)
    last = int(np.flatnonzero((design["run"] == "run2").to_numpy())[-1])
    n_eff = 7_377_024 + 4**0.46 * 7_080_960
    # S1, the lr's area in steps x 262,144 tokens: the warmup sum_{k<=165} k / 165 = 83, the stable steps 166..6610
    # (6445), the cooldown sum_{j<1653} (1 - j / 1653) = 827; 7355 steps (0.9 D less half the warmup: 7354.2)
    s1 = (83 + 6445 + 827) * 262_144
    by_hand = 1.57 + 28 * n_eff**-0.2 + 916 * s1**-0.37 - 0.3 * (1 - 1 / 1653)
    # S1 reads the lr linearly between the rows (the cooldown's first row is 6610, its first step 6611): within
    # 0.5 step of 7355, 7e-6 in L
    assert clean[last] == pytest.approx(by_hand, abs=8e-6)
    assert bench.PUBLISHED_TRUTH["phi"] == 0.46 and law_class("looped-curve").decay == 0.0  # the law `fit` states


def test_noise_along_runs_without_a_parent(bench):
    """Each run is its own parent: one offset s_run e per run, then an AR(1) in step order (rows given unsorted),
    z_1 = e, z_j = rho z_(j-1) + sqrt(1 - rho^2) e; the draws in that order, run by run."""
    design = pd.DataFrame({"run": ["a", "a", "a", "b", "b"], "step": [30, 10, 20, 5, 50]})
    s_run, s_eval, rho = 0.003, 0.002, 0.5
    e = np.random.default_rng(3).standard_normal(7)
    c = np.sqrt(1 - rho**2)
    z_a = [e[1], rho * e[1] + c * e[2]]
    z_a.append(rho * z_a[1] + c * e[3])
    z_b = [e[5], rho * e[5] + c * e[6]]
    by_hand = np.array(
        [s_run * e[0] + s_eval * z for z in (z_a[2], z_a[0], z_a[1])] + [s_run * e[4] + s_eval * z for z in z_b]
    )
    drawn = bench.forked_noise(design, s_run, s_eval, rho, np.random.default_rng(3))
    np.testing.assert_allclose(drawn, by_hand, rtol=1e-12)


@pytest.mark.parametrize(
    "argv",
    [
        ["--grid", "published", "--law", "looped-curve", "--sigma-run", "0.003", "--sigma-eval", "0.002"],  # no rho
        ["--grid", "published", "--sigma-run", "0.003", "--sigma-eval", "0.002", "--rho", "0.5"],  # entry law
        ["--grid", "published", "--law", "looped-curve", "--sigma-run", "0", "--sigma-eval", "0.002", "--rho", "0.5",
         "--noise", "bands"],  # no truth fit to read bands from
        ["runs_curves.csv", "--grid", "published", "--law", "looped-curve", "--sigma-run", "0", "--sigma-eval",
         "0.002", "--rho", "0.5"],  # two designs
        [],  # no design
    ],
)  # fmt: skip
def test_published_grid_refuses_what_it_cannot_state(bench, monkeypatch, tmp_path, argv, capsys):
    monkeypatch.setattr(sys, "argv", ["bench_curve_calibration.py", *argv, "--out", str(tmp_path)])
    with pytest.raises(SystemExit) as stop:
        bench.main()
    assert stop.value.code == 2 and "error:" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # nothing drawn
