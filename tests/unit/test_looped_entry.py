"""The looped law with a one-off price of looping (fit/laws/looped_entry.py): m_1 = 1, m_r = kappa r^phi for r > 1.

Tables drawn from the law itself on the published grid's baseline rows (r in {1, 2, 4, 8}): the multiplier is the
paper-style formula written out here, its parameters come back, kappa = 1 data give the looped law's phi, a table
with one r > 1 is refused, and `validate` ranks it among the rival forms by what the data do."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from loopscale.demo import validation_summary
from loopscale.errors import InputError
from loopscale.fit import synthetic as S
from loopscale.fit.fit_table import fit_table
from loopscale.fit.joint import fit_joint, joint_table
from loopscale.fit.laws.registry import law_class, per_recipe_form
from loopscale.fit.runs_table import canonical_table
from loopscale.fit.validation.record import FoldResult, ValidationRecord, Verdict
from loopscale.fit.validation.run import validate

DENSE = {"E": 1.6, "A": 30.0, "alpha": 0.21, "B": 900.0, "beta": 0.36}
LAW = law_class("looped-entry")


@pytest.fixture(scope="module")
def grid() -> pd.DataFrame:
    sweep = S.recipe_sweep(seed=0, noise=0.0)
    return sweep[sweep["recipe"] == "baseline"].reset_index(drop=True)


def drawn(grid: pd.DataFrame, phi: float, kappa: float, noise: float, seed: int = 0) -> pd.DataFrame:
    """The grid with L written out from the law at (phi, kappa), times exp(noise z): not through the module."""
    table = grid.copy()
    r = table["r"].to_numpy(dtype=float)
    m = np.where(r > 1, kappa, 1.0) * r**phi
    N = table["N_once"].to_numpy(dtype=float) + m * table["N_rec"].to_numpy(dtype=float)
    L = DENSE["E"] + DENSE["A"] * N ** -DENSE["alpha"] + DENSE["B"] * table["D"].to_numpy(dtype=float) ** -DENSE["beta"]
    z = np.random.default_rng(seed).standard_normal(len(table))
    table["L"] = L * np.exp(noise * z)
    return table


def test_the_multiplier_is_one_at_r_one_and_kappa_r_to_the_phi_above(grid):
    law = LAW()
    params = {**DENSE, "phi": 0.5, "kappa": 0.4}
    assert float(law.multiplier(params, 1.0)) == 1.0
    for r in (2.0, 4.0, 8.0):
        assert float(law.multiplier(params, r)) == pytest.approx(0.4 * r**0.5, rel=1e-12)
    table = drawn(grid, 0.5, 0.4, noise=0.0)
    assert LAW.predict_table(params, table) == pytest.approx(table["L"].to_numpy(), rel=1e-10)


def test_noise_free_tables_give_their_phi_and_kappa_back(grid):
    for phi, kappa in ((0.65, 0.4), (0.3, 1.6)):
        with np.errstate(all="ignore"):
            fit = fit_table(drawn(grid, phi, kappa, noise=0.0), "looped-entry", profile=False)
        assert fit.params["phi"] == pytest.approx(phi, abs=1e-4)
        assert fit.params["kappa"] == pytest.approx(kappa, rel=1e-3)
        assert fit.params["alpha"] == pytest.approx(DENSE["alpha"], abs=1e-4)


def test_data_of_the_plain_looped_law_give_kappa_near_one_and_the_looped_phi(grid):
    table = drawn(grid, 0.5, 1.0, noise=0.002, seed=3)
    with np.errstate(all="ignore"):
        entry = fit_table(table, "looped-entry", profile=False)
        looped = fit_table(table, "looped", profile=False)
    assert abs(np.log(entry.params["kappa"])) < 0.1
    assert entry.params["phi"] == pytest.approx(looped.params["phi"], abs=0.05)


def test_phi_profile_interval_covers_the_truth_on_noisy_data(grid):
    table = drawn(grid, 0.45, 0.5, noise=0.003, seed=5)
    with np.errstate(all="ignore"):
        fit = fit_table(table, "looped-entry", profile=True)
    lo, hi = fit.to_json_dict()["profile_phi"]["interval"]
    assert lo < 0.45 < hi and hi - lo < 0.5


def test_a_table_with_one_r_above_one_is_refused(grid):
    table = drawn(grid, 0.5, 0.5, noise=0.0)
    with pytest.raises(InputError, match="two or more r > 1"):
        LAW.check_table(table[table["r"].isin([1, 2])])


def aicc_of(record, law: str) -> float:
    form = next(i for i, f in enumerate(record["forms"]) if f["law"] == law)
    return next(res for res in record["results"] if res["form"] == form and res["fold"] == 0)["information"]["aicc"]


@pytest.fixture(scope="module")
def records(grid) -> dict:
    """validate's record of the looped fit on data with a price of looping (kappa = 0.4) and without (1.0)."""
    out = {}
    for kappa in (0.4, 1.0):
        table = canonical_table(drawn(grid, 0.5, kappa, noise=0.002, seed=7), "looped")
        with np.errstate(all="ignore"):
            out[kappa] = validate(table, fit_table(table, "looped", profile=False), conventions=False, jobs=1)
    return out


