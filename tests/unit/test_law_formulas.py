"""Each law's prediction and analytic Jacobian written out formula by formula (issue 58: tests that pin the formula,
not an outcome with slack): at a non-trivial theta (gamma != 0, N_0 != 1, N_pass > 0, psi != 0, r off the
published grid), L_hat from the law's equation in plain numpy and J against per-row central finite differences of
log L_hat; plus the rules around each law (its box, warm starts, names, what it refuses). Milliseconds each."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from loopscale.errors import InputError
from loopscale.fit.bounds import BOUNDS, DPHI_BOUNDS, LOG_K_BOUNDS, PSI_BOUNDS
from loopscale.fit.laws import form
from loopscale.fit.laws.looped_joint import MAX_PHI_COMBOS, RECIPE_CODE, phis_in_range, recipe_phi
from loopscale.fit.laws.looped_nxd import GAMMA_BOUNDS
from loopscale.fit.laws.lse import lse_and_weights
from loopscale.fit.laws.registry import law_class, make_law, predict_loss
from loopscale.fit.objective import Loss, objective_and_grad, objective_grad_hess

E, A, ALPHA, B, BETA = 1.7, 41.0, 0.27, 620.0, 0.31
BASE = np.array([np.log(E), np.log(A), ALPHA, np.log(B), BETA])
DENSE = {"E": E, "A": A, "alpha": ALPHA, "B": B, "beta": BETA}
RECIPES = ("base", "tb", "hy")


def rows() -> dict[str, np.ndarray]:
    """Eleven non-symmetric rows at r in {1, 2, 3, 8}, with per-pass parameters and recipe codes."""
    rng = np.random.default_rng(11)
    n = 11
    return {
        "N_once": rng.uniform(2e7, 9e7, n),
        "N_pass": rng.uniform(1e6, 4e7, n),
        "N_rec": rng.uniform(3e7, 2e8, n),
        "r": np.array([1, 2, 3, 8, 2, 3, 8, 1, 3, 2, 8], dtype=float),
        "D": rng.uniform(2e9, 8e10, n),
        "code": np.array([0, 1, 2, 0, 2, 1, 1, 2, 0, 0, 2]),
    }


COLS = rows()


def law_data(with_pass: bool = False, recipe: bool = False) -> form.LawData:
    c = COLS
    extra = {"N_pass": c["N_pass"]} if with_pass else {}
    return form.LawData(c["N_once"], c["N_rec"], c["r"], c["D"], None, c["code"] if recipe else None, extra)


def loss(n_eff_, D, beta=BETA):
    return E + A * n_eff_**-ALPHA + B * D**-beta


def fd_jacobian(law, theta, data, h=1e-6):
    """(rows, P): central differences of log L_hat, one coordinate at a time."""
    cols = []
    for j in range(len(theta)):
        step = np.zeros(len(theta))
        step[j] = h
        cols.append((law.log_predict(theta + step, data) - law.log_predict(theta - step, data)) / (2 * h))
    return np.array(cols).T


def check(law, theta, data, expected_L):
    """The law's L_hat equals the written-out formula and its J the finite differences, row by row."""
    log_pred, J = law.log_predict_and_jac(np.asarray(theta, dtype=float), data)
    np.testing.assert_allclose(np.exp(log_pred), expected_L, rtol=1e-12)
    np.testing.assert_allclose(law.log_predict_batch(np.asarray(theta)[None, :], data)[0], log_pred, rtol=1e-13)
    fd = fd_jacobian(law, np.asarray(theta, dtype=float), data)
    np.testing.assert_allclose(J, fd, rtol=1e-6, atol=1e-9)


# ----------------------------------------------------------------------------------------------
# lse and the base law
# ----------------------------------------------------------------------------------------------
def test_lse_and_weights_is_log_sum_exp_with_softmax_weights_even_for_huge_terms():
    t1, t2, t3 = (
        np.array([0.3, 800.0, -2.0, 1.0]),
        np.array([-1.1, 799.0, -2.5, 0.5]),
        np.array([0.9, 700.0, 1.0, 900.0]),
    )
    got, (w1, w2, w3) = lse_and_weights(t1, t2, t3)
    # the first and last rows in plain numpy; the second shifted by hand (exp(800) overflows)
    for i in (0, 2):
        total = np.exp(t1[i]) + np.exp(t2[i]) + np.exp(t3[i])
        assert got[i] == pytest.approx(np.log(total), rel=1e-14)
        assert (w1[i], w2[i], w3[i]) == pytest.approx(
            (np.exp(t1[i]) / total, np.exp(t2[i]) / total, np.exp(t3[i]) / total), rel=1e-13
        )
    shifted = 1 + np.exp(-1.0) + np.exp(-100.0)
    assert got[1] == pytest.approx(800.0 + np.log(shifted), rel=1e-15)
    assert (w1[1], w2[1], w3[1]) == pytest.approx(
        (1 / shifted, np.exp(-1.0) / shifted, np.exp(-100.0) / shifted), rel=1e-13
    )
    assert got[3] == pytest.approx(900.0, rel=1e-15) and w3[3] == 1.0  # the third term the largest: no overflow


