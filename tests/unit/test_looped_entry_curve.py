"""looped-entry at every evaluation of a loss curve (`looped-entry-curve`, fit/laws/looped_entry_curve.py): where the
schedule's terms vanish it is looped-entry, at a wsd run's end it is looped-entry at its final-point parameters,
its Jacobian is exact, phi and kappa come back from curves drawn from it, and `power` refuses it as a pilot whose
kappa has no bootstrap interval (power simulates its final-point law, looped-entry, and draws kappa from that
interval: tests/unit/test_power_entry.py) rather than dropping kappa."""

from __future__ import annotations

import numpy as np
import pytest

from loopscale.data.heldout import curve_steps
from loopscale.errors import InputError
from loopscale.fit.curves.synthetic import looped_curves, wsd_multipliers
from loopscale.fit.fit_table import fit_table
from loopscale.fit.laws.registry import law_class, make_law
from loopscale.fit.runs_table import canonical_table
from loopscale.fit.synthetic import DEMO_BATCH_TOKENS, DEMO_DENSE, demo_grid
from support.curve_laws import assert_jacobian_exact, peak_lr_curves

LAW = law_class("looped-entry-curve")
TRUTH = {**DEMO_DENSE, "phi": 0.65, "kappa": 0.4, "K": 0.3}


def evaluated(points: int):
    """Where loopscale evaluates a run's curve: `points` log-spaced and regular, and the schedule's corners."""
    return lambda steps, warmup, cooldown: curve_steps(steps, points, (warmup, cooldown), cooldown)


def entry_loss(params, N_once, N_rec, r, D):
    """looped-entry written out: E + A (N_once + kappa^[r>1] r^phi N_rec)^-alpha + B D^-beta."""
    m = np.where(r > 1, params["kappa"], 1.0) * r ** params["phi"]
    return params["E"] + params["A"] * (N_once + m * N_rec) ** -params["alpha"] + params["B"] * D ** -params["beta"]


def test_where_the_schedule_terms_vanish_it_is_looped_entry():
    """A run at its peak lr from its first step (S1 = the tokens seen, S2 = 0) is looped-entry at D = its tokens,
    at every evaluation; r = 1 pays no kappa."""
    table = peak_lr_curves(demo_grid().head(8), DEMO_BATCH_TOKENS)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):  # step 0: S1 = 0
        got = LAW.predict_table(TRUTH, table)
    fitted = table["step"].to_numpy() > 0
    want = entry_loss(TRUTH, table["N_once"], table["N_rec"], table["r"], table["tokens"])[fitted]
    np.testing.assert_allclose(got[fitted], want, rtol=1e-12)
    assert set(table["r"]) >= {1.0, 2.0}


def test_at_a_wsd_runs_end_it_is_looped_entry_less_the_anneal():
    """The last evaluation of loopscale's wsd run is looped-entry at D = S1 (the tokens weighted by the lr, ~0.89 D)
    less K S2 (S2 = 1 - the last lr: nearly the whole anneal), S1 and S2 summed here from the schedule itself; and,
    to within the warmup's area, looped-entry at the final-point parameters E - K, B 0.9^-beta (what `power` and
    `advise` read), phi and kappa unchanged."""
    table = looped_curves(demo_grid(), make_law(LAW.name), TRUTH, DEMO_BATCH_TOKENS, evaluated(6))
    ends = table.loc[table.groupby("run")["step"].idxmax()]
    steps = ends["step"].to_numpy()
    lr = [wsd_multipliers(s, max(1, round(0.02 * s))) for s in steps]
    S1 = DEMO_BATCH_TOKENS * np.array([m.sum() for m in lr])
    S2 = 1 - np.array([m[-1] for m in lr])
    want = entry_loss(TRUTH, ends["N_once"], ends["N_rec"], ends["r"], S1) - TRUTH["K"] * S2
    # 2e-4: the cooldown's first step, between two rows, is read linearly (schedule_features)
    np.testing.assert_allclose(ends["L_clean"], want, rtol=2e-4)
    final = LAW().final_point_params(TRUTH)
    assert final["kappa"] == TRUTH["kappa"] and final["phi"] == TRUTH["phi"]
    want_final = entry_loss(final, ends["N_once"], ends["N_rec"], ends["r"], ends["D"])
    np.testing.assert_allclose(ends["L_clean"], want_final, rtol=5e-3)  # S1 = 0.89-0.90 D, S2 = 0.95-0.99


def test_jacobian_matches_finite_differences():
    table = looped_curves(demo_grid().head(8), make_law(LAW.name), TRUTH, DEMO_BATCH_TOKENS, evaluated(8))
    canon = canonical_table(table.rename(columns={"val_loss": "L"}), LAW.name)
    data = LAW.data_from_table(canon)
    assert data.extra["S2"].max() > 0.1 and (data.r > 1).any() and (data.r == 1).any()
    law = make_law(LAW.name, data.r)
    theta = law.from_user(TRUTH) + 0.01
    assert_jacobian_exact(law, theta, data)


@pytest.fixture(scope="module")
def entry_fit():
    """looped-entry-curve fitted to the demo grid's curves drawn from it (run offsets and AR(1) noise)."""
    table = looped_curves(demo_grid(), make_law(LAW.name), TRUTH, DEMO_BATCH_TOKENS, evaluated(8),
                          seed_sigma=0.002, eval_sigma=0.002, rho=0.5, seed=3)  # fmt: skip
    canon = canonical_table(table.rename(columns={"val_loss": "L"}), LAW.name)
    with np.errstate(all="ignore"):
        return fit_table(canon, LAW.name, noise="off", profile=False, n_refine=4)


def test_phi_and_kappa_recovered_from_curves_drawn_from_it(entry_fit):
    p = entry_fit.params
    assert p["phi"] == pytest.approx(TRUTH["phi"], abs=0.08)
    assert p["kappa"] == pytest.approx(TRUTH["kappa"], rel=0.15)
    assert p["K"] == pytest.approx(TRUTH["K"], rel=0.2) and p["lambda"] == 0.0


def test_power_refuses_it_as_a_pilot_rather_than_dropping_kappa(entry_fit):
    from loopscale.fit.pilot import truth_from_fit

    with pytest.raises(InputError, match="kappa has no bootstrap interval"):
        truth_from_fit(entry_fit, sigma_log=0.01)


def test_a_table_with_one_r_above_one_is_refused():
    table = looped_curves(demo_grid(r_values=(1, 4)), make_law(LAW.name), TRUTH, DEMO_BATCH_TOKENS, evaluated(4))
    with pytest.raises(InputError, match="two or more r"):
        fit_table(canonical_table(table.rename(columns={"val_loss": "L"}), LAW.name), LAW.name, profile=False)
