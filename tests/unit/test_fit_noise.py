"""loopscale/fit/noise.py and its use by the fit: seed replicates found in tables of any shape, the seed sigma of
log L recovered (and its model chosen by the stated rule), the fit weighted by it (a test that fails when the
weights are ignored), the two-stage bootstrap's draws, and a table without seed repeats said to omit seed noise.
On synthetic sweeps with a known sigma (`synthetic.seeded_sweep`)."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from loopscale.fit import noise as N
from loopscale.fit import replicates as R
from loopscale.fit import seed_sigma as SS
from loopscale.fit import synthetic as S
from loopscale.fit import two_stage as T
from loopscale.fit.fit_table import fit_table
from loopscale.fit.joint import fit_joint, joint_table
from loopscale.fit.laws.registry import law_data_from_table, make_law
from loopscale.fit.noise_scale import CHI2_1_95, reference_quantile
from loopscale.fit.objective import Loss, objective
from loopscale.fit.runs_table import table_warnings
from loopscale.train.collect import duplicate_points
from support.paths import FIXTURES

TRUE_PHI = S.PUBLISHED_PHI["baseline"]


def published(n_seeds=3, sigma=0.004, seed=0, **kw) -> pd.DataFrame:
    return S.seeded_sweep(S.isodepth_grid(S.BASELINE_SIZES), TRUE_PHI, n_seeds, sigma, seed=seed, **kw)


# ----------------------------------------------------------------------------------------------
# Replicate groups
# ----------------------------------------------------------------------------------------------
def test_replicates_are_found_whatever_the_seed_column_order_and_counts():
    grid = S.isodepth_grid(S.BASELINE_SIZES)
    counts = np.random.default_rng(3).choice([1, 2, 3, 5], size=len(grid))
    table = S.seeded_sweep(grid, TRUE_PHI, counts, 0.005)
    shuffled = table.sample(frac=1.0, random_state=1).rename(columns={"seed": "run_seed"})
    shuffled = shuffled[list(reversed(shuffled.columns))].reset_index(drop=True)
    reps = R.replicate_groups(shuffled, seed_column="run_seed")
    assert reps.n_points == len(grid) and sorted(reps.seeds) == sorted(counts)
    summary = reps.summary()
    assert summary["seeds_per_point"] == {str(k): int((counts == k).sum()) for k in sorted(set(counts))}
    assert summary["dof"] == int((counts - 1).sum()) and summary["n_duplicate_rows"] == 0
    # the same table read with the default seed column name, which it lacks: every row its own run (losses differ)
    assert R.replicate_groups(shuffled).summary()["seeds_per_point"] == summary["seeds_per_point"]


def test_a_table_without_seeds_counts_repeated_rows_as_runs_and_copies_once():
    table = published(n_seeds=2).drop(columns="seed")
    copied = pd.concat([table, table.iloc[:3]], ignore_index=True)  # three runs copied verbatim
    reps = R.replicate_groups(copied)
    assert reps.seed_column is None and set(reps.seeds) == {2}
    assert int(reps.duplicate.sum()) == 3
    ss, df = SS.within_point(np.log(copied["L"].to_numpy()), reps)
    ss0, _ = SS.within_point(np.log(table["L"].to_numpy()), R.replicate_groups(table))
    assert np.allclose(ss, ss0) and df.sum() == len(table) // 2  # a copy adds no degree of freedom


def test_the_same_seed_twice_is_a_duplicate_and_warned():
    table = published(n_seeds=2)
    rerun = table.iloc[[0]].assign(L=table["L"].iloc[0] * 1.001)  # seed 0 of point 0 again, another loss
    both = pd.concat([table, rerun], ignore_index=True)
    reps = R.replicate_groups(both)
    assert int(reps.duplicate.sum()) == 1
    assert any("point and seed" in w for w in table_warnings(both, "looped"))
    assert not any("seed" in w or "repeat" in w for w in table_warnings(table, "looped"))  # replicates are fine
    rows = [dict(r, run_dir=f"run{i}") for i, r in enumerate(both.to_dict("records"))]
    lines = duplicate_points(rows)
    assert len(lines) == 1 and "seed=0 appears 2 times" in lines[0]


def test_an_r1_run_is_one_dense_point_whatever_recipe_labels_it():
    """Two recipes' r = 1 runs of one shape are the same dense model: seeds of one point (a joint table of a
    baseline and a tbptt sweep), while their looped runs are points of their own recipe."""
    shape = {"N_once": 2e6, "N_rec": 6e6, "D": 1e9}
    table = pd.DataFrame(
        [
            {**shape, "r": 1, "recipe": "baseline", "seed": 0, "L": 3.01},
            {**shape, "r": 1, "recipe": "tbptt", "seed": 1, "L": 3.02},
            {**shape, "r": 4, "recipe": "baseline", "seed": 0, "L": 2.91},
            {**shape, "r": 4, "recipe": "tbptt", "seed": 1, "L": 2.95},
        ]
    )
    reps = R.replicate_groups(table)
    assert reps.point.tolist() == [0, 0, 1, 2] and reps.seeds.tolist() == [2, 1, 1]
    assert reps.summary()["n_replicated_points"] == 1 and reps.summary()["dof"] == 1


def test_forked_branches_of_one_parent_share_a_seed_and_resample_together():
    table = S.seeded_sweep(S.demo_grid(), S.DEMO_PHI, 3, 0.005, dense=S.DEMO_DENSE, forked=True)
    reps = R.replicate_groups(table)
    assert set(reps.seeds) == {3}  # each (r, width, budget) point: three parents
    h = T.hierarchy(table, reps, inner="resample")
    w = h.weights(np.random.default_rng(0), 50)
    for _, rows in table.groupby("parent").groups.items():
        assert np.all(w[:, rows] == w[:, rows[:1]])  # a parent's branches are drawn together
    assert h.n_outer == 16  # the outer clusters are the 16 models (r, width): their parents are their seeds


def test_two_stage_draws_keep_or_resample_a_points_seeds():
    table = published(n_seeds=3)
    reps = R.replicate_groups(table)
    rng = np.random.default_rng(1)
    keep = T.hierarchy(table, reps, inner="keep").weights(rng, 40)
    point = reps.point
    for p in range(5):
        block = keep[:, point == p]
        assert np.all(block == block[:, :1])  # a drawn point brings all its seeds once per draw
    assert np.all(keep.sum(axis=1) == len(table))  # every point has 3 seeds: n_points draws x 3 rows
    resampled = T.hierarchy(table, reps, inner="resample").weights(rng, 200)
    per_point = np.stack([resampled[:, point == p].sum(axis=1) for p in range(reps.n_points)], axis=1)
    assert np.all(per_point % 3 == 0)  # a point drawn c times gets 3c seed draws
    assert any(len(set(resampled[i, point == 0])) > 1 for i in range(200))  # ... not always one each


# ----------------------------------------------------------------------------------------------
# The seed sigma
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("sigma", [0.002, 0.01])
def test_seed_sigma_is_recovered_and_constant_chosen(sigma):
    table = published(sigma=sigma, seed=5)
    nf = N.noise_fit(table)
    assert nf.model.kind == "constant"
    assert abs(nf.model.params["sigma"] / sigma - 1) < 0.1  # 232 degrees of freedom: se ~ 5%
    assert np.allclose(nf.row_sigma, nf.model.params["sigma"])


def test_a_sigma_trend_in_the_budget_is_found_and_not_extrapolated():
    def trend(t):
        return 0.008 * np.exp(-0.4 * (np.log(t["C_budget"].to_numpy()) - np.log(1e18)))

    table = published(sigma=trend, seed=2)
    nf = N.noise_fit(table)
    assert nf.model.kind == "log-linear in C", [(m.kind, m.aicc) for m in nf.candidates]
    assert abs(nf.model.params["b"] + 0.4) < 0.1
    C = table["C_budget"].to_numpy()
    assert np.allclose(nf.row_sigma / trend(table), 1, atol=0.15)
    far = table.iloc[:1].assign(C_budget=1e25)  # beyond the sampled budgets: the largest budget's sigma
    at_end = nf.model.sigma(SS.covariates(table.iloc[[int(np.argmax(C))]]))
    assert np.allclose(nf.model.sigma(SS.covariates(far)), at_end)


def test_sigma_at_reads_a_fit_records_model_for_another_design():
    fit = fit_table(published(sigma=0.006, seed=1), profile=False)
    design = S.isodepth_grid(S.TBPTT_SIZES, S.PROBE_R, "tbptt")
    sigma = N.sigma_at(json.loads(json.dumps(fit.noise.to_json())), design)
    assert sigma.shape == (len(design),) and np.allclose(sigma, fit.noise["model"]["params"]["sigma"])
    with pytest.raises(Exception, match="no seed repeats"):
        N.sigma_at({"model": None}, design)


# ----------------------------------------------------------------------------------------------
# The fit weighted by it
# ----------------------------------------------------------------------------------------------
def test_the_objective_divides_residuals_by_sigma():
    table = published(sigma=0.005)
    data = law_data_from_table(table, "looped")
    sigma = np.linspace(0.002, 0.02, len(data))
    weighted = replace(data, sigma=sigma)
    loss = Loss("huber", N.STANDARDISED_DELTA)
    law = make_law("looped", data.r)
    theta = law.from_user(S.TRUE_PARAMS)
    res = law.log_predict(theta, data) - data.log_L
    assert objective(theta, law, weighted, loss) == pytest.approx(float(loss.rho(res / sigma).sum()))
    assert objective(theta, law, data, loss) == pytest.approx(float(loss.rho(res).sum()))


def test_weights_are_used_a_noisy_biased_block_is_discounted():
    """r = 8 runs scatter 20x more between seeds and sit 2% above the law: weighted by the measured per-r sigma
    the fit follows the precise runs; a fit that ignored the weights is pulled off (phi moves by > 0.02)."""
    table = published(sigma=0.002, seed=7)
    r8 = table["r"].to_numpy() == 8
    rng = np.random.default_rng(0)
    table.loc[r8, "L"] = table.loc[r8, "L"] * np.exp(0.02 + 0.04 * rng.standard_normal(r8.sum()))
    weighted = fit_table(table, profile=False)
    unweighted = fit_table(table, profile=False, noise="off")
    assert weighted.noise["model"]["kind"] == "per r"
    assert abs(weighted.params["phi"] - TRUE_PHI) < 0.01
    assert abs(unweighted.params["phi"] - TRUE_PHI) > 0.02
    assert weighted.settings["delta"] == N.STANDARDISED_DELTA


def test_seed_repeats_give_a_weighted_fit_with_a_two_stage_bootstrap_and_a_likelihood_profile():
    table = published(sigma=0.004, seed=3)
    fit = fit_table(table, n_bootstrap=24)
    noise = fit.noise
    assert noise["model"]["kind"] == "constant" and noise["statement"] is None
    assert noise["per_r"]["1"]["n_replicated_points"] == noise["per_r"]["8"]["n_points"] == 29
    assert abs(noise["per_r"]["4"]["sigma_L_nats"] / (0.004 * table["L"][table["r"] == 4].mean()) - 1) < 0.25
    assert fit.bootstrap["two_stage"] == "keep" and "two-stage" in noise["bootstrap"]
    lo, hi = fit.profile_phi["interval"]
    assert lo < TRUE_PHI < hi and hi - lo < 0.1
    e_psi2, e_dpsi = N.huber_moments("huber", N.STANDARDISED_DELTA)
    assert e_psi2 / e_dpsi == pytest.approx(0.8647, abs=1e-3)
    # the reference is F(1, dof) with the degrees of freedom behind the scale (seed repeats and scatter)
    dof = noise["scale"]["reference_dof"]
    assert dof == noise["dof"] + 116 - 6 and reference_quantile(dof) == pytest.approx(CHI2_1_95, rel=0.01)
    assert fit.profile_phi["threshold"] == pytest.approx(
        0.5 * reference_quantile(dof) * e_psi2 / e_dpsi * max(1, fit.profile_phi["scale_factor_sq"])
    )


def test_without_seed_repeats_the_fit_is_unchanged_and_says_its_intervals_omit_seed_noise():
    table = pd.read_csv(FIXTURES / "looped_synthetic_small.csv")  # a seed column, one seed everywhere
    fit = fit_table(table, profile=False)
    assert fit.noise["model"] is None and "omit seed noise" in fit.noise["statement"]
    assert fit.noise["seeds_per_point"] == {"1": len(table)}
    assert fit.settings["delta"] == 1e-3  # today's objective
    off = fit_table(published(), profile=False, noise="off")
    assert off.noise["model"] is None and "omit seed noise" in off.noise["statement"]


def test_a_joint_fit_with_seeds_weights_both_recipes_and_bootstraps_in_two_stages():
    grid = pd.concat(
        [S.demo_grid(S.BASELINE_R, "baseline"), S.demo_grid(S.PROBE_R, "baseline").assign(recipe="other")],
        ignore_index=True,
    )
    table = S.seeded_sweep(grid, {"baseline": 0.75, "other": 0.6}, 3, 0.004, dense=S.DEMO_DENSE, forked=True)
    jt, recipes = joint_table([table], "recipe")
    fit = fit_joint(jt, "recipe", recipes, n_bootstrap=16, cluster="parent", separate=False)
    assert fit.noise["model"] is not None and fit.bootstrap["two_stage"] == "keep"
    assert fit.noise["n_points"] == 44 + 33  # a looped point of each recipe is its own
    d = fit.joint["delta_phi"]["other"]
    lo, hi = d["profile_interval"]
    assert lo < -0.15 < hi


def test_seed_repeats_with_identical_losses_are_said_not_measured():
    table = published(sigma=0.0)  # deterministic training: every seed gives the same loss
    fit = fit_table(table, profile=False)
    assert fit.noise["model"] is None and "identical losses" in fit.noise["statement"]
