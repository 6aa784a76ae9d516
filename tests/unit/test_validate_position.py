"""`loopscale validate` of a curve fit weighed by its position sigma (`fit --curve-sigma position`, issue 55):
every fold refits both stages on its training rows, the sigma by position re-estimated from those rows alone (the
whole fit's sigma was read off residuals that include the held-out rows), each row at its share of its run as
trained; checked by hand against stage 1 and stage 2 fitted to a fold's training rows from scratch."""

from __future__ import annotations

import copy
from dataclasses import replace

import numpy as np
import pytest

from loopscale.fit.fit_table import fit_table
from loopscale.fit.laws.registry import law_data_from_table, make_law
from loopscale.fit.objective import Loss
from loopscale.fit.optimize import fit_law
from loopscale.fit.position_sigma import POSITION_BANDS, position_share
from loopscale.fit.uncertainty import profile_param
from loopscale.fit.validation.forms import forms_for
from loopscale.fit.validation.run import _phi_interval, validate
from support.position_curves import LAW, noisy_curves


@pytest.fixture(scope="module")
def validated():
    noisy = noisy_curves(3)
    fit = fit_table(noisy, LAW, curve_sigma="position")
    return noisy, fit, validate(noisy, fit)


def test_validate_runs_a_position_weighted_fit_in_two_stages_per_fold(validated):
    noisy, fit, record = validated
    assert [f["loss"] for f in record.forms] == ["huber", "l2"]  # stage 1's losses: Huber at 1e-3, MSE
    whole = _result(record, 0)
    assert whole["position_sigma"]["kind"] == fit.noise["position_sigma"]["model"]["kind"] == "per band"
    assert whole["params"]["phi"] == pytest.approx(fit.params["phi"], abs=2e-3)  # the fit's own two stages
    kinds = {f["kind"] for f in record.folds}
    assert kinds == {"full", "budget", "r", "run", "final", "early"}
    done = [r for r in record.results if r["fold"] and r["form"] == 0]
    assert len(done) == len(record.folds) - 1 and all(r["ok"] and r["position_sigma"] for r in done)


def _result(record, fold: int) -> dict:
    return next(r for r in record.results if r["form"] == 0 and r["fold"] == fold)


def _stage1_by_hand(noisy, fold: dict):
    """(law, the fold's training rows' data, stage 1 on them, its log residuals, the training rows' mask): stage 1
    (Huber at 1e-3 in log units) fitted to the training rows only, from scratch."""
    train = np.ones(len(noisy), bool)
    train[fold["rows"]] = False
    law = make_law(LAW)
    data = law_data_from_table(noisy[train].reset_index(drop=True), law)
    _, stage1 = fit_law(data, law, Loss("huber", 1e-3))
    return law, data, stage1, law.log_predict(stage1.best.theta, data) - data.log_L, train


def test_a_folds_weights_come_from_its_training_rows_alone(validated):
    noisy, fit, record = validated
    fold = _result(record, next(i for i, f in enumerate(record.folds) if f["label"] == "r = 2"))
    # by hand: each band's sigma is the RMS of its training rows' stage-1 residuals, at their shares of their runs
    # in the whole table
    law, data, stage1, res, train = _stage1_by_hand(noisy, fold)
    share = position_share(noisy)[train]
    band = np.searchsorted(POSITION_BANDS, share, side="right") - 1
    rms = np.sqrt(np.bincount(band, weights=res**2) / np.bincount(band))
    got = np.array(fold["position_sigma"]["params"]["sigma_band"])
    assert got == pytest.approx(rms, rel=2e-3)
    whole = np.array(_result(record, 0)["position_sigma"]["params"]["sigma_band"])
    assert np.max(np.abs(whole / rms - 1)) > 0.02  # the whole table's weights are not the fold's
    # stage 2 by hand: the training rows standardised by those sigmas, Huber at 1.345 on z
    weighted = replace(data, sigma=rms[band], sigma_estimated=True)
    _, stage2 = fit_law(weighted, law, Loss("huber", 1.345), starts=stage1.best.theta[None])
    assert fold["params"]["phi"] == pytest.approx(law.to_user(stage2.best.theta)["phi"], abs=1e-3)
    assert abs(law.to_user(stage1.best.theta)["phi"] - fold["params"]["phi"]) > 5e-3  # stage 2 moved it


def test_a_fold_without_each_runs_last_evaluation_reads_its_rows_shares_of_the_runs_as_trained(validated):
    """The 'final' fold holds out every run's last evaluation: its training rows' shares are still of their jobs'
    whole runs (the run's length is its schedule's, not the fold's), so a share computed from the fold's rows
    alone (each job ending at its second-to-last evaluation) would move rows between bands (review, issue 55)."""
    noisy, fit, record = validated
    fold = _result(record, next(i for i, f in enumerate(record.folds) if f["kind"] == "final"))
    _, _, _, res, train = _stage1_by_hand(noisy, fold)
    band = np.searchsorted(POSITION_BANDS, position_share(noisy)[train], side="right") - 1
    alone = np.searchsorted(POSITION_BANDS, position_share(noisy[train]), side="right") - 1
    assert (band != alone).sum() >= 5  # the two readings differ: the check below can tell them apart
    rms = np.sqrt(np.bincount(band, weights=res**2) / np.bincount(band))
    assert np.array(fold["position_sigma"]["params"]["sigma_band"]) == pytest.approx(rms, rel=2e-3)


def test_a_record_without_an_interval_is_given_the_two_stage_fits_profile(validated):
    """A position-weighted record with no phi interval of its own (fitted --no-profile, no bootstrap): validate
    profiles phi on its refit, in both stages as the fit was, so the interval is the fit's own profile's, not the
    unweighted stage 1's (review, issue 55)."""
    noisy, fit, _ = validated
    law = make_law(LAW)
    data = law_data_from_table(noisy, law)
    form = forms_for(noisy, data, LAW, fit.params, Loss("huber", 1e-3), by_position=True)[0]
    bare = copy.copy(fit)
    bare.profile_phi, bare.ci95 = None, {}
    got = _phi_interval(bare, noisy, form, int(fit.seed or 0), 16)
    assert got["interval_source"] == "a phi profile of the refit"
    assert got["phi_interval"] == pytest.approx(fit.profile_phi["interval"], abs=2e-3)
    _, stage1 = fit_law(data, law, Loss("huber", 1e-3))
    unweighted = profile_param(stage1, "phi")["interval"]
    assert np.max(np.abs(np.subtract(unweighted, fit.profile_phi["interval"]))) > 0.01  # the check can tell
