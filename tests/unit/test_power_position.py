"""`power` on a pilot fitted with `--curve-sigma position` (issue 55): the curves' columns promise what the
UNWEIGHTED curve fit is worth, and say, not promise, how much weighing the design's curves by the pilot's position
sigma may narrow phi's standard error (`position_sigma.position_gain`, each fit's M-estimator sandwich linearised at
the pilot's law): checked against the sandwiches written out (ordinary against generalised least squares; Huber's
psi moments per row), and the promise against the same pilot fitted without the option."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm

import loopscale.fit.curve_worth as cw
from loopscale.analysis.power_designs import PowerRequest, power_record
from loopscale.analysis.power_text import markdown
from loopscale.fit.fit_table import fit_table
from loopscale.fit.laws.registry import law_data_from_table, make_law
from loopscale.fit.noise import huber_moments
from loopscale.fit.objective import Loss
from loopscale.fit.pilot import truth_from_fit
from loopscale.fit.position_sigma import SigmaModel, position_gain
from loopscale.fit.runs_table import canonical_table
from support.position_curves import EARLY_SD, LATE_SD, LAW, TRUTH, demo_design, noisy_curves, twelve_evaluations

TWO_LEVELS = SigmaModel(
    "per band", {"covariate": "share", "edges": [0, 0.02, 0.1, 0.5, 1.01], "sigma_band": [0.02, 0.02, 0.002, 0.002]},
    312, 0.0, 4,
)  # fmt: skip
L2 = Loss("l2")


HUBER = Loss()  # fit's: Huber at 1e-3 in log units


def _gain(noise, model=TWO_LEVELS, loss=HUBER):
    return position_gain(demo_design(), TRUTH, LAW, model, noise, twelve_evaluations, loss)


@pytest.fixture(scope="module")
def linearised():
    """The design's fitted rows, each one's sd (0.02 before 10% of its job's steps, a parent's longest branch,
    0.002 after: by hand), and phi's column k of the law's Jacobian J at the truth."""
    rows = canonical_table(cw.design_curves(demo_design(), twelve_evaluations, TRUTH, make_law(LAW)), LAW)
    law = make_law(LAW)
    _, J = law.log_predict_and_jac(law.from_user(TRUTH), law_data_from_table(rows, law))
    sd = np.where(rows["step"] / rows.groupby("parent")["step"].transform("max") < 0.1, EARLY_SD, LATE_SD)
    return rows, sd, J, law.internal_names.index("phi")


def _sandwich(J, dpsi, meat_cov, k):
    bread = np.linalg.inv((J.T * dpsi) @ J)
    return (bread @ J.T @ meat_cov @ J @ bread)[k, k]


def test_the_gain_is_the_two_fits_sandwiches_written_out(linearised):
    rows, sd, J, k = linearised
    Jw, n = J / sd[:, None], len(sd)
    # least squares, independent noise: Var(phi) unweighted (J'J)^-1 J'SJ (J'J)^-1, weighted (J'S^-1 J)^-1 (GLS)
    gls = _sandwich(J, np.ones(n), np.diag(sd**2), k) / np.linalg.inv(Jw.T @ Jw)[k, k]
    assert _gain(cw.CurveNoise(0.0, 1.0, 0.0, 44, 12.0), loss=L2).variance == pytest.approx(gls, rel=1e-6)
    # Huber at 1e-3 in log units, then at 1.345 on z: per row E psi' = 2 Phi(delta / sd) - 1 and E psi^2 (its
    # Gaussian moments at delta / sd, times sd^2); on z, one row like another
    dpsi = 2 * norm.cdf(1e-3 / sd) - 1
    psi2 = sd**2 * np.array([huber_moments("huber", 1e-3 / s)[0] for s in sd])
    e_psi2, e_dpsi = huber_moments("huber", 1.345)
    huber = _sandwich(J, dpsi, np.diag(psi2), k) / (e_psi2 / e_dpsi**2 * np.linalg.inv(Jw.T @ Jw)[k, k])
    assert _gain(cw.CurveNoise(0.0, 1.0, 0.0, 44, 12.0)).variance == pytest.approx(huber, rel=1e-6)
    assert 1.3 < huber < 1.6 < gls  # Huber's clipped psi already tames the noisy early rows least squares follows
    # least squares, a run offset and an AR(1) along each job's path: the rows' covariance sd_a sd_b cov_z
    noise = cw.CurveNoise(0.5, 0.85, 0.6, 44, 12.0)
    cov_z = np.zeros((n, n))
    for job in np.unique(rows["job"]):
        on = np.flatnonzero(rows["job"] == job)
        cov_z[np.ix_(on, on)] = cw.job_noise_cov(rows.iloc[on], noise)
    by_job = _sandwich(J, np.ones(n), cov_z * np.outer(sd, sd), k) / _sandwich(Jw, np.ones(n), cov_z, k)
    assert _gain(noise, loss=L2).variance == pytest.approx(by_job, rel=1e-6)
    # one level everywhere: least squares weighed by it is the same fit, whatever the noise along the curve; Huber's
    # stage 2 differs from stage 1 by its threshold alone, 1.345 sigma against 1e-3 = 0.25 sigma: the ratio of the
    # two thresholds' Gaussian efficiencies (E psi')^2 / E psi^2 (0.95 against 0.72)
    flat = SigmaModel("constant", {"sigma": 0.004}, 312, 0.0, 1)
    assert _gain(noise, flat, L2).variance == pytest.approx(1.0, rel=1e-9)
    efficiency = {c: huber_moments("huber", c)[1] ** 2 / huber_moments("huber", c)[0] for c in (0.25, 1.345)}
    threshold_only = _gain(cw.CurveNoise(0.0, 1.0, 0.0, 44, 12.0), flat).variance
    assert threshold_only == pytest.approx(efficiency[1.345] / efficiency[0.25], rel=1e-9)


@pytest.fixture(scope="module")
def design_csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("design") / "runs.csv"
    demo_design().to_csv(path, index=False)
    return path


def test_power_promises_the_unweighted_worth_and_says_what_weighing_may_add(design_csv):
    pilot = fit_table(noisy_curves(5), LAW, curve_sigma="position", profile=False, n_refine=4)
    block = pilot.noise["position_sigma"]
    assert block["model"]["kind"] == "per band" and block["curve_standardised"]["n_runs"] == 44
    pilot.ci95 = {"kappa": [0.40, 0.50]}  # a stated interval instead of a bootstrap (power draws kappa from it)
    truth = truth_from_fit(pilot)
    request = PowerRequest(table=str(design_csv), no_menu=True, sims=8, curve_points=12)
    record = power_record(request, truth)
    d = record["designs"][0]
    # the promise is the unweighted curve fit's: the worth of the pilot's log-residual noise, as without the option
    worth = cw.curve_worth(d_design := demo_design(), truth.curve.params, LAW, truth.curve.noise, twelve_evaluations)
    assert d["curves"]["worth"] == pytest.approx(worth, rel=1e-9)
    note = d["curves"]["position"]
    model = SigmaModel(**{k: block["model"][k] for k in ("kind", "params", "dof", "loglik", "n_params")})
    z = cw.CurveNoise.from_json(block["curve_standardised"])
    gain = position_gain(d_design, truth.curve.params, LAW, model, z, twelve_evaluations, Loss("huber", 1e-3))
    assert note["promised"] == "unweighted" and note["variance_ratio"] == pytest.approx(gain.variance, rel=1e-9)
    assert note["worth_weighted"] == pytest.approx(worth * gain.variance, rel=1e-9)
    assert 1.1 < note["variance_ratio"] < 2 and note["se_ratio"] == pytest.approx(gain.variance**-0.5)
    text = markdown(record)
    assert "promise what the UNWEIGHTED curve fit is worth" in text
    assert f"to {note['se_ratio']:.2f} x the unweighted fit's" in text and "not promised" in text
    # the same pilot fitted without the option: no note
    unweighted = fit_table(noisy_curves(5), LAW, profile=False, n_refine=4)
    unweighted.ci95 = pilot.ci95
    plain = truth_from_fit(unweighted)
    assert "position" not in power_record(request, plain)["designs"][0]["curves"]
