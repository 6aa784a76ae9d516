"""The joint fit's own rules written out (issue 58), on small hand-made tables and fits started at their truth:
which rows joint_table keeps and how it codes them (recipes by first appearance, r = 1 rows code 0, a copy kept
once, the 2 (5 + K) row minimum), each recipe's separate rows, the bootstrap's delta-phi per replicate with its CI
and ddof-1 se, the per-recipe cluster check, and the shared-parameter check's weights, statistic and 5 (K - 1) df.
About a second in all."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import chi2

from loopscale.errors import InputError
from loopscale.fit import joint as J
from loopscale.fit.laws.looped_joint import RECIPE_CODE
from loopscale.fit.laws.registry import law_data_from_table, make_law
from loopscale.fit.objective import Loss, objective
from loopscale.fit.optimize import fit_law, refine
from loopscale.fit.task_pool import one_blas_thread
from loopscale.fit.uncertainty import percentile_ci, profile_threshold

PHI = {"base": 0.45, "tb": 0.33, "hy": 0.6}
DENSE = np.array([np.log(1.7), np.log(41.0), 0.27, np.log(620.0), 0.31])


def recipe_table(recipe: str, with_dense: bool, seed: int, n_per_r: int = 4) -> pd.DataFrame:
    """A canonical-looking runs table of one recipe: r in {2, 4} (and the shared r = 1 runs when with_dense)."""
    rng = np.random.default_rng(seed)
    rs = ([1.0] if with_dense else []) + [2.0, 4.0]
    r = np.repeat(rs, n_per_r)
    dense_rng = np.random.default_rng(99)  # the r = 1 runs: the same in every recipe's table
    N_once = np.where(r == 1, dense_rng.uniform(2e7, 9e7, len(r)), rng.uniform(2e7, 9e7, len(r)))
    N_rec = np.where(r == 1, dense_rng.uniform(3e7, 2e8, len(r)), rng.uniform(3e7, 2e8, len(r)))
    D = np.where(r == 1, dense_rng.uniform(2e9, 8e10, len(r)), rng.uniform(2e9, 8e10, len(r)))
    L = 1.7 + 41.0 * (N_once + r ** PHI[recipe] * N_rec) ** -0.27 + 620.0 * D**-0.31
    noise = np.where(r == 1, np.random.default_rng(7).standard_normal(len(r)), rng.standard_normal(len(r)))
    return pd.DataFrame(
        {"r": r, "N_once": N_once, "N_rec": N_rec, "D": D, "L": L * np.exp(0.005 * noise), "recipe": recipe}
    )


@pytest.fixture(scope="module")
def merged():
    tables = [recipe_table("base", True, 1), recipe_table("tb", True, 2), recipe_table("hy", False, 3, n_per_r=6)]
    return J.joint_table(tables, "recipe")


def test_joint_table_keeps_each_run_once_and_codes_recipes_by_first_appearance(merged):
    table, recipes = merged
    assert recipes == ("base", "tb", "hy")
    assert len(table) == 4 + 8 + 8 + 12  # the r = 1 runs of base and tb are one set
    r1 = table["r"].to_numpy() == 1
    assert (table.loc[r1, RECIPE_CODE] == 0).all() and r1.sum() == 4
    looped = table.loc[~r1]
    assert (looped[RECIPE_CODE] == looped["recipe"].map({"base": 0, "tb": 1, "hy": 2})).all()
    np.testing.assert_array_equal(J.recipe_rows(table, 2), r1 | (table["recipe"] == "hy").to_numpy())
    assert J._rows_by_recipe(table, recipes) == {"shared r = 1": 4, "base": 8, "tb": 8, "hy": 12}
    # a looped run of the same inputs under two recipes is two runs; the same run in two tables is one
    twice = J.joint_table([recipe_table("base", True, 1), recipe_table("base", True, 1).assign(recipe="tb")], "recipe")[
        0
    ]
    assert len(twice) == 4 + 8 + 8
    reordered = J.joint_table([recipe_table("tb", True, 2), recipe_table("base", True, 1)], "recipe")[1]
    assert reordered == ("tb", "base")


def test_joint_table_refusals_count_what_they_name():
    small = [recipe_table("base", True, 1, n_per_r=2), recipe_table("tb", False, 2, n_per_r=2)]
    J.joint_table([recipe_table("base", True, 1, n_per_r=3), recipe_table("tb", False, 2, n_per_r=4)], "recipe")  # 14
    with pytest.raises(
        InputError,
        match=r"^10 distinct runs is too few for a joint fit of 2 recipes with 7 parameters \(need at least 14\)$",
    ):
        J.joint_table(small, "recipe")
    gap = recipe_table("tb", True, 2).astype({"recipe": object})
    gap.loc[[5, 9, 10], "recipe"] = None
    with pytest.raises(InputError, match=r"--joint column 'recipe' is empty on 3 looped \(r > 1\) rows of table 2"):
        J.joint_table([recipe_table("base", True, 1), gap], "recipe")
    gap.loc[[5, 9, 10], "recipe"] = "tb"
    gap.loc[[0, 1], "recipe"] = None  # r = 1 rows need no label
    J.joint_table([recipe_table("base", True, 1), gap], "recipe")


def test_the_joint_bootstrap_records_delta_phi_per_replicate_and_its_se(merged):
    table, recipes = merged
    law = make_law("looped-joint", recipes=recipes)
    start = np.concatenate([DENSE, [PHI["base"], PHI["tb"] - PHI["base"], PHI["hy"] - PHI["base"]]])
    with one_blas_thread():
        result, state = fit_law(J.joint_data(table), law, Loss(), starts=start[None, :])
        J._attach_bootstrap(result, state, recipes, 5, 3, None, None, 0.8)
    cols = result.bootstrap["params"]
    for g in ("tb", "hy"):
        want = np.array(cols[f"phi[{g}]"]) - np.array(cols["phi[base]"])
        np.testing.assert_allclose(cols[f"delta_phi[{g}]"], want, rtol=1e-12)
    assert result.ci95 == percentile_ci(cols, 0.8)
    with one_blas_thread():
        d = J._delta_phi(result, state, "base", "hy", None)
    assert d.estimate == pytest.approx(result.params["phi[hy]"] - result.params["phi[base]"], rel=1e-12)
    assert d.se == pytest.approx(np.std(cols["delta_phi[hy]"], ddof=1), rel=1e-12) and d.n_replicates == 5
    assert d.bootstrap_ci == result.ci95["delta_phi[hy]"] and d.lr_test["value"] == 0.0


def test_the_cluster_check_covers_each_recipes_separate_rows(merged):
    table, recipes = merged
    width = np.where(
        table["r"] == 1, "w0", np.where(table["recipe"] == "hy", "w1", np.resize(["w1", "w2", "w3"], len(table)))
    )
    t = table.assign(width=width)
    assert J.check_joint_inputs(t, recipes, 0, "width") is None and J.check_joint_inputs(t, recipes, 5, None) is None
    with pytest.raises(InputError, match=r"--cluster width: 2 clusters in recipe hy's rows \(its separate fit\)"):
        J.check_joint_inputs(t, recipes, 5, "width")  # hy's rows: w0 and w1 only
    labels = J.check_joint_inputs(t.assign(width=np.resize(["a", "b", "c"], len(t))), recipes, 5, "width")
    assert labels.tolist() == list(np.resize(["a", "b", "c"], len(t)))


def test_the_shared_parameter_check_weights_dense_runs_by_recipes_and_counts_5_per_extra_recipe(merged):
    table, recipes = merged
    law, loss = make_law("looped-joint", recipes=recipes), Loss("huber", 0.01)
    start = np.concatenate([DENSE, [PHI["base"], PHI["tb"] - PHI["base"], PHI["hy"] - PHI["base"]]])
    with one_blas_thread():
        _, state = fit_law(J.joint_data(table), law, loss, starts=start[None, :])
        sep = {}
        for i, g in enumerate(recipes):
            part = table[J.recipe_rows(table, i)].reset_index(drop=True)
            sep[g] = fit_law(law_data_from_table(part, "looped"), "looped", loss, starts=np.r_[DENSE, PHI[g]][None, :])
        check = J.shared_parameter_check(state, table, sep)
    weights = np.where(table["r"].to_numpy() == 1, 3.0, 1.0)
    assert check.df == 10
    assert check.objective_separate_sum == pytest.approx(sum(s.best.objective for _, s in sep.values()), rel=1e-12)
    # the restricted fit is the joint law's optimum on the stacked data: no point does better than it
    assert check.objective_joint <= objective(state.best.theta, law, state.data, loss, weights) * (1 + 1e-12)
    with one_blas_thread():
        assert check.objective_joint == pytest.approx(
            refine(state.best.theta, law, state.data, loss, weights).objective, rel=1e-7
        )
    psi2 = sum(profile_threshold(s)[1]["mean_psi_sq"] * len(s.data) for _, s in sep.values())
    dpsi = sum(profile_threshold(s)[1]["mean_psi_prime"] * len(s.data) for _, s in sep.values())
    T = 2 * max(0.0, check.objective_joint - check.objective_separate_sum) * dpsi / psi2
    assert check.statistic == pytest.approx(T, rel=1e-9) and check.p_value == pytest.approx(chi2.sf(T, 10), rel=1e-9)


def test_the_joint_records_data_has_each_recipes_shapes(merged):
    table, recipes = merged
    data = J._joint_summary(table, recipes)
    for i, g in enumerate(recipes):
        rows = table[J.recipe_rows(table, i)]
        want = sorted({(float(r), float(a), float(b)) for r, a, b in zip(rows["r"], rows["N_once"], rows["N_rec"])})
        assert [tuple(s) for s in data.shapes_by_recipe[g]] == want
    assert len(data.shapes) == len(table)  # every run a shape of its own here
