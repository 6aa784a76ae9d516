"""looped-logn at every evaluation of a loss curve (`looped-logn-curve`, fit/laws/looped_logn_curve.py): its
multiplier is looped-logn's row by row, its N_ref is the geometric N_c of the table's distinct models (not of its
rows), at a wsd run's end it is looped-logn at its final-point parameters with N_ref kept, its Jacobian is exact,
phi and psi come back from curves drawn from it, and a record rebuilds the law at its N_ref."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from loopscale.data.heldout import curve_steps
from loopscale.errors import InputError
from loopscale.fit.curves.synthetic import looped_curves
from loopscale.fit.fit_table import fit_table
from loopscale.fit.laws.form import cost_params
from loopscale.fit.laws.looped_logn import reference_size
from loopscale.fit.laws.registry import law_class, make_law
from loopscale.fit.runs_table import canonical_table
from loopscale.fit.synthetic import DEMO_BATCH_TOKENS, DEMO_DENSE, demo_grid
from support.curve_laws import assert_jacobian_exact, peak_lr_curves

LAW = law_class("looped-logn-curve")
FINAL = law_class("looped-logn")
N_REF = 1e5
TRUTH = {**DEMO_DENSE, "phi": 0.6, "psi": -0.24, "K": 0.3, "N_ref": N_REF}


def evaluated(points: int):
    """Where loopscale evaluates a run's curve: `points` log-spaced and regular, and the schedule's corners."""
    return lambda steps, warmup, cooldown: curve_steps(steps, points, (warmup, cooldown), cooldown)


def curves(points: int = 8, **noise) -> pd.DataFrame:
    return looped_curves(demo_grid(), LAW(N_ref=N_REF), TRUTH, DEMO_BATCH_TOKENS, evaluated(points), **noise)


def logn_loss(params, N_once, N_rec, r, D):
    """looped-logn written out: E + A (N_once + r^(phi + psi ln(N_c / N_ref)) N_rec)^-alpha + B D^-beta."""
    N_c = N_once + r * N_rec
    m = r ** (params["phi"] + params["psi"] * np.log(N_c / params["N_ref"]))
    return params["E"] + params["A"] * (N_once + m * N_rec) ** -params["alpha"] + params["B"] * D ** -params["beta"]


def test_where_the_schedule_terms_vanish_it_is_looped_logn():
    """A run at its peak lr from its first step (S1 = the tokens seen, S2 = 0) is looped-logn at D = its tokens,
    at every evaluation, every width reading its own exponent."""
    table = peak_lr_curves(demo_grid(), DEMO_BATCH_TOKENS)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):  # step 0: S1 = 0
        got = LAW.predict_table(TRUTH, table)
        flat = LAW.predict_table({**TRUTH, "psi": 0.0}, table)  # psi = 0 is r^phi: another loss off N_ref
    fitted = table["step"].to_numpy() > 0
    want = logn_loss(TRUTH, table["N_once"], table["N_rec"], table["r"], table["tokens"])[fitted]
    np.testing.assert_allclose(got[fitted], want, rtol=1e-12)
    flat = flat[fitted]
    assert np.abs(flat / got[fitted] - 1).max() > 1e-3


def test_at_a_wsd_runs_end_it_is_looped_logn_at_its_final_point_parameters():
    """The last evaluation of each run is looped-logn at E - K, B 0.9^-beta (to within the warmup's area), with
    phi, psi and N_ref kept: the law `power` and figures read for a curve fit."""
    table = curves()
    ends = table.loc[table.groupby("run")["step"].idxmax()]
    final = LAW(N_ref=N_REF).final_point_params(TRUTH)
    assert (final["phi"], final["psi"], final["N_ref"]) == (TRUTH["phi"], TRUTH["psi"], N_REF)
    want = logn_loss(final, ends["N_once"], ends["N_rec"], ends["r"], ends["D"])
    np.testing.assert_allclose(ends["L_clean"], want, rtol=5e-3)  # S1 = 0.89-0.90 D, S2 = 0.95-0.99
    np.testing.assert_allclose(FINAL.predict_table(final, ends), want, rtol=1e-12)


def bound_n_ref(table: pd.DataFrame) -> float:
    canon = canonical_table(table.rename(columns={"val_loss": "L"}), LAW.name)
    return LAW.for_data(LAW.data_from_table(canon)).N_ref


def test_n_ref_counts_each_run_once_not_each_evaluation():
    """A curves table holds a narrow model's long run at more evaluations than a wide one's: N_ref is the geometric
    N_c of its runs, the same whatever the evaluation cadence and equal to looped-logn's on the runs table (the
    demo grid's d16 has 2 runs, the other widths 3: over the 16 models alone it would be 9.4e4, not 1e5)."""
    grid = demo_grid()
    sparse, dense = curves(points=4), curves(points=16)
    assert len(dense) > 2 * len(sparse)
    want = reference_size(FINAL.data_from_table(grid.assign(L=1.0)))
    assert bound_n_ref(sparse) == bound_n_ref(dense) == want == N_REF
    models = grid.drop_duplicates(["r", "N_once", "N_rec"])
    by_model = np.exp(np.mean(np.log(cost_params(models["N_once"], models["N_rec"], models["r"]))))
    assert f"{by_model:.2g}" != f"{want:.2g}"  # so the count per run is what this test holds


def test_jacobian_matches_finite_differences():
    canon = canonical_table(curves().rename(columns={"val_loss": "L"}), LAW.name)
    data = LAW.data_from_table(canon)
    assert data.extra["S2"].max() > 0.1 and (data.r > 1).any() and (data.r == 1).any()
    law = LAW.for_data(data)
    theta = law.from_user(TRUTH) + 0.01
    assert_jacobian_exact(law, theta, data)


@pytest.fixture(scope="module")
def logn_fit():
    """looped-logn-curve fitted to the demo grid's curves drawn from it (run offsets and AR(1) noise)."""
    table = curves(seed_sigma=0.002, eval_sigma=0.002, rho=0.5, seed=3)
    canon = canonical_table(table.rename(columns={"val_loss": "L"}), LAW.name)
    with np.errstate(all="ignore"):
        return fit_table(canon, LAW.name, noise="off", profile=False, n_refine=4)


def test_phi_and_psi_recovered_from_curves_drawn_from_it(logn_fit):
    p = logn_fit.params
    assert p["N_ref"] == N_REF  # the demo grid's distinct models centre on 1e5, as its runs do
    assert p["phi"] == pytest.approx(TRUTH["phi"], abs=0.08)
    assert p["psi"] == pytest.approx(TRUTH["psi"], abs=0.06)
    assert p["K"] == pytest.approx(TRUTH["K"], rel=0.2) and p["lambda"] == 0.0


def test_a_record_rebuilds_the_law_at_its_n_ref(logn_fit):
    """The record's N_ref, not a rebound one: its predictions are the fitted law's."""
    law = make_law(LAW.name).from_params(logn_fit.params)
    assert law.N_ref == N_REF
    shifted = LAW.predict_table({**logn_fit.params, "N_ref": 2 * N_REF}, demo_grid().assign(L=1.0))
    kept = LAW.predict_table(logn_fit.params, demo_grid().assign(L=1.0))
    assert np.abs(shifted / kept - 1).max() > 1e-3


def test_sizes_too_close_for_psi_are_refused():
    narrow = demo_grid()
    narrow = narrow[narrow["width"] == narrow["width"].max()]
    table = looped_curves(narrow, LAW(N_ref=N_REF), TRUTH, DEMO_BATCH_TOKENS, evaluated(4))
    with pytest.raises(InputError, match="1.5x apart"):
        fit_table(canonical_table(table.rename(columns={"val_loss": "L"}), LAW.name), LAW.name, profile=False)
