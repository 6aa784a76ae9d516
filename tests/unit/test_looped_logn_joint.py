"""looped-logn over several recipes (fit/laws/looped_logn_joint.py): one phi per recipe read at one N_ref, one psi;
`fit --law looped-logn --joint recipe` with its separate fits read at the joint N_ref, its figures, and `power`
simulating a looped-logn pilot (issue 54). Tables are drawn from the law itself on the published grid's baseline
rows (widths 384-2176), a probe recipe's looped rows beside them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from loopscale.errors import InputError
from loopscale.fit import synthetic as S
from loopscale.fit.joint import fit_joint, joint_table
from loopscale.fit.laws.looped_logn import LoopedLogN, reference_size
from loopscale.fit.laws.looped_logn_joint import LoopedLogNJoint
from loopscale.fit.laws.registry import law_data_from_table, per_recipe_form
from loopscale.fit.pilot import truth_from_fit
from loopscale.fit.power import make_problem, simulate_design
from loopscale.fit.result import FitResult, load_fit
from loopscale.plots.views import recipe_fit
from support.designs import cpu_design

DENSE = {"E": 1.6, "A": 30.0, "alpha": 0.21, "B": 900.0, "beta": 0.36}
N_DRAW = 1.2e8  # the size the drawn phis are stated at (the joint table's own N_ref is 2.2e8)
PSI = -0.25


@pytest.fixture(scope="module")
def grid() -> pd.DataFrame:
    sweep = S.recipe_sweep(seed=0, noise=0.0)
    return sweep[sweep["recipe"] == "baseline"].reset_index(drop=True)


def _drawn(grid: pd.DataFrame, phi: float, noise: float = 0.0, seed: int = 0) -> pd.DataFrame:
    table = grid.copy()
    z = np.random.default_rng(seed).standard_normal(len(table))
    params = {**DENSE, "phi": phi, "psi": PSI, "N_ref": N_DRAW}
    table["L"] = LoopedLogN.predict_table(params, table) * np.exp(noise * z)
    return table


def _joint(grid: pd.DataFrame, phi_base: float, phi_probe: float, noise: float = 0.0):
    base = _drawn(grid, phi_base, noise, seed=0)
    probe = _drawn(grid, phi_probe, noise, seed=1)
    # the probe trains the larger half of the sizes only: its table alone has another geometric N_c than the joint's
    size = probe["N_once"] + probe["r"] * probe["N_rec"]
    probe = probe[(probe["r"] > 1) & (size >= size.median())].assign(recipe="probe")
    return joint_table([pd.concat([base, probe], ignore_index=True)], "recipe")


@pytest.fixture(scope="module")
def joint_fit(grid):
    table, recipes = _joint(grid, 0.5, 0.65, noise=0.003)
    with np.errstate(all="ignore"):
        return table, fit_joint(table, "recipe", recipes, law_name="looped-logn-joint", profile=False)


def test_it_is_looped_logns_per_recipe_form_and_an_unbound_one_refuses_in_one_line():
    assert per_recipe_form("looped-logn") is LoopedLogNJoint
    law = LoopedLogNJoint(("baseline", "probe"))
    with pytest.raises(InputError, match="N_ref"):
        law.bounds()


def test_noise_free_tables_give_each_recipes_phi_at_the_joint_n_ref_and_the_shared_psi_back(grid):
    table, recipes = _joint(grid, 0.5, 0.65)
    with np.errstate(all="ignore"):
        fit = fit_joint(table, "recipe", recipes, law_name="looped-logn-joint", separate=False, profile=False)
    n_ref = reference_size(law_data_from_table(table, "looped-logn-joint"))
    assert fit.params["N_ref"] == n_ref == pytest.approx(2.2e8)
    shift = PSI * np.log(n_ref / N_DRAW)  # phi_N = phi + psi ln(N / N_DRAW): each recipe's phi moved to N_ref
    assert fit.params["phi[baseline]"] == pytest.approx(0.5 + shift, abs=1e-4)
    assert fit.params["phi[probe]"] == pytest.approx(0.65 + shift, abs=1e-4)
    assert fit.params["psi"] == pytest.approx(PSI, abs=1e-4)
    assert fit.joint.delta_phi["probe"].estimate == pytest.approx(0.15, abs=1e-4)


def test_the_separate_fits_are_read_at_the_joint_n_ref_and_the_shared_check_runs(joint_fit):
    """Each recipe's separate looped-logn fit holds the joint N_ref (its own table's would read its phi elsewhere),
    so the separate delta-phi is a difference at one size; the shared-parameter check starts from them."""
    table, fit = joint_fit
    probe_alone = table[(table["recipe"] == "probe") | (table["r"] == 1)]
    assert reference_size(law_data_from_table(probe_alone, "looped-logn")) != fit.params["N_ref"]
    for recipe, sep in fit.joint.separate.items():
        assert sep.params["N_ref"] == fit.params["N_ref"], recipe
    assert fit.joint.delta_phi["probe"].separate["delta"] == pytest.approx(0.15, abs=0.03)
    assert fit.joint.delta_phi["probe"].estimate == pytest.approx(0.15, abs=0.02)
    assert 0.0 <= fit.joint.shared_check.p_value <= 1.0 and fit.joint.shared_check.df == 5


def test_the_entry_laws_joint_fit_runs_its_separate_fits_and_shared_check_too(grid):
    """The shared check's second start is built through the law's own coordinates: looped-entry-joint's kappa
    (and looped-logn-joint's psi) have a place in it (before, its start had the looped-joint's length and failed)."""
    table, recipes = _joint(grid, 0.5, 0.65, noise=0.003)
    with np.errstate(all="ignore"):
        fit = fit_joint(table, "recipe", recipes, law_name="looped-entry-joint", profile=False)
    assert set(fit.joint.separate) == {"baseline", "probe"} and "kappa" in fit.joint.separate["probe"].params
    assert np.isfinite(fit.joint.shared_check.statistic)


def test_a_record_rebuilds_the_law_and_each_recipes_view_keeps_psi_and_n_ref(joint_fit, tmp_path):
    table, fit = joint_fit
    path = tmp_path / "fit.json"
    fit.write_json(path)
    again = load_fit(path)
    np.testing.assert_allclose(
        LoopedLogNJoint.predict_table(again.params, table), LoopedLogNJoint.predict_table(fit.params, table)
    )
    view = recipe_fit(again, "probe")
    assert view.law == "looped-logn"
    assert {"psi", "N_ref"} <= set(view.params) and view.params["phi"] == fit.params["phi[probe]"]
    probe_rows = table[(table["recipe"] == "probe") | (table["r"] == 1)]
    np.testing.assert_allclose(
        LoopedLogN.predict_table(view.params, probe_rows),
        LoopedLogNJoint.predict_table(fit.params, probe_rows),
        rtol=1e-12,
    )


def _pilot(n_ref: float, sigma: float = 0.003) -> FitResult:
    params = {**DENSE, "phi": 0.5, "psi": PSI, "N_ref": n_ref}
    fit = FitResult("looped-logn", params, 1e-3, 0.0, 1, 1, 1, {}, n_rows=48)
    fit.ci95, fit.noise = {"psi": [PSI - 0.02, PSI + 0.02]}, {"sigma_log": sigma}
    return fit


def test_power_simulates_a_looped_logn_pilot_at_its_n_ref_and_more_seeds_narrow_phi():
    """The pilot's N_ref travels with its law: the noise-free sweep is the pilot's law, and both simulated fits (phi
    and delta-phi) read phi at the pilot's N_ref, so the estimates centre on the pilot's phi (not on phi moved to the
    design's own geometric size, 0.1 of psi away here)."""
    design = cpu_design(1)
    centre = reference_size(law_data_from_table(design, "looped-logn"))
    n_ref = float(f"{centre * 2:.2g}")  # the pilot's size: twice the design's, ln 2 psi = -0.17 of phi apart
    truth = truth_from_fit(_pilot(n_ref))
    assert truth.law == "looped-logn" and truth.params["N_ref"] == n_ref
    single, joint = (make_problem(design, truth, joint=j) for j in (False, True))
    assert (single.law.name, joint.law.name) == ("looped-logn", "looped-logn-joint")
    assert single.law.N_ref == joint.law.N_ref == n_ref
    expected = LoopedLogN.predict_table({**DENSE, "phi": 0.5, "psi": PSI, "N_ref": n_ref}, single.table)
    np.testing.assert_allclose(single.log_L, np.log(expected), rtol=1e-12)
    one = simulate_design(design, truth, n_sims=24, seed=0)
    four = simulate_design(cpu_design(4), truth, n_sims=24, seed=0)
    for out in (one, four):
        assert out["phi"]["n_failed"] == 0 and out["delta_phi"]["n_failed"] == 0
    assert abs(np.median(one["estimates"]["phi"]) - 0.5) < 0.05
    assert one["phi"]["width95"] > 1.4 * four["phi"]["width95"]
    assert one["delta_phi"]["mde"] > 1.4 * four["delta_phi"]["mde"]


def test_a_recipes_view_holds_its_own_phi_and_the_shared_parameters_only():
    """Three recipes: the probe's view keeps the dense part, psi and N_ref, and its own phi, none of the other
    recipes' (in its parameters, intervals and bootstrap columns alike)."""
    params = {**DENSE, "phi[baseline]": 0.5, "phi[probe]": 0.65, "phi[other]": 0.4, "psi": PSI, "N_ref": 2.2e8}
    fit = FitResult("looped-logn-joint", params, 1e-3, 0.0, 1, 1, 1, {}, n_rows=48)
    fit.joint = {"recipes": ["baseline", "probe", "other"], "reference": "baseline", "column": "recipe"}
    fit.ci95 = {k: [v - 0.01, v + 0.01] for k, v in params.items() if k != "N_ref"}
    view = recipe_fit(fit, "probe")
    assert set(view.params) == {*DENSE, "phi", "psi", "N_ref"} and view.params["phi"] == 0.65
    assert set(view.ci95) == {*DENSE, "phi", "psi"} and view.ci95["phi"] == [0.64, 0.66]
