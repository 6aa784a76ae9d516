"""Law forms: closed forms, batched vs single predictions, analytic gradients vs finite differences."""

import numpy as np
import pytest

from loopscale.fit.laws.form import Law, LawData, n_eff
from loopscale.fit.laws.registry import law_class, law_data_from_table, law_names, make_law, predict_loss
from loopscale.fit.objective import Loss, objective, objective_and_grad

PARAMS = {"E": 1.57, "A": 28.0, "alpha": 0.20, "B": 916.0, "beta": 0.37, "phi": 0.46}


RECIPES = ("baseline", "tbptt", "hyper")


def small_data(seed=0):
    rng = np.random.default_rng(seed)
    n = 40
    r = rng.choice([1, 2, 4, 8], n).astype(float)
    N_once = rng.uniform(1e7, 1e8, n)
    N_rec = rng.uniform(1e7, 3e8, n)
    D = rng.uniform(1e9, 1e11, n)
    L = 1.6 + 30 * n_eff(N_once, N_rec, r, 0.5) ** -0.2 + 900 * D**-0.37
    L = L * (1 + 0.01 * rng.standard_normal(n))
    return LawData(N_once, N_rec, r, D, L, rng.integers(0, len(RECIPES), n))


def law_for(name, data):
    """The law as `fit` binds it: a per-recipe law to the recipes, any other to its data (`Law.for_data`)."""
    cls = law_class(name)
    return make_law(name, data.r, RECIPES).with_data(data) if cls.per_recipe else cls.for_data(data)


def test_n_eff_closed_form():
    assert n_eff(220e6, 190e6, 4, 0.46) == pytest.approx(220e6 + 4**0.46 * 190e6, rel=1e-12)
    assert n_eff(1.0, 5.0, 8, 0.0) == 6.0  # phi = 0: the loop is worth one block
    assert n_eff(1.0, 5.0, 8, 1.0) == 41.0  # phi = 1: worth r blocks


def test_predict_loss_matches_the_formula():
    table = {
        "N_once": np.array([1e8, 2e8]),
        "N_rec": np.array([3e8, 1e8]),
        "r": np.array([4.0, 2.0]),
        "D": np.array([1e10, 5e10]),
    }
    expected = (
        PARAMS["E"]
        + PARAMS["A"] * n_eff(table["N_once"], table["N_rec"], table["r"], 0.46) ** -0.2
        + PARAMS["B"] * table["D"] ** -0.37
    )
    np.testing.assert_allclose(predict_loss("looped", PARAMS, table), expected, rtol=1e-12)
    chin = {k: PARAMS[k] for k in ("E", "A", "alpha", "B", "beta")}
    got = predict_loss("chinchilla", chin, {"N": np.array([1e9]), "C": np.array([6e19])})
    assert got[0] == pytest.approx(1.57 + 28 * 1e9**-0.2 + 916 * 1e10**-0.37, rel=1e-12)


def test_user_internal_round_trip_and_missing_key():
    law = make_law("looped-free", [1, 2, 4])
    user = {"E": 1.5, "A": 30.0, "alpha": 0.3, "B": 500.0, "beta": 0.3, "k_2": 1.4, "k_4": 1.9}
    assert law.user_names == ("E", "A", "alpha", "B", "beta", "k_2", "k_4")
    back = law.to_user(law.from_user(user))
    assert back == pytest.approx(user, rel=1e-12)
    with pytest.raises(ValueError, match="k_4"):
        law.from_user({k: v for k, v in user.items() if k != "k_4"})


EXTRAS = {"looped": [0.45], "looped-free": [0.3, 0.6, 0.9], "looped-joint": [0.45, -0.08, 0.2]}


def theta_for(law: Law):
    """A point near the published fit; a law without values here gets its extras 30% into their box."""
    if law.table != "runs":  # a law of another table (testtime): 30% into its box
        return np.array([lo + 0.3 * (hi - lo) for lo, hi in law.bounds()])
    base = [np.log(1.6), np.log(30.0), 0.21, np.log(900.0), 0.36]
    n_extra = law.n_params - 5
    extras = EXTRAS.get(law.name) or [lo + 0.3 * (hi - lo) for lo, hi in law.extra_bounds()]
    return np.array(base + list(extras)[:n_extra])


