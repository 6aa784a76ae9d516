"""The fast paths of `fit_table` on big tables (exact Newton, the subsample triage of starts, the
walked phi profile with Hermite root-finding) against slow references on the same table."""

import numpy as np
import pytest
from scipy.optimize import brentq

from loopscale.fit import synthetic as S
from loopscale.fit.fit_table import fit_table
from loopscale.fit.laws.registry import law_data_from_table, make_law
from loopscale.fit.objective import Loss
from loopscale.fit.optimize import fit_law, lm_batch, multistart, newton, same_basin
from loopscale.fit.runs_table import canonical_table
from loopscale.fit.starts import SCREEN_ROWS, screen_starts, screen_subsample
from loopscale.fit.uncertainty import profile_value


@pytest.fixture(scope="module")
def big():
    """A 3000-row evaluation-log table: over SCREEN_ROWS, so the big-table paths run."""
    table = canonical_table(S.evaluation_log_table(3000, seed=4), "looped")
    assert len(table) > SCREEN_ROWS
    with np.errstate(all="ignore"):
        result = fit_table(table, "looped")
    return table, law_data_from_table(table, "looped"), result


@pytest.mark.parametrize("law_name", ["looped", "chinchilla"])
def test_analytic_hessian_matches_finite_differences(big, law_name):
    _, data, result = big
    law = make_law(law_name)
    theta = law.from_user(result.params)[: law.n_params] + 0.01 * np.arange(law.n_params) / law.n_params
    c = np.random.default_rng(0).standard_normal(len(data))
    _, J, hess = law.log_predict_jac_hess(theta, data)
    _, J_ref = law.log_predict_and_jac_batch(theta[None, :], data)
    np.testing.assert_allclose(J, J_ref[0], rtol=1e-12, atol=1e-15)
    eps = 1e-6
    fd = np.empty((law.n_params, law.n_params))
    for k in range(law.n_params):
        d = np.zeros(law.n_params)
        d[k] = eps
        fd[k] = (
            c @ law.log_predict_jac_hess(theta + d, data)[1] - c @ law.log_predict_jac_hess(theta - d, data)[1]
        ) / (2 * eps)
    H = hess(c)
    np.testing.assert_allclose(H, H.T, rtol=0, atol=1e-9 * np.abs(H).max())
    np.testing.assert_allclose(H, fd, rtol=0, atol=1e-6 * np.abs(H).max())


def test_newton_reaches_the_lbfgsb_optimum_in_few_steps(big):
    _, data, result = big
    law, loss = make_law("looped"), Loss()
    best = law.from_user(result.params)
    start = best + np.array([0.02, -0.05, 0.01, 0.05, -0.005, 0.03])
    with np.errstate(all="ignore"):
        theta, f = newton(law, data, loss, start, max_iter=15)
    assert f == pytest.approx(result.objective, rel=1e-12)
    np.testing.assert_allclose(theta, best, atol=1e-6)


def test_fast_fit_matches_refining_every_start_on_all_rows(big):
    """References: (1) every start pre-solved on the subsample, then every one of them refined on
    all rows by batched LM and L-BFGS-B (the big-table path before Newton and the triage); (2) every
    raw start refined on all rows, no subsample at all. Unit weights select the plain path."""
    _, data, result = big
    law, loss = make_law("looped"), Loss()
    ones = np.ones(len(data))
    with np.errstate(all="ignore"):
        starts, _ = screen_starts(law, data, loss, 16, np.random.default_rng(0))
        presolved, _ = lm_batch(law, screen_subsample(data), loss, starts)
        ref_best, ref_all = multistart(law, data, loss, presolved, weights=ones)
        raw_best, _ = multistart(law, data, loss, starts, weights=ones)
        _, fast_all = multistart(law, data, loss, starts)
    for ref in (ref_best, raw_best):
        assert result.objective == pytest.approx(ref.objective, rel=1e-12)
        for name, value in law.to_user(ref.theta).items():
            assert result.params[name] == pytest.approx(value, rel=1e-6, abs=1e-9), name
    # the unfinished starts are the ones that end outside the best basin when finished
    assert result.n_best_basin == sum(same_basin(r, ref_best, law, len(data)) for r in ref_all)
    unfinished = [r for r in fast_all if r.n_iter == 0 and r.message.startswith("not finished")]
    assert 0 < len(unfinished) == result.n_refined - result.n_best_basin  # the triage ran here
    assert result.grad_norm < 1e-6


def test_walked_profile_matches_the_slow_profile(big):
    """Reference: every profile point solved from the global optimum (batched LM with phi held,
    then L-BFGS-B, as `profile_values` did), the ends by Brent's method to 1e-10."""
    table, data, result = big
    prof = result.profile_phi
    with np.errstate(all="ignore"):
        _, state = fit_law(data, "looped")
        fixed = np.array([n == "phi" for n in state.law.internal_names])

        def slow_point(x):
            theta = state.best.theta.copy()
            theta[fixed] = x
            moved, _ = lm_batch(state.law, data, state.loss, theta[None, :], fixed=fixed)
            return profile_value(state, "phi", x, moved[0]).objective

        values = np.array([slow_point(x) for x in prof["phi"]])
        np.testing.assert_allclose(prof["objective"], values, rtol=1e-10)
        level = min(state.best.objective, values.min()) + prof["threshold"]
        grid = np.array(prof["phi"])
        lo, hi = prof["interval"]
        for end in (lo, hi):
            k = np.searchsorted(grid, end)  # grid[k - 1] < end < grid[k]
            ref = brentq(lambda x: slow_point(x) - level, grid[k - 1], grid[k], xtol=1e-10)
            assert end == pytest.approx(ref, abs=1e-6)
    assert lo < result.params["phi"] < hi
