"""A curve fit's sigma by position along the run (`fit --curve-sigma position`, loopscale/fit/position_sigma.py,
issue 55 item 3): residuals 10x noisier early in each run than late are weighed apart, the weights recovered from the
unweighted fit's residuals, and phi's interval narrows to what generalised least squares with the true sigma gives."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from scipy.stats import chi2, norm

from loopscale.analysis.fitting import FitRequest, curve_rows
from loopscale.errors import InputError
from loopscale.fit.fit_table import fit_table
from loopscale.fit.laws.registry import law_data_from_table, make_law
from loopscale.fit.noise import huber_moments, noise_setup
from loopscale.fit.noise_scale import reference_quantile, scale_to_scatter
from loopscale.fit.objective import Loss
from loopscale.fit.optimize import fit_law
from loopscale.fit.position_sigma import choose_position_sigma, position_share
from loopscale.fit.synthetic import demo_grid
from loopscale.fit.uncertainty import profile_interval, profile_threshold
from support.position_curves import EARLY_SD, LATE_SD, LAW, TRUTH, demo_curves, two_level_sd


def test_the_position_sigma_is_recovered_from_residuals_with_two_noise_levels():
    table = demo_curves()
    # shares by hand: a row's step over its job's last step (a parent's longest branch)
    job_last = table.groupby("parent")["step"].transform("max")
    assert position_share(table) == pytest.approx(table["step"] / job_last)
    sd = two_level_sd(table)
    res = np.random.default_rng(1).standard_normal(len(table)) * sd
    model, models = choose_position_sigma(res, table)
    assert [m.kind for m in models] == ["constant", "log-linear in share", "per band"]
    assert model.kind == "per band"  # bands 0-0.02, 0.02-0.1 (early), 0.1-0.5, 0.5-1 (late)
    # each band's sigma is its rows' RMS: sigma_hat^2 / sigma^2 ~ chi2(n_b) / n_b, within its 99.9% range
    n_b = np.histogram(position_share(table), [0, 0.02, 0.1, 0.5, 1.01])[0]
    assert n_b.tolist() == [27, 21, 95, 169]
    ratio = np.array(model.params["sigma_band"]) / np.array([EARLY_SD, EARLY_SD, LATE_SD, LATE_SD])
    assert np.all(ratio**2 > chi2.ppf(0.0005, n_b) / n_b) and np.all(ratio**2 < chi2.ppf(0.9995, n_b) / n_b)
    # one level everywhere: the constant stands (a trend must beat it by 2 in AICc)
    flat = np.random.default_rng(2).standard_normal(len(table)) * LATE_SD
    assert choose_position_sigma(flat, table)[0].kind == "constant"


def test_phi_interval_weighted_by_position_narrows_to_the_generalised_least_squares_width():
    table = demo_curves()
    sd = two_level_sd(table)
    noisy = table.assign(L=table["L"] * np.exp(np.random.default_rng(3).standard_normal(len(table)) * sd))
    off = fit_table(noisy, LAW)
    on = fit_table(noisy, LAW, curve_sigma="position")
    block = on.noise["position_sigma"]
    assert block["model"]["kind"] == "per band" and on.settings["curve_sigma"] == "position"
    # what the fit says of its weights: no seed sigma either way, but only the plain fit is unweighted
    assert "the fit is unweighted" in off.noise["statement"]
    assert (
        "unweighted" not in on.noise["statement"]
        and "weighted by its residuals' sigma by position" in on.noise["statement"]
    )
    band_sd = np.array(block["model"]["params"]["sigma_band"]) / np.array([EARLY_SD, EARLY_SD, LATE_SD, LATE_SD])
    assert band_sd == pytest.approx(1.0, rel=0.35)  # from stage 1's residuals, not the noise itself
    assert on.settings["loss"] == "huber" and on.settings["delta"] == pytest.approx(1.345)
    # phi's half-width by hand, the profile's (Delta objective <= q/2 E psi^2 / E psi' over the objective's curvature
    # in phi): with the position sigma, the GLS variance at the truth with the true sigma, [(J' S^-1 J)^-1]_phi, times
    # Huber-at-1.345's E psi^2 / (E psi')^2 on z ~ N(0, 1); unweighted (Huber at 1e-3 in log units), the moments
    # of each row's psi at its own sd, E psi' = 2 Phi(delta / sd) - 1, pooled over the rows, over J' diag(E psi') J
    law = make_law(LAW)
    _, J = law.log_predict_and_jac(law.from_user(TRUTH), law_data_from_table(table, law))
    k = law.internal_names.index("phi")
    G = J / sd[:, None]
    e_psi2, e_dpsi = huber_moments("huber", 1.345)
    half_on = np.sqrt(e_psi2 / e_dpsi**2 * np.linalg.inv(G.T @ G)[k, k])
    dpsi = 2 * norm.cdf(1e-3 / sd) - 1
    psi2 = sd**2 * np.array([huber_moments("huber", 1e-3 / s)[0] for s in sd])
    half_off = np.sqrt(psi2.mean() / dpsi.mean() * np.linalg.inv((J * dpsi[:, None]).T @ J)[k, k])
    assert half_on / half_off == pytest.approx(0.837, abs=0.002)  # the expected fall of phi's standard error
    width = {}
    for name, fit in (("on", on), ("off", off)):
        lo, hi = fit.profile_phi["interval"][:2]
        width[name] = (hi - lo) / np.sqrt(reference_quantile(fit.profile_phi["reference_dof"]))
    assert width["on"] / 2 == pytest.approx(half_on, rel=0.15)
    assert width["off"] / 2 == pytest.approx(half_off, rel=0.15)
    assert width["on"] / width["off"] == pytest.approx(0.837, rel=0.15)


def test_curve_sigma_is_refused_where_a_seed_sigma_or_no_curve():
    table = demo_curves()
    with pytest.raises(InputError, match="curve_sigma must be one of"):
        fit_table(table, LAW, curve_sigma="band")
    runs = demo_grid().assign(L=3.5)
    with pytest.raises(InputError, match="curve law's fit of a curves table"):
        fit_table(runs, "looped", curve_sigma="position", profile=False)
    with pytest.raises(InputError, match="--curve-sigma weighs the evaluations of a loss curve"):
        curve_rows(runs, FitRequest(["runs.csv"], law="looped", curve_sigma="position"))  # what `fit` checks first


def test_an_estimated_sigma_sets_the_weights_only_the_profile_reestimates_its_level():
    """A position sigma is estimated from the fit's own residuals: its level is no known scale. Least squares on
    residuals standardised by sigma or by 3 sigma is the same fit, and its profile interval must be the same (the
    pooled scale of z over its expectation, F(1, nu)); read as a seed sigma (chi2_1, S^2 floored at 1) the one at
    3 sigma would be 3x as wide."""
    table = demo_curves()
    sd = two_level_sd(table)
    noisy = table.assign(L=table["L"] * np.exp(np.random.default_rng(4).standard_normal(len(table)) * sd))
    law = make_law(LAW)
    _, data, loss = noise_setup(noisy, law_data_from_table(noisy, law), Loss("l2"))
    intervals = []
    for level in (1.0, 3.0):
        weighted = replace(data, sigma=sd * level, sigma_estimated=True)
        _, state = fit_law(weighted, law, loss, starts=law.from_user(TRUTH)[None])
        thr, stats = profile_threshold(state, "phi")
        assert np.isfinite(stats["reference_dof"]) and stats["independent_sum"] > 0  # F(1, nu), not chi2_1
        intervals.append(profile_interval(state, "phi"))
        assert scale_to_scatter(state)[1] is None  # no seed sigma's scatter floor either
    assert intervals[1] == pytest.approx(intervals[0], abs=1e-4)
    assert intervals[0][0] < intervals[0][1]


def test_a_row_without_a_parent_is_a_share_of_its_own_run_beside_forked_jobs():
    """A table with a parent column where some runs are not forked (empty parent): each such run is its own job,
    not one job of every unforked run (review, issue 55); a forked parent's branches share its longest branch."""
    table = pd.DataFrame(
        {"run": ["a", "a", "b", "b", "b", "c1", "c1", "c2", "c2"],
         "parent": [None, None, "", "", "", "p", "p", "p", "p"],
         "step": [50, 100, 100, 200, 400, 300, 600, 300, 900]}
    )  # fmt: skip
    expected = [0.5, 1.0, 0.25, 0.5, 1.0, 1 / 3, 2 / 3, 1 / 3, 1.0]
    assert position_share(table) == pytest.approx(expected, rel=1e-12)
