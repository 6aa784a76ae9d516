"""Small formulas of the fitting core written out by hand (issue 58): the equivalent sizes and compute optima off
their defaults (derived.py), the CR1 cluster sandwich and the within-cluster lag-1 rho (cluster_se.py), and what
makes a point and a seed (replicates.py). Milliseconds each."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from loopscale.errors import InputError
from loopscale.fit import derived as DV
from loopscale.fit import points as P
from loopscale.fit import replicates as R
from loopscale.fit.cluster_se import cluster_robust_cov, residual_rho
from loopscale.fit.laws.form import LawData
from loopscale.fit.laws.registry import make_law

PARAMS = {"E": 1.7, "A": 41.0, "alpha": 0.27, "B": 620.0, "beta": 0.31, "phi": 0.43}


# ----------------------------------------------------------------------------------------------
# derived.py
# ----------------------------------------------------------------------------------------------
def test_equivalent_sizes_exactly_and_their_edges():
    s = DV.equivalent_sizes(r=3, N_once=2.2e8, N_rec=1.9e8, phi=0.43)
    assert (s.N_unique, s.N_cost) == (4.1e8, pytest.approx(2.2e8 + 3 * 1.9e8, rel=1e-15))
    assert s.N_eff == pytest.approx(2.2e8 + 3**0.43 * 1.9e8, rel=1e-15)
    assert s.as_dict()["r"] == 3.0 and s.as_dict()["phi"] == 0.43
    DV.equivalent_sizes(r=1, N_once=0.0, N_rec=5.0, phi=0.4)  # r = 1 and N_once = 0 are models
    for bad in (
        {"r": 0.99, "N_once": 1.0, "N_rec": 1.0},
        {"r": 2, "N_once": 0.0, "N_rec": 0.0},
        {"r": 2, "N_once": -1.0, "N_rec": 3.0},
    ):
        with pytest.raises(InputError, match="need r >= 1"):
            DV.equivalent_sizes(phi=0.5, **bad)
    np.testing.assert_allclose(DV.training_cost_size([1.0, 2.0], [3.0, 5.0], [4.0, 2.0]), [13.0, 12.0])


def test_isodepth_fraction_and_eff_per_cost_off_their_defaults():
    # 24 effective layers, 3 prelude + 1 coda: k = 20 / r looped layers
    assert DV.isodepth_once_fraction(2, L_eff=24, prelude=3, coda=1) == pytest.approx(4 / 14, rel=1e-15)
    assert DV.isodepth_once_fraction(4) == pytest.approx(4 / (4 + 4), rel=1e-15)
    assert DV.eff_per_cost(3.0, 0.43, 0.3) == pytest.approx((0.3 + 3**0.43 * 0.7) / (0.3 + 3 * 0.7), rel=1e-15)


def test_compute_optimal_closed_form_and_its_defaults():
    C, f, once = 3e20, 7.3, 0.3
    rho = (once + 3**0.43 * (1 - once)) / (once + 3 * (1 - once))
    a, b = 0.27, 0.31
    n_star = (a * 41.0 * rho**-a / (b * 620.0)) ** (1 / (a + b)) * (C / f) ** (b / (a + b))
    opt = DV.compute_optimal(PARAMS, C, 3.0, once, f)
    assert opt.N_cost == pytest.approx(n_star, rel=1e-12) and opt.N_eff == pytest.approx(rho * n_star, rel=1e-12)
    assert opt.D == pytest.approx(C / (f * n_star), rel=1e-12)
    assert opt.L == pytest.approx(1.7 + 41.0 * (rho * n_star) ** -a + 620.0 * opt.D**-b, rel=1e-12)
    # r = 1: rho = 1 whatever the once fraction; no phi: phi = 1, so rho = 1 at any r
    dense = DV.compute_optimal(PARAMS, C, 1.0, 0.3)
    assert (
        dense.N_eff
        == dense.N_cost
        == pytest.approx((a * 41.0 / (b * 620.0)) ** (1 / (a + b)) * (C / 6) ** (b / (a + b)), rel=1e-12)
    )
    no_phi = {k: v for k, v in PARAMS.items() if k != "phi"}
    assert DV.compute_optimal(no_phi, C, 4.0, 0.3).N_cost == pytest.approx(dense.N_cost, rel=1e-12)
    for bad in (0.0, -6.0):
        with pytest.raises(InputError, match="flops_per_param must be > 0"):
            DV.compute_optimal(PARAMS, C, 2.0, 0.3, bad)


def test_optima_beside_dense_give_each_model_its_own_flops_per_parameter():
    sizes = DV.equivalent_sizes(r=4, N_once=1e8, N_rec=2e8, phi=0.43)
    dense, looped = DV.optima_beside_dense(PARAMS, 1e20, sizes, 0.25, flops=5.4e9, dense_flops=2.1e9)
    assert dense == DV.compute_optimal(PARAMS, 1e20, 1.0, 1.0, 2.1e9 / 3e8)  # F / N_unique
    assert looped == DV.compute_optimal(PARAMS, 1e20, 4.0, 0.25, 5.4e9 / 9e8)  # F / (N_once + r N_rec)
    plain = DV.optima_beside_dense(PARAMS, 1e20, sizes, 0.25)
    assert plain == [DV.compute_optimal(PARAMS, 1e20, 1.0, 1.0, 6.0), DV.compute_optimal(PARAMS, 1e20, 4.0, 0.25, 6.0)]
    with pytest.raises(InputError, match="FLOPs per token must be > 0; got 0"):
        DV.optima_beside_dense(PARAMS, 1e20, sizes, 0.25, flops=0.0)


# ----------------------------------------------------------------------------------------------
# cluster_se.py
# ----------------------------------------------------------------------------------------------
def test_cluster_robust_cov_is_the_cr1_sandwich_over_the_clusters():
    rng = np.random.default_rng(2)
    n = 10
    r = np.resize([1.0, 2.0, 4.0], n)
    N_once, N_rec, D = rng.uniform(2e7, 9e7, n), rng.uniform(3e7, 2e8, n), rng.uniform(2e9, 8e10, n)
    L = (1.7 + 41.0 * (N_once + r**0.43 * N_rec) ** -0.27 + 620.0 * D**-0.31) * np.exp(0.01 * rng.standard_normal(n))
    data, law = LawData(N_once, N_rec, r, D, L), make_law("looped")
    theta = np.array([np.log(1.7), np.log(41.0), 0.27, np.log(620.0), 0.31, 0.43])
    clusters = np.array([3, 3, 1, 7, 7, 7, 1, 2, 2, 3])  # 4 clusters
    log_pred, J = law.log_predict_and_jac(theta, data)
    e = log_pred - np.log(L)
    meat = np.zeros((6, 6))
    for g in (1, 2, 3, 7):
        s = (e[clusters == g, None] * J[clusters == g]).sum(axis=0)
        meat += np.outer(s, s)
    bread = np.linalg.pinv(J.T @ J)
    want = 4 / 3 * bread @ meat @ bread
    np.testing.assert_allclose(
        cluster_robust_cov(law, theta, data, clusters), want, rtol=1e-8, atol=1e-12 * np.abs(want).max()
    )
    # one row per cluster: the HC1 sandwich, n / (n - 1)
    hc = sum(np.outer(e[i] * J[i], e[i] * J[i]) for i in range(n))
    np.testing.assert_allclose(
        cluster_robust_cov(law, theta, data, np.arange(n)),
        n / (n - 1) * bread @ hc @ bread,
        rtol=1e-8,
        atol=1e-12 * np.abs(want).max(),
    )


def test_residual_rho_pools_consecutive_pairs_centred_within_each_cluster_in_step_order():
    res = np.array([0.5, 0.1, 0.3, -0.2, 0.4, 0.0, 0.9])
    clusters = np.array(["b", "a", "b", "a", "b", "a", "c"])
    step = np.array([30, 10, 10, 30, 20, 20, 5])
    # a in step order: 0.1, 0.0, -0.2 (mean -1/30); b: 0.3, 0.4, 0.5 (mean 0.4); c: one row, no pair
    a = np.array([0.1, 0.0, -0.2]) + 1 / 30
    b = np.array([0.3, 0.4, 0.5]) - 0.4
    x, y = np.concatenate([a[:-1], b[:-1]]), np.concatenate([a[1:], b[1:]])
    want = (x * y).sum() / np.sqrt((x * x).sum() * (y * y).sum())
    assert residual_rho(res, clusters, step) == pytest.approx(want, rel=1e-12)
    assert np.isnan(residual_rho(np.array([1.0, 2.0]), ["a", "b"], [1, 2]))  # no pair: no rho


# ----------------------------------------------------------------------------------------------
# replicates.py
# ----------------------------------------------------------------------------------------------
def test_round_sig_keeps_twelve_significant_digits():
    x = np.array([123456789012345.0, 1.23456789012345e-7, 0.0, np.inf, -987654321098.76])
    got = P.round_sig(x)
    assert got[0] == 123456789012000.0 and got[1] == pytest.approx(1.23456789012e-7, rel=1e-15)
    assert got[2] == 0.0 and got[3] == np.inf and got[4] == -987654321099.0
    assert P.round_sig(np.array([1e10 / 3]), digits=3)[0] == pytest.approx(3.33e9, rel=1e-15)


def test_point_keys_rules():
    table = pd.DataFrame(
        {"r": [1.0, 1.0, 4.0, 4.0], "N_once": 1.0, "N_rec": 2.0, "N": [3.0, 3.000001, 3.0, 3.0],
         "D": [5e9, 5e9 * (1 + 1e-14), 5e9, 5e9], "recipe": ["x", "y", "x", "y"]}
    )  # fmt: skip
    keys = R.point_keys(table)
    assert "N" not in keys.columns  # N_once and N_rec say it
    assert keys["_recipe"].tolist() == ["", "", "x", "y"]  # r = 1: the same dense model whatever its label
    reps = R.replicate_groups(table)
    assert reps.point.tolist() == [0, 0, 1, 2]  # the D's agree to 12 digits
    assert reps.seeds.tolist() == [2, 1, 1] and not reps.duplicate.any()  # no seed, no L: every row its own run
    assert R.point_keys(table, recipe_column=None).columns.tolist() == ["r", "N_once", "N_rec", "D"]
    assert R.point_keys(table.drop(columns=["N_once", "N_rec"])).columns.tolist() == ["r", "N", "D", "_recipe"]
    with pytest.raises(InputError, match="a point needs its tokens D"):
        R.point_keys(table.drop(columns="D"))
    assert "step" in R.point_keys(table.assign(step=[1, 2, 1, 2])).columns


def test_seeds_summary_and_the_line_collect_prints():
    table = pd.DataFrame(
        {"r": [2.0] * 7 + [1.0], "N_once": 1.0, "N_rec": 2.0, "D": [1e9, 1e9, 1e9, 2e9, 2e9, 3e9, 3e9, 1e9],
         "L": [3.0, 3.1, 3.2, 2.9, 2.8, 2.7, 2.7, 3.3], "seed": [0, 1, 2, 0, 1, 5, 5, ""]}
    )  # fmt: skip
    reps = R.replicate_groups(table)
    assert reps.seeds.tolist() == [3, 2, 1, 1] and reps.seed_column == "seed"
    assert reps.duplicate.tolist() == [False] * 6 + [True, False]  # seed 5 twice: one run counted twice
    s = reps.summary()
    assert s == {
        "n_points": 4, "n_replicated_points": 2, "seeds_per_point": {"1": 2, "2": 1, "3": 1},
        "n_duplicate_rows": 1, "dof": 3, "seed_column": "seed",
    }  # fmt: skip
    assert R.seed_count_line(reps) == "4 points: 2 with 1 seed, 1 with 2 seeds, 1 with 3 seeds"
    assert reps.has_repeats and not R.replicate_groups(table.iloc[5:]).has_repeats
    # without the seed column the losses tell copies apart: rows 5 and 6 (same point, same L) are one run
    plain = R.replicate_groups(table.drop(columns="seed"))
    assert plain.seeds.tolist() == [3, 2, 1, 1] and plain.duplicate.sum() == 1 and plain.seed_column is None