def test_r_label_cost_and_tokens_from_compute():
    assert form.r_label(4.0) == "4" and form.r_label(1.5) == "1.5" and form.r_label(2) == "2"
    assert form.cost_params(3.0, 5.0, 4.0) == 23.0  # N_once + r N_rec, not r^phi
    assert form.tokens_from_compute(6e19, 5e8) == pytest.approx(6e19 / (6 * 5e8), rel=1e-15)
    assert form.compute_from_tokens(2e10, 5e8) == pytest.approx(6 * 5e8 * 2e10, rel=1e-15)
    assert form.FLOPS_PER_PARAM_TOKEN == 6.0
    assert form.per_pass_rows({"N_pass": [0.0, 3.0, 0.0, 1.0]}) == 2 and form.per_pass_rows({"N": [1.0]}) == 0


def test_user_value_names_a_missing_or_non_positive_parameter():
    assert form.user_value("looped", {"A": 5.0}, "A", log=True) == pytest.approx(np.log(5.0))
    assert form.user_value("looped", {"phi": -0.2}, "phi", log=False) == -0.2  # a linear coordinate may be < 0
    with pytest.raises(InputError, match=r"parameter A must be > 0 for law 'looped'; got 0.0"):
        form.user_value("looped", {"A": 0.0}, "A", log=True)
    with pytest.raises(InputError, match=r"needs parameter 'B'; got \['A'\]"):
        form.user_value("looped", {"A": 1.0}, "B", log=True)


def test_to_user_and_from_user_are_exp_and_log_of_the_amplitudes_only():
    law = make_law("looped")
    theta = np.array([*BASE, 0.43])
    assert law.to_user(theta) == {
        "E": pytest.approx(E),
        "A": pytest.approx(A),
        "alpha": ALPHA,
        "B": pytest.approx(B),
        "beta": BETA,
        "phi": 0.43,
    }
    np.testing.assert_allclose(law.from_user({**DENSE, "phi": 0.43}), theta, rtol=1e-15)
    assert law.internal_names == ("e", "a", "alpha", "b", "beta", "phi")
    assert law.user_names == ("E", "A", "alpha", "B", "beta", "phi")
    assert law.bounds() == [BOUNDS[k] for k in ("e", "a", "alpha", "b", "beta", "phi")]


def test_invalid_rows_are_those_with_no_parameters_and_check_table_names_the_rule():
    table = pd.DataFrame(
        {"N_once": [0.0, 1.0, 0.0], "N_rec": [0.0, 0.0, 2.0], "r": [1.0, 2.0, 2.0], "N_pass": [0.0, 0.0, 0.0]}
    )
    mask, rule = law_class("looped").invalid_rows(table)
    assert mask.tolist() == [True, False, False] and rule == "N_once + N_rec must be > 0"
    with pytest.raises(InputError, match="all rows have r = 2"):
        law_class("looped").check_table(table.iloc[1:])
    law_class("looped").check_table(table)  # r in {1, 2}: enough
    with pytest.raises(InputError, match="1 rows have N_pass > 0"):
        law_class("looped").check_table(table.assign(N_pass=[0.0, 5.0, 0.0]))
    law_class("looped-pass").check_table(table.assign(N_pass=[0.0, 5.0, 0.0]))  # its own column


# ----------------------------------------------------------------------------------------------
# The laws, one by one
# ----------------------------------------------------------------------------------------------
def test_looped_law_and_its_multiplier():
    c, phi = COLS, 0.43
    check(make_law("looped"), [*BASE, phi], law_data(), loss(c["N_once"] + c["r"] ** phi * c["N_rec"], c["D"]))
    assert float(make_law("looped").multiplier({"phi": phi}, 3.0)) == pytest.approx(3.0**phi, rel=1e-15)