LAWS = law_names()  # every registered law: a new law's gradient is checked without editing this file


@pytest.mark.parametrize("law_name", LAWS)
@pytest.mark.parametrize("loss", [Loss("huber", 1e-3), Loss("huber", 0.05), Loss("l2")])
def test_gradient_matches_finite_differences(law_name, loss):
    data = small_data()
    law = law_for(law_name, data)
    theta = theta_for(law)
    weights = np.random.default_rng(1).integers(0, 3, len(data)).astype(float)
    f, g = objective_and_grad(theta, law, data, loss, weights)
    assert f == pytest.approx(objective(theta, law, data, loss, weights), rel=1e-14)
    h = 1e-6
    fd = np.array(
        [
            (objective(theta + h * e, law, data, loss, weights) - objective(theta - h * e, law, data, loss, weights))
            / (2 * h)
            for e in np.eye(len(theta))
        ]
    )
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-9 * max(1.0, np.abs(fd).max()))


@pytest.mark.parametrize("law_name", LAWS)
def test_batched_prediction_and_jacobian_match_single(law_name):
    data = small_data(2)
    law = law_for(law_name, data)
    rng = np.random.default_rng(3)
    thetas = theta_for(law) + 0.05 * rng.standard_normal((4, law.n_params))
    lp_b, J_b = law.log_predict_and_jac_batch(thetas, data)
    np.testing.assert_allclose(law.log_predict_batch(thetas, data), lp_b, rtol=1e-12)
    for m, theta in enumerate(thetas):
        lp, J = law.log_predict_and_jac(theta, data)
        np.testing.assert_allclose(lp_b[m], lp, rtol=1e-12)
        np.testing.assert_allclose(J_b[m], J, rtol=1e-10, atol=1e-14)


def test_tokens_from_compute_use_the_training_cost():
    table = {"N_once": [1e8], "N_rec": [2e8], "r": [4.0], "C": [6e19], "L": [3.0]}
    data = law_data_from_table(table, "looped")
    assert data.D[0] == pytest.approx(6e19 / (6 * (1e8 + 4 * 2e8)))
    with pytest.raises(ValueError, match="'D'"):
        law_data_from_table({"N": [1.0], "L": [2.0]}, "chinchilla")


def test_unknown_law_is_rejected():
    with pytest.raises(ValueError, match="law='kaplan' is not a registered law; choose one of"):
        make_law("kaplan")


def test_joint_law_gives_each_recipe_its_phi_and_r1_rows_to_all():
    data = small_data(4)
    law = make_law("looped-joint", recipes=RECIPES)
    user = {
        "E": 1.6,
        "A": 30.0,
        "alpha": 0.2,
        "B": 900.0,
        "beta": 0.37,
        "phi[baseline]": 0.46,
        "phi[tbptt]": 0.38,
        "phi[hyper]": 0.65,
    }
    assert law.user_names == tuple(user)
    assert law.internal_names[5:] == ("phi", "dphi[tbptt]", "dphi[hyper]")
    theta = law.from_user(user)
    np.testing.assert_allclose(theta[5:], [0.46, 0.38 - 0.46, 0.65 - 0.46], rtol=1e-12)
    assert law.to_user(theta) == pytest.approx(user, rel=1e-12)
    phi = np.array([0.46, 0.38, 0.65])[data.recipe]
    expected = 1.6 + 30 * n_eff(data.N_once, data.N_rec, data.r, phi) ** -0.2 + 900 * data.D**-0.37
    np.testing.assert_allclose(np.exp(law.log_predict(theta, data)), expected, rtol=1e-12)
    # an r = 1 row predicts the same whichever recipe it is labelled with
    ones = np.flatnonzero(data.r == 1)
    relabelled = LawData(data.N_once, data.N_rec, data.r, data.D, data.L, np.where(data.r == 1, 2, data.recipe))
    np.testing.assert_array_equal(law.log_predict(theta, relabelled)[ones], law.log_predict(theta, data)[ones])
    with pytest.raises(ValueError, match="two or more recipes"):
        make_law("looped-joint", recipes=["baseline"])
    with pytest.raises(ValueError, match="recipe code"):
        law.log_predict(theta, LawData(data.N_once, data.N_rec, data.r, data.D, data.L))
