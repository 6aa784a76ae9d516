"""loopscale/fit/power.py (issue 38 item 4): the simulated precision of a design against a known answer (the
linear-Gaussian se of delta-phi, (J^T J)^-1 sigma^2 at the truth), more seeds -> a smaller MDE, a planted
delta-phi of twice the MDE detected in at least 80% of sweeps, reproducible for any --jobs; the pilot's noise."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from loopscale.errors import InputError
from loopscale.fit import synthetic as S
from loopscale.fit.laws.looped_joint import RECIPE_CODE
from loopscale.fit.laws.registry import law_data_from_table, predict_loss
from loopscale.fit.pilot import Truth, truth_from_fit
from loopscale.fit.power import (
    comparison_design,
    design_law,
    make_problem,
    noise_clusters,
    recipe_rows,
    simulate_design,
)
from loopscale.fit.power_summary import power_at, seeds_needed
from loopscale.fit.result import FitResult
from loopscale.fit.verdict import MDE_FACTOR, Z_LEVEL
from support.designs import cpu_design

TRUTH = {**S.TRUE_DENSE, "phi": S.PUBLISHED_PHI["baseline"]}


def _design(seeds: int) -> pd.DataFrame:
    """The CPU-sized grid (two budgets, three sizes, r in {1, 2, 4}: 18 points) trained `seeds` times."""
    return cpu_design(seeds, (1, 2, 4))


def _analytic_se(design: pd.DataFrame, sigma: float) -> float:
    """se of delta-phi of a least-squares fit in log L with known sigma, linearised at the truth."""
    problem = make_problem(design, Truth(TRUTH, sigma), joint=True)
    data = law_data_from_table(problem.table.assign(L=np.exp(problem.log_L)), problem.law)
    _, J = problem.law.log_predict_and_jac(problem.starts[0], data)
    cov = sigma**2 * np.linalg.inv(J.T @ J)
    k = problem.law.internal_names.index("dphi[candidate]")
    return float(math.sqrt(cov[k, k]))


def test_the_simulated_mde_matches_the_linear_gaussian_answer():
    """At small noise the fit is linear in it: the simulated se of delta-phi is the least-squares se at the
    truth (the Huber on standardised residuals is 95% efficient at Gaussian noise: se x 1.03), within the
    Monte Carlo error of 150 sweeps (~6%)."""
    design, sigma = _design(3), 0.003
    out = simulate_design(design, Truth(TRUTH, sigma), n_sims=150, seed=1, what=("delta_phi",))
    expected = _analytic_se(design, sigma)
    dphi = out["delta_phi"]
    assert dphi["n_failed"] == 0 and abs(dphi["bias"]) < 0.3 * expected
    assert 0.85 < dphi["se"] / expected < 1.25
    # the verdict's profile interval: ~2 x 1.96 se wide, and the MDE it gives ~2.80 se (a known sigma: no draw)
    assert dphi["width95"] == pytest.approx(2 * Z_LEVEL * expected, rel=0.2)
    assert dphi["mde"] == pytest.approx(MDE_FACTOR * dphi["se"], rel=0.2)
    assert dphi["mde"] == dphi["mde_point"] == dphi["mde_upper"] and dphi["sigma_interval"] == [sigma, sigma]
    # its JSON form (what `loopscale power` writes per design): the keys and order of the dict it was before
    assert list(dphi.to_json()) == [
        *("true", "mean", "bias", "se", "width95", "coverage", "open_share", "n_sims", "n_failed"),
        *("planted", "detected_share", "sigma_interval", "mde", "mde_point", "mde_upper", "mde_mc_se"),
        "width95_mc_se",  # the median width's Monte-Carlo error (issue 54: a looped-entry pilot's power)
    ]


def test_more_seeds_give_a_smaller_mde_and_twice_the_mde_is_detected():
    truth = Truth(TRUTH, 0.005)
    two = simulate_design(_design(2), truth, n_sims=60, seed=0, what=("delta_phi",))["delta_phi"]
    six = simulate_design(_design(6), truth, n_sims=60, seed=0, what=("delta_phi",))["delta_phi"]
    assert six["mde"] < two["mde"]
    assert six["mde"] / two["mde"] == pytest.approx(math.sqrt(2 / 6), rel=0.3)  # se ~ 1 / sqrt(seeds)
    planted = simulate_design(_design(2), truth, n_sims=60, seed=3, delta_phi=2 * two["mde"], what=("delta_phi",))
    assert planted["delta_phi"]["planted"] == pytest.approx(2 * two["mde"])
    assert planted["delta_phi"]["detected_share"] >= 0.8  # power at 2 x MDE: ~99.9% for a normal estimate
    none = simulate_design(_design(2), truth, n_sims=60, seed=4, what=("delta_phi",))["delta_phi"]
    assert none["detected_share"] <= 0.15  # no true difference: a 5% test rejects in ~5%


def test_simulations_are_reproducible_for_any_number_of_workers():
    truth = Truth(TRUTH, 0.005)
    one = simulate_design(_design(1), truth, n_sims=20, seed=7, what=("phi",), jobs=1)
    two = simulate_design(_design(1), truth, n_sims=20, seed=7, what=("phi",), jobs=2)
    np.testing.assert_array_equal(one["estimates"]["phi"], two["estimates"]["phi"])
    other = simulate_design(_design(1), truth, n_sims=20, seed=8, what=("phi",), jobs=1)
    assert not np.array_equal(one["estimates"]["phi"], other["estimates"]["phi"])


def test_a_comparison_copies_the_looped_runs_as_new_jobs_and_shares_the_dense_ones():
    design = _design(2).assign(parent=lambda t: "job-r" + t.r.astype(str) + "-w" + t.width.astype(str))
    both = comparison_design(design)
    looped = design[design.r > 1]
    assert len(both) == len(design) + len(looped)
    assert (both["recipe"] == "candidate").sum() == len(looped) and set(both.loc[both.r == 1, "recipe"]) == {"baseline"}
    assert set(both.loc[both.recipe == "candidate", "parent"]) == {p + "@candidate" for p in looped["parent"]}
    clusters = noise_clusters(both)
    # one noise draw per (job, seed): branches of a job share it, seeds and the copy's jobs do not
    assert len(set(clusters)) == both.groupby(["parent", "seed"]).ngroups
    with pytest.raises(Exception, match="needs r = 1 runs"):
        comparison_design(design[design.r > 1])


def test_power_and_seeds_needed_follow_their_formulas():
    assert power_at(MDE_FACTOR * 0.05, 0.05) == pytest.approx(0.80, abs=2e-3)
    assert power_at(0.0, 0.05) == pytest.approx(0.05)
    assert seeds_needed(0.05, 1, MDE_FACTOR * 0.05) == 1
    assert seeds_needed(0.05, 1, MDE_FACTOR * 0.025) == 4  # half the MDE: four times the seeds
    assert seeds_needed(0.05, 2, MDE_FACTOR * 0.05 / 3) == 18
    assert seeds_needed(0.5, 1, 0.01, max_seeds=64) is None


def test_the_pilots_noise_is_stated_measured_or_its_corrected_residual():
    fit = FitResult("looped", dict(TRUTH), 1e-3, 0.0, 1, 1, 1, {}, n_rows=12, residual_rms_log=0.002)
    assert truth_from_fit(fit, sigma_log=0.01).sigma_source == "stated (--sigma)"
    residual = truth_from_fit(fit)
    assert residual.sigma_log == pytest.approx(0.002 * math.sqrt(12 / 6)) and "residual" in residual.sigma_source
    fit.noise = {"sigma_log": 0.004}
    assert truth_from_fit(fit).sigma_log == 0.004 and truth_from_fit(fit).sigma_source == "the pilot's seed repeats"
    joint = FitResult("looped-joint", {**S.TRUE_DENSE, "phi[a]": 0.4, "phi[b]": 0.5}, 1e-3, 0.0, 1, 1, 1, {})
    joint.joint, joint.noise = {"reference": "a"}, {"sigma_log": 0.004}
    assert truth_from_fit(joint).params["phi"] == 0.4
    with pytest.raises(Exception, match="needs the looped law"):
        truth_from_fit(FitResult("chinchilla", dict(S.TRUE_DENSE), 1e-3, 0.0, 1, 1, 1, {}))


@pytest.mark.parametrize(("law", "beyond"), [("looped-logr", {"psi": 0.3}), ("looped-nxd", {"gamma": 0.1})])
def test_a_pilot_whose_law_power_cannot_draw_is_refused_not_simulated_as_r_to_the_phi(law, beyond):
    """power draws sweeps from the laws it can simulate (looped, looped-entry, looped-logn, looped-pass: tests/unit/
    test_power_entry.py); a pilot of looped-logr (psi) or looped-nxd (gamma) would be simulated with that parameter
    dropped, another law than the one fitted: refused in one line naming the laws it can."""
    fit = FitResult(law, {**TRUTH, **beyond}, 1e-3, 0.0, 1, 1, 1, {}, n_rows=44, residual_rms_log=0.004)
    can = "power simulates the looped, looped-entry, looped-logn, looped-pass laws"
    with pytest.raises(InputError, match=f"{can} .*law '{law}' has {next(iter(beyond))} beyond them: fit the pilot"):
        truth_from_fit(fit)
    pinned = FitResult("looped-pinned-e", dict(TRUTH), 1e-3, 0.0, 1, 1, 1, {}, n_rows=44)
    assert truth_from_fit(pinned, sigma_log=0.004).params == TRUTH  # E pinned: still r^phi
    assert truth_from_fit(pinned, sigma_log=0.004).law == "looped"


def test_a_design_with_per_pass_parameters_is_drawn_and_fitted_with_the_looped_pass_law():
    """N_pass > 0 (per-pass adapters): the sweeps are drawn from N_once + N_pass + r^phi N_rec and fitted with
    the looped-pass law (its joint form for delta-phi), as `fit --law looped-pass` fits such runs; N_pass = 0 or
    no column: the looped law, as before."""
    design = _design(1)
    adapters = design.assign(N_pass=np.where(design["r"] > 1, design["N_once"] // 3, 0))
    assert design_law(design) == design_law(design.assign(N_pass=0)) == "looped"
    truth = Truth(TRUTH, 0.003)
    phi_problem, dphi_problem = (make_problem(adapters, truth, joint=j, delta_phi=0.1) for j in (False, True))
    assert phi_problem.law.name == "looped-pass" and dphi_problem.law.name == "looped-pass-joint"
    expected = np.log(predict_loss("looped-pass", TRUTH, adapters))
    np.testing.assert_allclose(phi_problem.log_L, expected, rtol=1e-12)
    assert np.abs(expected - make_problem(design, truth, joint=False).log_L).max() > 1e-3  # N_pass moves the loss
    candidate = dphi_problem.table[RECIPE_CODE] == 1  # the copy's phi is phi + 0.1, its N_pass the design's
    np.testing.assert_allclose(
        dphi_problem.log_L[candidate],
        np.log(predict_loss("looped-pass", {**TRUTH, "phi": TRUTH["phi"] + 0.1}, dphi_problem.table[candidate])),
        rtol=1e-12,
    )
    out = simulate_design(adapters, truth, n_sims=20, seed=0, what=("phi",))
    assert out["phi"]["n_failed"] == 0 and abs(out["phi"]["bias"]) < 0.05


def test_the_synthetic_loss_counts_per_pass_parameters_as_once_parameters():
    """synthetic.law_loss (the calibration benchmark's and the synthetic sweeps' truth): E + A (N_once + N_pass +
    r^phi N_rec)^-alpha + B D^-beta written out, N_pass 0 without the column."""
    table = pd.DataFrame(
        {"r": [1.0, 2.0, 4.0], "N_once": [3e6, 2e6, 1e6], "N_rec": [5e6, 4e6, 6e6], "N_pass": [0.0, 7e5, 2e6],
         "D": [1e9, 3e9, 5e9]}
    )  # fmt: skip
    p, phi = S.TRUE_DENSE, 0.6
    n = table["N_once"] + table["N_pass"] + table["r"] ** phi * table["N_rec"]
    written = p["E"] + p["A"] * n ** -p["alpha"] + p["B"] * table["D"] ** -p["beta"]
    np.testing.assert_allclose(S.law_loss(table, p, phi), written, rtol=1e-13)
    without = table.drop(columns="N_pass")
    n0 = without["N_once"] + without["r"] ** phi * without["N_rec"]
    np.testing.assert_allclose(
        S.law_loss(without, p, phi),
        p["E"] + p["A"] * n0 ** -p["alpha"] + p["B"] * without["D"] ** -p["beta"],
        rtol=1e-13,
    )


def test_a_recipes_design_is_its_runs_and_the_baseline_r1_runs_it_shares():
    """A runs table of several recipes: one recipe's design is its own runs, plus the baseline's r = 1 runs when it
    trains none (it IS the baseline at r = 1); with no recipe named, a table of several recipes' looped runs is
    refused (one design, one phi) rather than pooled."""
    base = S.isodepth_grid(S.CPU_SIZES, (1, 2, 4))
    probe = base[base["r"] > 1].assign(recipe="lora")
    own_dense = S.isodepth_grid(S.CPU_SIZES, (1, 2)).assign(recipe="huginn")  # its own r = 1 runs
    table = pd.concat([base, probe, own_dense], ignore_index=True)
    lora = recipe_rows(table, "lora")
    assert set(lora.loc[lora["r"] == 1, "recipe"]) == {"baseline"}
    assert set(lora.loc[lora["r"] > 1, "recipe"]) == {"lora"}
    assert len(lora) == int((base["r"] == 1).sum()) + len(probe)
    huginn = recipe_rows(table, "huginn")
    assert set(huginn["recipe"]) == {"huginn"} and len(huginn) == len(own_dense)
    assert recipe_rows(base, None) is base
    with pytest.raises(InputError, match=r"looped runs of 3 recipes \(baseline, huginn, lora\)"):
        recipe_rows(table, None)
    with pytest.raises(InputError, match="no runs of recipe 'nope'"):
        recipe_rows(table, "nope")
    with pytest.raises(InputError, match="no `recipe` column"):
        recipe_rows(base.drop(columns="recipe"), "lora")
    with pytest.raises(InputError, match="no 'baseline' r = 1 runs to share"):
        recipe_rows(probe, "lora")


def test_detect_never_recommends_fewer_seeds_than_a_design_has(tmp_path):
    """docs/design.md (power): with --detect X each design of the menu gets the seeds it needs, upward only (a
    design with fewer seeds is another entry of the menu). A 2-seed table design whose MDE is already far below
    X is recommended as it is, at 2 seeds and its own cost, not thinned to one seed."""
    from loopscale.analysis.power_designs import PowerRequest, power_record

    grid = S.isodepth_grid(S.CPU_SIZES, (1, 2, 4))
    path = tmp_path / "runs.csv"
    S.seeded_sweep(grid, 0.46, 2, 0.002, seed=3).to_csv(path, index=False)
    truth = Truth({**S.TRUE_DENSE, "phi": 0.46}, 0.002)
    req = PowerRequest(table=str(path), sims=20, seed=5, no_menu=True, probe=False, detect=0.5)
    record = power_record(req, truth)
    (given,) = record["designs"]
    assert given["seeds"] == 2 and given["delta_phi"]["mde"] < 0.25  # one seed would reach 0.5 too
    target = record["target"]
    assert [o["seeds"] for o in target["options"]] == [2]
    assert target["recommended"]["seeds"] == 2 and target["reached"]
    assert target["options"][0]["flops"] == pytest.approx(given["cost"]["flops_with_candidate"])