def test_looped_logr_reads_phi_at_r_4_and_psi_per_e_fold():
    c, phi, psi = COLS, 0.43, -0.21
    exponent = phi + psi * np.log(c["r"] / 4.0)
    law = make_law("looped-logr")
    check(law, [*BASE, phi, psi], law_data(), loss(c["N_once"] + c["r"] ** exponent * c["N_rec"], c["D"]))
    assert law.internal_names[5:] == ("phi", "psi") and law.extra_bounds() == [BOUNDS["phi"], PSI_BOUNDS]
    assert law.to_user(np.array([*BASE, phi, psi]))["psi"] == psi
    warm = law.warm_starts(np.array([*BASE, 0.52]))
    np.testing.assert_array_equal(warm, [[*BASE, 0.52, 0.0], [*BASE, 0.52, -0.25], [*BASE, 0.52, 0.25]])
    base = pd.DataFrame({"r": [1.0, 2.0, 8.0], "N_once": 1.0, "N_rec": 1.0})
    law_class("looped-logr").check_table(base)  # r = 2 and 8: two r > 1
    with pytest.raises(InputError, match=r"two or more r > 1 .* the table has r = 1, 8"):
        law_class("looped-logr").check_table(base.iloc[[0, 2]])


def test_looped_nxd_moves_the_data_exponent_with_log_n_eff_about_n0():
    c, phi, gamma, n0 = COLS, 0.43, 0.037, 1.3e8
    law = law_class("looped-nxd").from_params({**DENSE, "phi": phi, "gamma": gamma, "N_0": n0})
    assert law.log_n0 == pytest.approx(np.log(n0), rel=1e-15)
    n = c["N_once"] + c["r"] ** phi * c["N_rec"]
    check(law, [*BASE, phi, gamma], law_data(), loss(n, c["D"], beta=BETA + gamma * np.log(n / n0)))
    assert law.to_user(np.array([*BASE, phi, gamma])) == pytest.approx({**DENSE, "phi": phi, "gamma": gamma, "N_0": n0})
    assert law_class("looped-nxd").from_params(DENSE).log_n0 == 0.0  # N_0 = 1 when the record has none
    assert law.extra_bounds() == [BOUNDS["phi"], GAMMA_BOUNDS] and GAMMA_BOUNDS == (-0.2, 0.2)
    rival = law_class("looped-nxd").rival_law(law_data(), DENSE)  # N_0: geometric mean of N_once + N_rec
    assert rival.log_n0 == pytest.approx(np.mean(np.log(c["N_once"] + c["N_rec"])), rel=1e-14)
    warm = law.warm_starts(np.array([*BASE, 0.52]))
    np.testing.assert_array_equal(warm, [[*BASE, 0.52, 0.0], [*BASE, 0.52, 0.01], [*BASE, 0.52, -0.01]])
    assert not law.has_hessian and not law.compute_optimal


def test_looped_pass_counts_n_pass_once_in_n_eff_and_in_the_cost():
    c, phi = COLS, 0.43
    law = make_law("looped-pass")
    expected = loss(c["N_once"] + c["N_pass"] + c["r"] ** phi * c["N_rec"], c["D"])
    check(law, [*BASE, phi], law_data(with_pass=True), expected)
    table = {k: c[k] for k in ("N_once", "N_pass", "N_rec", "r")} | {"C": 6.0e19 * np.ones(11)}
    data = law_class("looped-pass").data_from_table(table)
    np.testing.assert_allclose(data.D, 6.0e19 / (6 * (c["N_once"] + c["N_pass"] + c["r"] * c["N_rec"])), rtol=1e-15)
    np.testing.assert_array_equal(data.extra["N_pass"], c["N_pass"])
    got = predict_loss("looped-pass", {**DENSE, "phi": phi}, table)
    n = c["N_once"] + c["N_pass"] + c["r"] ** phi * c["N_rec"]
    np.testing.assert_allclose(got, loss(n, data.D), rtol=1e-12)
    size = law.effective_size({**DENSE, "phi": phi}, table)
    np.testing.assert_allclose(size, n, rtol=1e-12)  # N_pass with N_once, r^phi on N_rec only


