"""The rules around a curve's worth, by hand (issue 58; loopscale/fit/curve_worth.py): the share of the noise
independent between evaluations and a pilot re-split at another share (the same total), `power`'s curve options
refused where they cannot apply, the design's runs evaluated on loopscale's wsd schedule (2% warmup, 20%
cooldown, at least 10 steps, 1000 without a steps column), the pilot's lambda variant, and how few runs leave no
noise to split."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import loopscale.fit.curve_worth as cw
from loopscale.errors import InputError

TRUTH = {"E": 1.8, "A": 60.0, "alpha": 0.3, "B": 800.0, "beta": 0.35, "phi": 0.6, "K": 0.3}


def test_the_share_is_the_evaluation_variance_over_the_total():
    noise = cw.CurveNoise(0.003, 0.004, 0.2, 10, 8.0)
    assert noise.share == pytest.approx(16 / 25, rel=1e-12)
    assert cw.CurveNoise(0.0, 0.0, 0.0, 10, 8.0).share == 0.0
    assert noise.to_json()["eval_share"] == pytest.approx(0.64) and noise.to_json()["sigma_run_log"] == 0.003


def test_a_pilot_re_split_keeps_the_total_noise_and_its_rho():
    pilot = cw.CurvePilot("looped-curve", dict(TRUTH), cw.CurveNoise(0.003, 0.004, 0.4, 10, 8.0))
    moved = pilot.with_share(0.36)
    assert moved.noise.sigma_run_log == pytest.approx(math.sqrt(0.64 * 25e-6), rel=1e-12)  # 0.004
    assert moved.noise.sigma_eval_log == pytest.approx(math.sqrt(0.36 * 25e-6), rel=1e-12)  # 0.003
    assert moved.noise.rho == 0.4 and moved.noise.n_runs == 10 and moved.params == pilot.params


def test_the_pilots_lambda_makes_a_variant_of_the_curve_law():
    base = cw.CurvePilot("looped-curve", dict(TRUTH), cw.CurveNoise(0.003, 0.004, 0.4, 10, 8.0)).law_class()
    same = cw.CurvePilot("looped-curve", {**TRUTH, "lambda": base.decay}, cw.CurveNoise(0, 0, 0, 1, 1.0))
    assert same.law_class() is base
    other = cw.CurvePilot("looped-curve", {**TRUTH, "lambda": 0.6}, cw.CurveNoise(0, 0, 0, 1, 1.0)).law_class()
    assert other is not base and issubclass(other, base) and other.decay == 0.6


def test_curve_options_are_refused_where_they_cannot_apply():
    cw.check_curve_options(None, 2, False)
    cw.check_curve_options(0.0, 2, True)
    cw.check_curve_options(1.0, 12, True)
    with pytest.raises(InputError, match="--curve-share needs a looped-curve pilot"):
        cw.check_curve_options(0.5, 12, False)
    for bad in (-0.01, 1.01):
        with pytest.raises(InputError, match=f"--curve-share {bad}: a share of the noise, in \\[0, 1\\]"):
            cw.check_curve_options(bad, 12, True)
    with pytest.raises(InputError, match="--curve-points 1: a curve needs at least 2"):
        cw.check_curve_options(None, 1, True)


def test_the_design_is_evaluated_on_the_wsd_schedule_of_its_own_steps():
    design = pd.DataFrame(
        {"r": [1, 2, 4, 2], "N_once": [3e6, 1e6, 1e6, 1e6], "N_rec": [0.0, 2e6, 2e6, 2e6]}
        | {"D": [1e8, 2e8, 4e8, 3e8], "steps": [50, 137, 5, np.nan]}
    )
    seen = []

    def at(steps, warmup, cooldown):
        seen.append((steps, warmup, cooldown))
        return [warmup, cooldown, steps - 1]

    law = cw.make_law("looped-curve")
    table = cw.design_curves(design, at, TRUTH, law)
    # 2% warmup (at least 1 step), 20% cooldown, at least 10 steps, 1000 without a number
    assert seen == [(50, 1, 40), (137, 3, 110), (10, 1, 8), (1000, 20, 800)]
    assert table["run"].tolist() == [f"run{i}" for i in range(4) for _ in range(3)]
    assert table["step"].tolist() == [1, 40, 49, 3, 110, 136, 1, 8, 9, 20, 800, 999]
    assert table["tokens"].tolist()[:3] == [1 * 1e8 / 50, 40 * 1e8 / 50, 49 * 1e8 / 50]
    assert table["tokens"].tolist()[9:] == pytest.approx([20 * 3e8 / 1000, 800 * 3e8 / 1000, 999 * 3e8 / 1000])
    # the lr after the step: 1 at the warmup's end and when the cooldown starts, then linear to 0 at the last step
    assert table["lr_multiplier"].tolist()[:3] == pytest.approx([1.0, 1.0, 1 - 8 / 10])
    assert table["lr_multiplier"].tolist()[3:6] == pytest.approx([1.0, 1.0, 1 - 25 / 27])
    assert table["r"].tolist()[3:6] == [2, 2, 2] and table["D"].tolist()[6] == 4e8


def test_no_split_without_p_plus_two_runs_of_two_evaluations_and_no_rho_from_three_a_run():
    rng = np.random.default_rng(2)
    runs = np.repeat([f"r{i}" for i in range(5)], 3)
    steps = np.tile([10, 20, 30], 5)
    res = rng.normal(0, 0.01, 15) + np.repeat(rng.normal(0, 0.03, 5), 3)  # a run offset and the evaluations' noise
    assert cw.curve_noise(res, runs, steps, 4) is None  # 5 runs < 4 + 2
    found = cw.curve_noise(res, runs, steps, 3)
    assert found is not None and found.n_runs == 5 and found.rho == 0.0  # m = 3: r1's correction undefined
    lone = np.append(runs, "single")
    assert cw.curve_noise(np.append(res, 0.3), lone, np.append(steps, 0), 4) is None  # a run of one does not count
    means = np.array([res[3 * i : 3 * i + 3].mean() for i in range(5)])
    within = sum(((res[3 * i : 3 * i + 3] - means[i]) ** 2).sum() for i in range(5))
    s_eval2 = within / (5 * (3 - 1))  # rho 0: v = 1
    assert found.sigma_eval_log == pytest.approx(math.sqrt(s_eval2), rel=1e-12)
    s_run2 = max(0.0, (means**2).sum() / 2 - s_eval2 / 3)
    assert s_run2 > 0 and found.sigma_run_log == pytest.approx(math.sqrt(s_run2), rel=1e-12)  # over G - p = 2
