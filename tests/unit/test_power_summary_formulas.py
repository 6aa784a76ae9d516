"""What `loopscale power` reads off simulated sweeps, by hand (issue 58; loopscale/fit/power_summary.py): the
estimates' se (ddof 1) and bias, the median width of the closed intervals and their coverage, the share left open,
the width rule (closed and at most 0.16 wide), the verdict MDE as the 80% quantile of the distance the truth must
move, the share called real, the two-sided power and the seeds needed. Rows of `sims`: estimate, interval low,
interval high, the sweep's sigma draw over the pilot's sigma; NaN: a failed fit or an open end."""

from __future__ import annotations

import math

import numpy as np
import pytest

import loopscale.fit.power_summary as ps

nan = float("nan")
SIMS = np.array(
    [
        # estimate, low, high, sigma factor
        [0.50, 0.40, 0.62, 1.0],
        [0.44, 0.30, 0.50, 2.0],
        [0.47, 0.42, nan, 1.0],  # open above
        [nan, nan, nan, 1.0],  # failed
        [0.55, 0.46, 0.70, 0.5],
        [0.41, 0.20, 0.45, 1.0],
    ]
)


def test_summarise_counts_failed_and_open_sweeps_apart_from_the_closed_ones():
    out = ps.summarise(SIMS, 0.46)
    est = [0.50, 0.44, 0.47, 0.55, 0.41]
    mean = sum(est) / 5
    assert out.mean == pytest.approx(mean, rel=1e-12) and out.bias == pytest.approx(mean - 0.46, rel=1e-12)
    assert out.se == pytest.approx(math.sqrt(sum((e - mean) ** 2 for e in est) / 4), rel=1e-12)  # ddof 1
    assert out.width95 == pytest.approx(np.median([0.22, 0.20, 0.24, 0.25]), rel=1e-12)  # closed ones only: 0.23
    # closed: [0.40, 0.62] yes, [0.30, 0.50] yes, [0.46, 0.70] yes (the end counts), [0.20, 0.45] no
    assert out.coverage == 0.75
    assert out.open_share == pytest.approx(1 - 4 / 5, rel=1e-12)  # of the fits that did not fail
    assert (out.n_sims, out.n_failed, out.true) == (6, 1, 0.46)
    lone = ps.summarise(SIMS[3:4], 0.46)
    assert math.isnan(lone.se) and lone.coverage is None and lone.open_share == 1.0


def test_the_width_rule_is_a_closed_interval_at_most_0_16_wide_over_every_sweep():
    sims = np.array([[0.08, 0.0, 0.16, 1], [0.08, 0.0, 0.1601, 1], [0.5, 0.45, nan, 1], [nan] * 4, [0.5, 0.4, 0.5, 1]])
    out = ps.width_rule(sims)
    assert out["within_rule"] == pytest.approx(2 / 5)  # 0.16 exactly passes, 0.1601 does not; open and failed miss
    assert out["within_rule_mc_se"] == pytest.approx(math.sqrt(0.4 * 0.6 / 5), rel=1e-12)


def test_the_share_called_real_is_an_interval_excluding_zero_on_either_side():
    sims = np.array([[0.1, 0.01, 0.2, 1], [-0.1, -0.2, -0.01, 1], [0.0, 0.0, 0.1, 1], [0.0, -0.1, 0.0, 1]])
    assert ps.detected_share(sims) == 0.5  # an end at 0 does not exclude it
    assert ps.detected_share(np.array([[0.1, 0.02, nan, 1]])) == 1.0  # open above, low > 0


def test_the_verdict_mde_is_the_80_percent_quantile_of_the_larger_direction():
    planted = 0.10
    rng = np.random.default_rng(4)
    low = planted - rng.uniform(0.02, 0.12, 12)
    high = planted + rng.uniform(0.03, 0.10, 12)
    f = rng.uniform(0.5, 2.0, 12)
    sims = np.column_stack([np.full(12, planted), low, high, f])
    sims[10, 2] = nan  # open above: never excludes 0 downwards
    sims[11, :3] = nan  # failed: never
    out = ps.verdict_mde(sims, planted, upper_factor=1.7, n_boot=50)
    up = np.append(planted - low[:11], np.inf)
    down = np.append(high[:10] - planted, [np.inf, np.inf])
    # 12 sweeps: the 80% quantile sits between the 9th and 10th smallest, below the two that never exclude 0
    expected = max(np.sort(up)[8] + 0.8 * (np.sort(up)[9] - np.sort(up)[8]), np.quantile(down, 0.8))
    assert out["mde"] == pytest.approx(expected, rel=1e-12) and math.isfinite(out["mde"])
    point = max(np.quantile(up / f, 0.8), np.quantile(down / f, 0.8))
    assert out["mde_point"] == pytest.approx(point, rel=1e-12) and math.isfinite(point)
    assert out["mde_point"] != pytest.approx(out["mde"], rel=1e-3)
    assert out["mde_upper"] == pytest.approx(1.7 * point, rel=1e-12)
    assert out["mde_mc_se"] > 0 and math.isnan(ps.verdict_mde(sims, planted, n_boot=1)["mde_mc_se"])


def test_power_at_is_two_sided_and_symmetric():
    se, delta = 0.04, 0.07
    z = 1.959963984540054
    phi = lambda v: 0.5 * math.erfc(-v / math.sqrt(2))  # noqa: E731 -- the normal cdf
    expected = phi(delta / se - z) + phi(-delta / se - z)
    assert ps.power_at(delta, se) == pytest.approx(expected, rel=1e-12)
    assert ps.power_at(-delta, se) == pytest.approx(expected, rel=1e-12)
    assert math.isnan(ps.power_at(delta, 0.0))


def test_seeds_needed_rounds_up_and_stops_at_the_cap():
    factor = 2.8015852181129683
    assert ps.seeds_needed(0.05, 3, factor * 0.05 / 1.5) == 7  # 3 x 2.25 = 6.75 -> 7
    assert ps.seeds_needed(0.05, 4, factor * 0.05 * 2) == 1  # 4 / 4 = 1
    assert ps.seeds_needed(0.05, 4, factor * 0.05 * 3) == 1  # 0.44 rounds up to one seed, never 0
    assert ps.seeds_needed(0.05, 1, factor * 0.05 / 8) == 64 and ps.seeds_needed(0.05, 1, factor * 0.05 / 8.01) is None
    assert ps.seeds_needed(0.05, 1, factor * 0.05 / 3, max_seeds=8) is None
    assert ps.seeds_needed(0.05, 1, factor * 0.05 * 1e6) == 1  # (1e-6)^2 seeds: still one
    assert ps.seeds_needed(0.0, 1, 0.1) is None and ps.seeds_needed(0.05, 1, 0.0) is None