def test_looped_free_gives_each_r_its_multiplier_and_r1_none():
    c = COLS
    law = make_law("looped-free", c["r"])
    assert law.r_values == (2.0, 3.0, 8.0) and law.user_names[5:] == ("k_2", "k_3", "k_8")
    assert law.internal_names[5:] == ("log_k_2", "log_k_3", "log_k_8") and law.extra_bounds() == [LOG_K_BOUNDS] * 3
    k = {2.0: 1.31, 3.0: 1.77, 8.0: 2.9}
    m = np.array([k.get(r, 1.0) for r in c["r"]])
    check(law, [*BASE, *np.log(list(k.values()))], law_data(), loss(c["N_once"] + m * c["N_rec"], c["D"]))
    params = {**DENSE, "k_2": 1.31, "k_3": 1.77, "k_8": 2.9}
    assert float(law.multiplier(params, 3.0)) == 1.77 and float(law.multiplier(params, 1.0)) == 1.0
    with pytest.raises(InputError, match=r"for r in \[2, 3, 8\] only"):
        law.multiplier(params, 4.0)
    assert law_class("looped-free").from_params(params).r_values == (2.0, 3.0, 8.0)
    assert make_law("looped-free", [1.0, 1.5, 4.0]).user_names[5:] == ("k_1.5", "k_4")
    warm = law.warm_starts(np.array([*BASE, 0.4]))  # k_r = r^phi, 1, r
    np.testing.assert_allclose(warm[:, 5:], [0.4 * np.log([2, 3, 8]), np.zeros(3), np.log([2, 3, 8])], rtol=1e-15)
    np.testing.assert_array_equal(warm[:, :5], np.tile(BASE, (3, 1)))
    with pytest.raises(InputError, match="needs r = 1 runs"):
        law_class("looped-free").check_table(pd.DataFrame({"r": [2.0, 4.0], "N_once": 1.0, "N_rec": 1.0}))
    with pytest.raises(InputError, match="k_8 must be > 0"):
        law.from_user({**params, "k_8": 0.0})


def test_looped_pinned_e_holds_e_by_its_box_and_predicts_as_looped():
    c, phi = COLS, 0.43
    law = law_class("looped-pinned-e").from_params({**DENSE, "phi": phi})
    assert law.E_pinned == E
    assert law.bounds() == [(np.log(E), np.log(E)), *[BOUNDS[k] for k in ("a", "alpha", "b", "beta", "phi")]]
    check(law, [*BASE, phi], law_data(), loss(c["N_once"] + c["r"] ** phi * c["N_rec"], c["D"]))
    assert law_class("looped-pinned-e").rival_law(law_data(), {"E": 2.25}).E_pinned == 2.25
    for bad in (None, 0.0, -1.0):
        with pytest.raises(InputError, match="needs the value of E to pin"):
            law_class("looped-pinned-e")(E_pinned=bad).bounds()


def test_chinchilla_reads_n_or_the_sum_of_the_parts_and_ignores_r():
    c = COLS
    N = c["N_once"] + c["N_rec"]
    law = make_law("chinchilla")
    check(law, BASE, form.LawData(N, np.zeros(11), np.ones(11), c["D"]), loss(N, c["D"]))
    table = {"N_once": c["N_once"], "N_rec": c["N_rec"], "r": c["r"], "C": 3e19 * np.ones(11)}
    data = law_class("chinchilla").data_from_table(table)
    np.testing.assert_allclose(data.D, 3e19 / (6 * N), rtol=1e-15)  # N is the unique parameters, r unread
    np.testing.assert_array_equal(data.N_once, N)
    assert not data.N_rec.any() and (data.r == 1).all()
    np.testing.assert_allclose(predict_loss("chinchilla", DENSE, table), loss(N, data.D), rtol=1e-12)
    assert float(law.multiplier(DENSE, 8.0)) == 1.0 and law_class("chinchilla").invalid_rows(table) is None
    with pytest.raises(InputError, match="needs column 'N'"):
        law_class("chinchilla").data_from_table({"N_once": [1.0], "D": [1.0]})