def test_validate_ranks_it_among_the_rivals_by_what_the_data_do(records):
    """Looped models below the plain stack by a constant share (kappa = 0.4) make it beat r^phi by far (AICc below
    -4); r^phi's own data (kappa = 1) do not (one parameter more for nothing)."""
    gaps = {kappa: aicc_of(record, "looped-entry") - aicc_of(record, "looped") for kappa, record in records.items()}
    assert gaps[0.4] < -4.0
    assert gaps[1.0] > -4.0


def test_the_demos_summary_names_the_rival_form_with_the_lowest_aicc(records):
    """demo.json's validation block: validate's line and flags, and the rival (not the fit's own law under MSE)
    with the lowest AICc, its dAICc against the fit's law and its phi."""
    summary = validation_summary(records[0.4])
    assert summary["line"] == records[0.4].verdict["line"] and summary["flags"] == list(records[0.4].verdict["flags"])
    best = summary["best_rival"]
    rivals = {f["law"] for f in records[0.4]["forms"][1:] if f["law"] not in (None, "looped")}
    lowest = min(rivals, key=lambda law: aicc_of(records[0.4], law))
    assert best["law"] == lowest and best["daicc"] == pytest.approx(
        aicc_of(records[0.4], lowest) - aicc_of(records[0.4], "looped")
    )
    assert best["law"] in ("looped-entry", "looped-free") and best["daicc"] < -4
    if best["law"] == "looped-entry":
        assert best["phi"] == pytest.approx(0.5, abs=0.1)
    assert validation_summary(records[1.0])["best_rival"]["daicc"] > -4


def test_the_demos_best_rival_is_never_the_fits_own_law_under_mse():
    """validation_summary's best rival among forms[1:] whose law is not forms[0]'s: the fit's own law refitted under
    MSE is a twin, not a rival, even where its AICc is the lowest (a record written by hand: AICc 100 for the fit's
    law, 90 for its MSE twin, 97 for looped-free, 99 for looped-entry)."""
    forms = [
        {"label": "looped (the fit)", "law": "looped", "loss": "huber"},
        {"label": "looped, MSE", "law": "looped", "loss": "mse"},
        {"label": "free k_r", "law": "looped-free", "loss": "huber"},
        {"label": "entry price", "law": "looped-entry", "loss": "huber"},
        {"label": "a form not fitted", "law": None, "loss": "huber"},
    ]
    aicc = [100.0, 90.0, 97.0, 99.0]
    phis = [0.5, 0.5, None, 0.62]
    results = [
        FoldResult(form=i, fold=0, ok=True, params={} if phi is None else {"phi": phi}, information={"aicc": aicc[i]})
        for i, phi in enumerate(phis)
    ]
    record = ValidationRecord(
        forms=forms,
        folds=[{"kind": "full", "label": "whole table"}],
        results=results,
        verdict=Verdict(line="held", flags=[]),
    )
    best = validation_summary(record)["best_rival"]
    assert best == {"form": "free k_r", "law": "looped-free", "daicc": -3.0, "phi": None}


def test_its_per_recipe_form_gives_each_recipes_phi_and_the_shared_kappa_back(grid):
    """`fit --law looped-entry --joint recipe` (fit/laws/looped_entry_joint.py; what `power` fits a looped-entry
    pilot's delta-phi with): one phi per recipe, one kappa; noise-free tables give them back."""
    base = drawn(grid, 0.5, 0.4, noise=0.0)
    probe = drawn(grid, 0.62, 0.4, noise=0.0)
    probe = probe[probe["r"] > 1].assign(recipe="probe")
    table, recipes = joint_table([pd.concat([base, probe], ignore_index=True)], "recipe")
    with np.errstate(all="ignore"):
        fit = fit_joint(table, "recipe", recipes, law_name="looped-entry-joint", separate=False, profile=False)
    assert fit.params["phi[baseline]"] == pytest.approx(0.5, abs=1e-4)
    assert fit.params["phi[probe]"] == pytest.approx(0.62, abs=1e-4)
    assert fit.params["kappa"] == pytest.approx(0.4, rel=1e-3)
    assert fit.joint.delta_phi["probe"].estimate == pytest.approx(0.12, abs=1e-4)
    assert per_recipe_form("looped-entry").name == "looped-entry-joint"
