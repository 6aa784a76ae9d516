"""The looped law whose exponent runs with ln r (fit/laws/looped_logr.py): m_r = r^(phi + psi ln(r / 4)).

Tables drawn from the law itself on the published grid's baseline rows (r in {1, 2, 4, 8}): its parameters come
back, psi = 0 data give the looped law's phi, a table with one r > 1 is refused, and `validate` puts it among the
rival forms, where it wins on data whose exponent runs with r and not on data whose exponent does not."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from loopscale.errors import InputError
from loopscale.fit import synthetic as S
from loopscale.fit.fit_table import fit_table
from loopscale.fit.laws.registry import law_class
from loopscale.fit.runs_table import canonical_table
from loopscale.fit.validation.run import validate

DENSE = {"E": 1.6, "A": 30.0, "alpha": 0.21, "B": 900.0, "beta": 0.36}
LAW = law_class("looped-logr")


@pytest.fixture(scope="module")
def grid() -> pd.DataFrame:
    sweep = S.recipe_sweep(seed=0, noise=0.0)
    return sweep[sweep["recipe"] == "baseline"].reset_index(drop=True)


def drawn(grid: pd.DataFrame, phi: float, psi: float, noise: float, seed: int = 0) -> pd.DataFrame:
    """The grid with L from the law at (phi, psi), times exp(noise z)."""
    table = grid.copy()
    z = np.random.default_rng(seed).standard_normal(len(table))
    table["L"] = LAW.predict_table({**DENSE, "phi": phi, "psi": psi}, table) * np.exp(noise * z)
    return table


def test_the_multiplier_is_r_to_the_exponent_that_runs_with_ln_r():
    """phi_r = ln m_r / ln r is phi at r = 4 and moves by psi per e-fold of r, written out here."""
    law = LAW()
    params = {**DENSE, "phi": 0.4, "psi": -0.15}
    for r in (2.0, 4.0, 8.0, 16.0):
        phi_r = 0.4 - 0.15 * np.log(r / 4.0)
        assert float(law.multiplier(params, r)) == pytest.approx(r**phi_r, rel=1e-12)
    assert float(law.multiplier(params, 1.0)) == 1.0
    assert float(law.multiplier({**params, "psi": 0.0}, 8.0)) == pytest.approx(8.0**0.4, rel=1e-12)


def test_noise_free_tables_give_their_phi_and_psi_back(grid):
    for phi, psi in ((0.45, 0.2), (0.6, -0.15)):
        with np.errstate(all="ignore"):
            fit = fit_table(drawn(grid, phi, psi, noise=0.0), "looped-logr", profile=False)
        assert fit.params["phi"] == pytest.approx(phi, abs=1e-4)
        assert fit.params["psi"] == pytest.approx(psi, abs=1e-4)
        assert fit.params["alpha"] == pytest.approx(DENSE["alpha"], abs=1e-4)


def test_data_of_the_plain_looped_law_give_psi_near_zero_and_the_looped_phi(grid):
    """psi = 0 is the looped law: on its data the slope is found flat and phi is the looped fit's."""
    table = drawn(grid, 0.5, 0.0, noise=0.002, seed=3)
    with np.errstate(all="ignore"):
        logr = fit_table(table, "looped-logr", profile=False)
        looped = fit_table(table, "looped", profile=False)
    assert abs(logr.params["psi"]) < 0.05
    assert logr.params["phi"] == pytest.approx(looped.params["phi"], abs=0.03)


def test_phi_profile_interval_covers_the_truth_on_noisy_data(grid):
    table = drawn(grid, 0.45, 0.25, noise=0.003, seed=5)
    with np.errstate(all="ignore"):
        fit = fit_table(table, "looped-logr", profile=True)
    lo, hi = fit.to_json_dict()["profile_phi"]["interval"]  # the JSON form, the same whatever holds it
    assert lo < 0.45 < hi and hi - lo < 0.5


def test_a_table_with_one_r_above_one_is_refused(grid):
    table = drawn(grid, 0.5, 0.1, noise=0.0)
    two = table[table["r"].isin([1, 2])]
    with pytest.raises(InputError, match="two or more r > 1"):
        LAW.check_table(two)
    LAW.check_table(table[table["r"].isin([2, 8])])  # no r = 1 rows: still two slopes' worth of r


def aicc_of(record: dict, law: str) -> float:
    form = next(i for i, f in enumerate(record["forms"]) if f["law"] == law)
    return next(res for res in record["results"] if res["form"] == form and res["fold"] == 0)["information"]["aicc"]


def test_validate_ranks_it_among_the_rivals_by_what_the_data_do(grid):
    """On data whose exponent runs with r (psi = 0.3) the form beats r^phi by far (AICc below -4); on r^phi's own
    data it does not (one parameter more for nothing)."""
    gaps = {}
    for psi in (0.3, 0.0):
        table = canonical_table(drawn(grid, 0.5, psi, noise=0.002, seed=7), "looped")
        with np.errstate(all="ignore"):
            record = validate(table, fit_table(table, "looped", profile=False), conventions=False, jobs=1)
        gaps[psi] = aicc_of(record, "looped-logr") - aicc_of(record, "looped")
    assert gaps[0.3] < -4.0
    assert gaps[0.0] > -4.0