def test_looped_joint_jacobian_per_recipe_and_its_rules():
    c = COLS
    law = make_law("looped-joint", recipes=RECIPES)
    phis = np.array([0.43, 0.31, 0.66])
    theta = [*BASE, phis[0], phis[1] - phis[0], phis[2] - phis[0]]
    check(law, theta, law_data(recipe=True), loss(c["N_once"] + c["r"] ** phis[c["code"]] * c["N_rec"], c["D"]))
    assert law.extra_bounds() == [BOUNDS["phi"], DPHI_BOUNDS, DPHI_BOUNDS]
    params = {**DENSE, "phi[base]": 0.43, "phi[tb]": 0.31, "phi[hy]": 0.66}
    assert float(law.multiplier(params, 4.0)) == pytest.approx(4**0.43) and float(
        law.multiplier(params, 4.0, "hy")
    ) == pytest.approx(4**0.66)
    with pytest.raises(InputError, match="no recipe 'zz'"):
        law.multiplier(params, 4.0, "zz")
    with pytest.raises(InputError, match=r"needs parameter 'phi\[tb\]'"):
        law.from_user({k: v for k, v in params.items() if k != "phi[tb]"})
    names = np.array(RECIPES)[c["code"]]
    table = pd.DataFrame({k: c[k] for k in ("N_once", "N_rec", "r", "D")}).assign(recipe=names)
    # r = 1 rows read the reference's phi whatever their label; looped rows their own
    expected_phi = np.where(c["r"] > 1, phis[c["code"]], phis[0])
    np.testing.assert_array_equal(recipe_phi(table, params, "recipe"), expected_phi)
    with pytest.raises(InputError, match=r"no phi for recipe = \['zz'\]"):
        recipe_phi(table.assign(recipe=np.where(c["r"] == 3, "zz", names)), params, "recipe")
    recipe_phi(table.assign(recipe=np.where(c["r"] == 1, "zz", names)), params, "recipe")  # r = 1: any label
    np.testing.assert_array_equal(recipe_phi(table.drop(columns="recipe"), params, "recipe"), np.full(11, 0.43))
    got = predict_loss("looped-joint", params, table)
    np.testing.assert_allclose(got, loss(c["N_once"] + c["r"] ** expected_phi * c["N_rec"], c["D"]), rtol=1e-12)
    data = law_class("looped-joint").data_from_table(table.assign(**{RECIPE_CODE: c["code"]}))
    np.testing.assert_array_equal(data.recipe, c["code"])


def test_looped_joint_start_grid_rules():
    # every recipe's phi in [0, 1.2], both ends included
    grid = np.array(
        [[0.2, 0.3, 0.0, 0.0, 1.2], [0.2, 0.3, 1.2, 0.0, -1.2], [0.2, 0.3, 0.5, -0.51, 0.0], [0.2, 0.3, 1.0, 0.0, 0.21]]
    )
    assert phis_in_range(grid).tolist() == [True, True, False, False]
    two, four = make_law("looped-joint", recipes=("a", "b")), make_law("looped-joint", recipes=("a", "b", "c", "d"))
    values = np.array([0.0, 0.3, 0.6, 0.9, 1.2])
    np.testing.assert_array_equal(two.projected_axes(values)[0], values)  # two recipes: every value
    per = four.projected_axes(values)[0]  # four: round(49^(1/4)) = 3 values across the same range
    np.testing.assert_allclose(per, [0.0, 0.6, 1.2])
    np.testing.assert_allclose(four.projected_axes(values)[1], [-1.2, -0.6, 0.0, 0.6, 1.2])
    three = make_law("looped-joint", recipes=("a", "b", "c"))  # round(49^(1/3)) = round(3.66) = 4 values
    np.testing.assert_allclose(three.projected_axes(values)[0], [0.0, 0.4, 0.8, 1.2])
    assert MAX_PHI_COMBOS == 243
    six = make_law("looped-joint", recipes=tuple("abcdef"))  # 3^6 = 729 > 243: chosen combinations
    g = six.projected_grid(np.array([0.2, 0.4]), np.array([0.3]), values)
    assert g.shape == (2 * MAX_PHI_COMBOS, 2 + 6)
    phis = g[:, 2:3] + np.hstack([np.zeros((len(g), 1)), g[:, 3:]])
    np.testing.assert_allclose(phis[:3], [[0.0] * 6, [0.6] * 6, [1.2] * 6], atol=1e-15)  # shared phi first
    np.testing.assert_allclose(phis[3], [0.6, 0, 0, 0, 0, 0], atol=1e-15)  # then one recipe moved alone
    assert len(np.unique(phis[:MAX_PHI_COMBOS], axis=0)) == MAX_PHI_COMBOS


