"""A pilot's noise as `loopscale power` reads and draws it, by hand (issue 58; loopscale/fit/pilot.py): the
stated law's parsing, the Truth's refusals at their boundaries, sigma's chi-square interval, the degrees of
freedom of a variance under Student-t tails and of a point mean (Welch-Satterthwaite), sigma from an RMS residual
corrected by sqrt(n / (n - p)), the box check of phi + delta-phi, and one sweep's share, split and scale draws."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import loopscale.fit.pilot as pilot
from loopscale.errors import InputError
from loopscale.fit.result import FitResult

LAW = {"E": 1.57, "A": 28.0, "alpha": 0.2, "B": 916.0, "beta": 0.37, "phi": 0.46}


def test_a_stated_law_is_each_parameter_once_as_a_finite_number():
    assert pilot.stated_law(" E=1.5, A = 28 ,alpha=0.2,,B=9e2,beta=.37,phi=-0.1 ") == {
        "E": 1.5, "A": 28.0, "alpha": 0.2, "B": 900.0, "beta": 0.37, "phi": -0.1}  # fmt: skip
    for text, message in [
        ("E=1.5,E=1.6", "E is given twice"),
        ("E=1.5,kappa=0.4", "kappa"),
        ("E=1.5,A", "give NAME=VALUE pairs"),
        ("E=abc", "E='abc' is not a finite number"),
        ("E=inf", "E='inf' is not a finite number"),
        ("E=nan", "is not a finite number"),
    ]:
        with pytest.raises(InputError, match=message):
            pilot.stated_law(text)


def test_the_truth_refuses_each_setting_just_past_its_boundary():
    pilot.Truth(LAW, 0.01, parent_share=0.0, sigma_dof=1.0, tail_dof=4.0001, misfit_log=0.0)
    pilot.Truth(LAW, 0.01, parent_share=1.0)
    for kwargs, message in [
        ({"sigma_log": 0.0}, "seed sigma of log L must be > 0"),
        ({"parent_share": 1.0001}, r"parent share of the noise must be in \[0, 1\]"),
        ({"parent_share": -0.0001}, r"must be in \[0, 1\]"),
        ({"sigma_dof": 0.999}, "degrees of freedom must be >= 1"),
        ({"misfit_log": -1e-9}, "misfit must be >= 0"),
        ({"parent_share_se": -1e-9}, "standard error must be >= 0"),
        ({"tail_dof": 4.0}, r"must be > 4 \(a finite kurtosis\)"),
    ]:
        with pytest.raises(InputError, match=message):
            pilot.Truth(LAW, **({"sigma_log": 0.01} | kwargs))
    with pytest.raises(InputError, match="the law needs phi"):
        pilot.Truth({k: v for k, v in LAW.items() if k != "phi"}, 0.01)


def test_sigmas_interval_is_the_chi_square_one_on_its_degrees_of_freedom():
    truth = pilot.Truth(LAW, 0.004, sigma_dof=7.0)
    lo, hi = truth.sigma_interval(0.9)
    assert lo == pytest.approx(0.004 * math.sqrt(7 / stats.chi2.ppf(0.95, 7)), rel=1e-12)
    assert hi == pytest.approx(0.004 * math.sqrt(7 / stats.chi2.ppf(0.05, 7)), rel=1e-12)
    assert pilot.Truth(LAW, 0.004).sigma_interval() == (0.004, 0.004)  # known exactly


def test_heavy_tails_shrink_a_variances_degrees_of_freedom():
    # kappa = 6 / (t - 4): t = 5 -> 6; nu_eff = nu / (1 + kappa c / 2)
    assert pilot.tail_dof_of_variance(20, 5.0, 0.5) == pytest.approx(20 / (1 + 6 * 0.5 / 2), rel=1e-12)
    assert pilot.tail_dof_of_variance(20, 10.0, 0.8) == pytest.approx(20 / (1 + 1.0 * 0.8 / 2), rel=1e-12)
    assert pilot.tail_dof_of_variance(20, None, 0.5) == 20.0
    assert pilot.tail_dof_of_variance(2, 4.5, 1.0) == 1.0  # at least 1


def test_a_point_means_degrees_of_freedom_are_welch_satterthwaites():
    sigma, tau, n_rows = 0.004, 0.002, 40
    scale = {"groups": 10, "scatter_dof": 6}
    v_seed, v_tau = sigma**2 * 10 / 40, tau**2
    expected = (v_tau + v_seed) ** 2 / (v_tau**2 / 6 + v_seed**2 / 12)
    assert pilot._noise_dof(sigma, 12, tau, scale, n_rows) == pytest.approx(expected, rel=1e-12)
    assert pilot._noise_dof(sigma, 12, 0.0, scale, n_rows) == 12.0
    assert pilot._noise_dof(sigma, None, tau, scale, n_rows) is None
    assert pilot._noise_dof(sigma, 12, tau, {}, n_rows) == pytest.approx(
        (tau**2 + sigma**2 / 40) ** 2 / (tau**4 / 1 + (sigma**2 / 40) ** 2 / 12), rel=1e-12
    )


def _fit(**over) -> FitResult:
    fit = FitResult("looped", dict(LAW), 0.0, 0.0, 1, 1, 1, {}, n_rows=30, residual_rms_log=0.005)
    for key, value in over.items():
        setattr(fit, key, value)
    return fit


def test_without_seed_repeats_sigma_is_the_rms_residual_over_n_minus_p_and_its_split_is_drawn():
    truth = pilot.truth_from_fit(_fit())
    assert truth.sigma_log == pytest.approx(0.005 * math.sqrt(30 / 24), rel=1e-12)
    assert truth.sigma_dof == 24.0 and truth.split_unknown and truth.misfit_log == 0.0
    assert truth.parent_share == 1.0 and truth.params == LAW
    assert "n = 30, p = 6" in truth.sigma_source
    stated = pilot.truth_from_fit(_fit(), sigma_log=0.003, parent_share=0.4)
    assert (stated.sigma_log, stated.sigma_dof, stated.parent_share, stated.split_unknown) == (0.003, None, 0.4, False)
    with pytest.raises(InputError, match="records no noise"):
        pilot.truth_from_fit(_fit(n_rows=6))


def test_phi_plus_the_planted_delta_must_lie_strictly_inside_the_box():
    pilot.check_in_box(LAW, delta_phi=0.5)
    with pytest.raises(InputError, match=r"phi \+ delta-phi = 3 \(delta-phi \+2.54\) is outside"):
        pilot.check_in_box(LAW, delta_phi=2.54)
    with pytest.raises(InputError, match="delta-phi"):
        pilot.check_in_box({**LAW, "phi": -0.2}, delta_phi=-0.8)  # phi + delta = -1: on the box's end
    with pytest.raises(InputError, match="the law's alpha = 0 is outside the fitter's box"):
        pilot.check_in_box({**LAW, "alpha": 0.0})


def test_one_sweeps_share_split_and_scale_draws():
    truth = pilot.Truth(LAW, 0.004, parent_share=0.7, parent_share_se=0.2, misfit_log=0.001, split_unknown=True)
    rng, ref = np.random.default_rng(5), np.random.default_rng(5)
    draws = [pilot.share_draw(rng, truth) for _ in range(200)]
    expected = np.clip(ref.normal(0.7, 0.2, 200), 0.0, 1.0)
    assert draws == pytest.approx(expected.tolist(), rel=1e-12) and max(draws) == 1.0
    assert pilot.share_draw(rng, pilot.Truth(LAW, 0.004, parent_share=0.3)) == 0.3
    rng, ref = np.random.default_rng(6), np.random.default_rng(6)
    seed, misfit = pilot.split_draw(rng, truth)
    w = ref.uniform()
    assert seed == pytest.approx(0.004 * math.sqrt(1 - w), rel=1e-12)
    assert misfit == pytest.approx(math.sqrt(0.004**2 * w + 0.001**2), rel=1e-12)
    assert pilot.split_draw(rng, pilot.Truth(LAW, 0.004, misfit_log=0.001)) == (0.004, 0.001)
    rng, ref = np.random.default_rng(7), np.random.default_rng(7)
    assert pilot.scale_draw(rng, 9.0) == pytest.approx(math.sqrt(9.0 / ref.chisquare(9.0)), rel=1e-12)
    assert pilot.scale_draw(rng, None) == 1.0


def test_unit_draws_have_unit_variance_under_student_t_and_the_smoothed_pool():
    rng, ref = np.random.default_rng(8), np.random.default_rng(8)
    got = pilot.unit_draws(rng, 5, 6.0)
    assert got == pytest.approx(ref.standard_t(6.0, 5) / math.sqrt(6 / 4), rel=1e-12)
    for pool in ((-1.5, -0.4, 0.1, 0.3, 0.9, 1.2, -0.2, 0.0), (-3.0, -2.0, -1.5, 0.0, 0.5, 1.5, 2.0, 3.0)):
        rng, ref = np.random.default_rng(9), np.random.default_rng(9)
        got = pilot.unit_draws(rng, 4, None, pool)
        values = np.array(pool)
        iqr = np.quantile(values, 0.75) - np.quantile(values, 0.25)
        h = 0.9 * min(1.0, iqr / 1.34) * 8**-0.2  # Silverman's bandwidth; the second pool's IQR / 1.34 > 1
        expected = (values[ref.integers(0, 8, 4)] + h * ref.standard_normal(4)) / math.sqrt(1 + h * h)
        assert got == pytest.approx(expected, rel=1e-12)