def test_looped_pass_joint_counts_n_pass_once_per_recipe():
    c = COLS
    law = make_law("looped-pass-joint", recipes=RECIPES)
    phis = np.array([0.43, 0.31, 0.66])
    theta = [*BASE, phis[0], phis[1] - phis[0], phis[2] - phis[0]]
    n = c["N_once"] + c["N_pass"] + c["r"] ** phis[c["code"]] * c["N_rec"]
    check(law, theta, law_data(with_pass=True, recipe=True), loss(n, c["D"]))
    params = {**DENSE, "phi[base]": 0.43, "phi[tb]": 0.31, "phi[hy]": 0.66}
    table = pd.DataFrame({k: c[k] for k in ("N_once", "N_pass", "N_rec", "r", "D")}).assign(
        grp=np.array(RECIPES)[c["code"]]
    )
    phi_rows = np.where(c["r"] > 1, phis[c["code"]], phis[0])
    n_rows = c["N_once"] + c["N_pass"] + c["r"] ** phi_rows * c["N_rec"]
    np.testing.assert_allclose(
        predict_loss("looped-pass-joint", params, table, "grp"), loss(n_rows, c["D"]), rtol=1e-12
    )
    data = law_class("looped-pass-joint").data_from_table(table.drop(columns="D").assign(C=5e19))
    np.testing.assert_allclose(data.D, 5e19 / (6 * (c["N_once"] + c["N_pass"] + c["r"] * c["N_rec"])), rtol=1e-15)
    np.testing.assert_array_equal(data.extra["N_pass"], c["N_pass"])


def test_law_data_subset_relabels_noise_groups_and_keeps_every_column():
    c = COLS
    data = form.LawData(
        c["N_once"],
        c["N_rec"],
        c["r"],
        c["D"],
        np.linspace(2, 3, 11),
        c["code"],
        {"N_pass": c["N_pass"]},
        np.linspace(0.01, 0.02, 11),
        np.array([4, 4, 7, 7, 9, 9, 9, 1, 1, 5, 5]),
        13,
    )
    sub = data.subset(np.array([1, 2, 3, 8, 9]))
    assert sub.noise_group.tolist() == [1, 3, 3, 0, 2]  # 4, 7, 7, 1, 5 -> their ranks among {1, 4, 5, 7}
    np.testing.assert_array_equal(sub.extra["N_pass"], c["N_pass"][[1, 2, 3, 8, 9]])
    np.testing.assert_array_equal(sub.sigma, data.sigma[[1, 2, 3, 8, 9]])
    np.testing.assert_array_equal(sub.recipe, c["code"][[1, 2, 3, 8, 9]])
    np.testing.assert_allclose(sub.log_L, np.log(data.L[[1, 2, 3, 8, 9]]))
    assert sub.sigma_dof == 13 and len(sub) == 5


@pytest.mark.parametrize("name", ["looped-logr", "looped-pass", "looped-pass-joint", "looped-pinned-e"])
def test_the_exact_hessian_of_the_laws_linear_in_their_extras(name):
    """`lse.lse_jac_hess` for the laws with has_hessian that test_law_hessians does not take (psi != 0, N_pass > 0):
    the objective's Hessian against central differences of its gradient, sigma-standardised and weighted."""
    c = COLS
    law = law_class(name)(E_pinned=E) if name == "looped-pinned-e" else make_law(name, c["r"], RECIPES)
    assert law.has_hessian
    extras = {"looped-logr": [0.43, -0.21], "looped-pass-joint": [0.43, -0.12, 0.23]}.get(name, [0.43])
    theta = np.array([*BASE, *extras])
    n_eff_ = c["N_once"] + c["N_pass"] + c["r"] ** 0.4 * c["N_rec"]
    L = loss(n_eff_, c["D"]) * np.exp(0.02 * np.sin(np.arange(11.0)))
    data = form.LawData(
        c["N_once"], c["N_rec"], c["r"], c["D"], L, c["code"], {"N_pass": c["N_pass"]}, np.linspace(0.01, 0.03, 11)
    )
    objective_loss, w = Loss("huber", 1.0), np.linspace(0.5, 2.0, 11)
    _, _, H, _ = objective_grad_hess(theta, law, data, objective_loss, w)
    h = 1e-6
    fd = np.array(
        [
            (
                objective_and_grad(theta + h * e, law, data, objective_loss, w)[1]
                - objective_and_grad(theta - h * e, law, data, objective_loss, w)[1]
            )
            / (2 * h)
            for e in np.eye(len(theta))
        ]
    )
    np.testing.assert_allclose(H, fd, rtol=1e-5, atol=1e-6 * np.abs(H).max())
    # the extras' block on its own scale (it is small beside the amplitudes' and would hide in their tolerance)
    np.testing.assert_allclose(H[5:, 5:], fd[5:, 5:], rtol=1e-5, atol=1e-6 * np.abs(H[5:, 5:]).max())
