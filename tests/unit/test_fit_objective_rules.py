"""The fitter's objective, its starts and its optimum's bookkeeping written out (issue 58: pin the formula, not an
outcome with slack): the Huber loss at and around its threshold, the sigma-standardised residuals with bootstrap
weights, the IRLS curvature, the chunking, the classic grid, the projected starts' weighted NNLS (against
scipy.optimize.nnls), the screen's split between families, the best-basin rule and the bound warnings.
Milliseconds each (no fit of a sweep)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import nnls

from loopscale.errors import InputError
from loopscale.fit import objective as O
from loopscale.fit import optimize as OPT
from loopscale.fit import starts as ST
from loopscale.fit.laws.form import LawData
from loopscale.fit.laws.registry import make_law
from loopscale.fit.task_pool import one_blas_thread

THETA = np.array([np.log(1.7), np.log(41.0), 0.27, np.log(620.0), 0.31, 0.43])


def data(sigma=None, n=9, seed=5) -> LawData:
    rng = np.random.default_rng(seed)
    r = np.resize([1.0, 2.0, 4.0], n)
    N_once, N_rec, D = rng.uniform(2e7, 9e7, n), rng.uniform(3e7, 2e8, n), rng.uniform(2e9, 8e10, n)
    n_eff = N_once + r**0.43 * N_rec
    L = (1.7 + 41.0 * n_eff**-0.27 + 620.0 * D**-0.31) * np.exp(0.004 * rng.standard_normal(n))
    return LawData(N_once, N_rec, r, D, L, sigma=sigma)


# ----------------------------------------------------------------------------------------------
# objective.py
# ----------------------------------------------------------------------------------------------
def test_huber_rho_psi_and_psi_prime_at_and_around_the_threshold():
    loss = O.Loss("huber", 0.5)
    x = np.array([-2.0, -0.5, -0.3, 0.0, 0.4, 0.5, 0.7])
    np.testing.assert_allclose(loss.rho(x), [0.875, 0.125, 0.045, 0.0, 0.08, 0.125, 0.225], rtol=1e-15)
    np.testing.assert_allclose(loss.psi(x), [-0.5, -0.5, -0.3, 0.0, 0.4, 0.5, 0.5], rtol=1e-15)
    np.testing.assert_array_equal(loss.psi_prime(x), [0, 1, 1, 1, 1, 1, 0])  # |x| = delta is inside
    l2 = O.Loss("l2")
    np.testing.assert_allclose(l2.rho(x), 0.5 * x**2, rtol=1e-15)
    np.testing.assert_array_equal(l2.psi(x), x)
    np.testing.assert_array_equal(l2.psi_prime(x), np.ones(7))
    assert O.Loss().kind == "huber" and O.Loss().delta == 1e-3 == O.DEFAULT_DELTA
    O.Loss("l2", 0.0)  # l2 has no threshold to check
    for bad in (0.0, -1e-3, np.inf, np.nan):
        with pytest.raises(InputError, match="Huber delta must be a finite number > 0"):
            O.Loss("huber", bad)
    with pytest.raises(InputError, match="loss must be 'huber' or 'l2'; got 'L1'"):
        O.Loss("L1")


def test_objective_and_gradient_use_sigma_standardised_residuals_and_weights():
    sigma = np.linspace(0.002, 0.006, 9)
    d, law, loss = data(sigma), make_law("looped"), O.Loss("huber", 1.0)
    w = np.array([0, 1, 2, 1, 3, 1, 0, 2, 1], dtype=float)
    log_pred, J = law.log_predict_and_jac(THETA, d)
    z = (log_pred - np.log(d.L)) / sigma
    rho = np.where(np.abs(z) <= 1.0, 0.5 * z**2, np.abs(z) - 0.5)
    assert (np.abs(z) > 1).any() and (np.abs(z) <= 1).any()  # both branches of the Huber loss are used
    np.testing.assert_allclose(O.residuals(log_pred, d), z, rtol=1e-13)
    assert O.objective(THETA, law, d, loss, w) == pytest.approx(float(w @ rho), rel=1e-13)
    assert O.objective(THETA, law, d, loss) == pytest.approx(float(rho.sum()), rel=1e-13)
    f, g = O.objective_and_grad(THETA, law, d, loss, w)
    assert f == pytest.approx(float(w @ rho), rel=1e-13)
    np.testing.assert_allclose(g, (w * np.clip(z, -1, 1) / sigma) @ J, rtol=1e-11)
    np.testing.assert_allclose(O.scaled_jacobian(J, d), J / sigma[:, None], rtol=1e-15)
    np.testing.assert_allclose(O.residuals(log_pred, data()), log_pred - np.log(d.L), rtol=1e-15)


def test_the_hessian_and_irls_curvature_with_sigma_and_weights():
    sigma = np.linspace(0.002, 0.006, 9)
    d, law, loss = data(sigma), make_law("looped"), O.Loss("huber", 1.0)
    w = np.array([1, 1, 2, 1, 3, 1, 0, 2, 1], dtype=float)
    f, g, H, H_irls = O.objective_grad_hess(THETA, law, d, loss, w)
    log_pred, J = law.log_predict_and_jac(THETA, d)
    z = (log_pred - np.log(d.L)) / sigma
    Js = J / sigma[:, None]
    np.testing.assert_allclose(H_irls, (Js.T * (w * np.minimum(1.0, 1.0 / np.abs(z)))) @ Js, rtol=1e-11)
    np.testing.assert_allclose(g, (w * np.clip(z, -1, 1)) @ Js, rtol=1e-11)
    h = 1e-6
    fd = np.array(
        [
            (
                O.objective_and_grad(THETA + h * e, law, d, loss, w)[1]
                - O.objective_and_grad(THETA - h * e, law, d, loss, w)[1]
            )
            / (2 * h)
            for e in np.eye(6)
        ]
    )
    np.testing.assert_allclose(H, fd, rtol=2e-5, atol=1e-6 * np.abs(H).max())
    _, _, _, irls_l2 = O.objective_grad_hess(THETA, law, d, O.Loss("l2"), w)
    np.testing.assert_allclose(irls_l2, (Js.T * w) @ Js, rtol=1e-11)  # l2: plain Gauss-Newton


def test_chunk_size_and_the_batched_objective():
    assert O.CHUNK_ELEMENTS == 4194304
    assert O.chunk_size(1000, 4) == 1048  # 2^22 // 4000
    assert O.chunk_size(10, 1) == 2048 and O.chunk_size(10, 1, cap=7) == 7
    assert O.chunk_size(10**7, 3) == 1 and O.chunk_size(0) == 2048
    d, law, loss = data(), make_law("looped"), O.Loss("huber", 2e-3)
    thetas = THETA + 0.01 * np.random.default_rng(0).standard_normal((7, 6))
    thetas[4, 2] = np.nan  # a non-finite objective screens as +inf
    got = O.batch_objective(thetas, law, d, loss, chunk=3)
    for m in (0, 1, 2, 3, 5, 6):
        assert got[m] == pytest.approx(O.objective(thetas[m], law, d, loss), rel=1e-13)
    assert got[4] == np.inf


# ----------------------------------------------------------------------------------------------
# starts.py
# ----------------------------------------------------------------------------------------------
def test_the_classic_grid_and_the_screen_subsample():
    grid = ST.classic_grid(make_law("looped"))
    assert grid.shape == (5 * 6 * 5 * 6 * 5 * 3, 6)
    for col, axis in enumerate(
        (
            [-1, -0.5, 0, 0.5, 1],
            [0, 5, 10, 15, 20, 25],
            [0, 0.5, 1, 1.5, 2],
            [0, 5, 10, 15, 20, 25],
            [0, 0.5, 1, 1.5, 2],
            [0, 0.5, 1],
        )
    ):
        np.testing.assert_allclose(np.unique(grid[:, col]), axis)
    np.testing.assert_array_equal(grid[1], [-1, 0, 0, 0, 0, 0.5])  # the law's axis varies fastest
    assert ST.classic_grid(make_law("chinchilla")).shape == (4500, 5)
    assert ST.SCREEN_ROWS == 1024
    small = data(n=1024)
    assert ST.screen_subsample(small) is small  # at the limit: all rows
    big = data(n=1500)
    sub = ST.screen_subsample(big)
    assert len(sub) == 1024 and len(np.unique(sub.D)) == 1024
    assert np.isin(sub.D, big.D).all() and ST.screen_subsample(big).D.tolist() == sub.D.tolist()  # seed 0: fixed
    rows = np.flatnonzero(np.isin(big.D, sub.D))
    np.testing.assert_array_equal(sub.D, big.D[rows])  # kept in table order


def test_projected_starts_are_the_weighted_nnls_of_e_a_b_at_each_exponent_row():
    sigma = np.linspace(0.002, 0.006, 9)
    d, law = data(sigma), make_law("looped")
    starts = ST.projected_starts(law, d)
    alphas = np.linspace(0.05, 1.2, 16)
    assert starts.shape == (16 * 16 * 7, 6)
    # the row of (alpha, beta, phi) = (alphas[3], alphas[4], 0.4), found by its exponents
    want = (alphas[3], alphas[4], 0.4)
    k = int(np.flatnonzero(np.all(np.isclose(starts[:, [2, 4, 5]], want), axis=1))[0])
    X = (d.N_once + d.r**0.4 * d.N_rec) ** -alphas[3]
    Y = d.D ** -alphas[4]
    sw = 1.0 / (d.L * sigma)  # sqrt of the weights 1 / (L sigma)^2: relative error, standardised
    coef, _ = nnls(np.column_stack([np.ones(9), X, Y]) * sw[:, None], d.L * sw)
    assert (coef > 0).all()
    np.testing.assert_allclose(np.exp(starts[k, [0, 1, 3]]), coef, rtol=1e-6)


def test_projected_starts_floor_a_vanished_term():
    """L = A X + B Y exactly (no E): the NNLS puts E at 0 and the start gets E's floor, 1e-3 min L."""
    d0 = data()
    X = (d0.N_once + d0.r**0.4 * d0.N_rec) ** -np.linspace(0.05, 1.2, 16)[3]
    L = 30.0 * X + 500.0 * d0.D ** -np.linspace(0.05, 1.2, 16)[4]
    d = LawData(d0.N_once, d0.N_rec, d0.r, d0.D, L)
    starts = ST.projected_starts(make_law("looped"), d)
    k = int(
        np.flatnonzero(
            np.all(
                np.isclose(starts[:, [2, 4, 5]], (np.linspace(0.05, 1.2, 16)[3], np.linspace(0.05, 1.2, 16)[4], 0.4)),
                axis=1,
            )
        )[0]
    )
    assert np.exp(starts[k, 0]) == pytest.approx(1e-3 * L.min(), rel=1e-12)
    np.testing.assert_allclose(np.exp(starts[k, [1, 3]]), [30.0, 500.0], rtol=1e-6)


def test_screen_starts_take_half_from_each_family_projected_first():
    d, law, loss = data(), make_law("looped"), O.Loss()
    picked, n = ST.screen_starts(law, d, loss, 5, np.random.default_rng(0), n_random=10)
    proj = ST.projected_starts(law, d)
    assert n == 4500 * 3 + 10 + len(proj)
    assert picked.shape == (5, 6)
    f_proj = O.batch_objective(proj, law, d, loss)
    np.testing.assert_allclose(picked[:3], proj[np.argsort(f_proj, kind="stable")[:3]])  # 5 - 5 // 2 projected
    classic = ST.classic_grid(law)
    f_classic = O.batch_objective(classic, law, d, loss)
    best_classic = O.batch_objective(picked[3:], law, d, loss)
    assert best_classic[0] <= f_classic.min() and best_classic[0] <= best_classic[1]


# ----------------------------------------------------------------------------------------------
# optimize.py: the bookkeeping around the optimum
# ----------------------------------------------------------------------------------------------
def refined(theta, f):
    return OPT.Refined(np.asarray(theta, dtype=float), f, 0.0, 1, "")


def test_same_basin_compares_exponents_only_and_objectives_relatively_or_per_row():
    law = make_law("looped")
    best = refined(THETA, 2.0)
    # the amplitudes (e, a, b) may differ; an exponent by 1e-3 at most (inclusive)
    assert OPT.same_basin(refined(THETA + [0.3, 0.5, 0, -0.2, 0, 0], 2.0), best, law)
    assert OPT.same_basin(refined(THETA + [0, 0, 0, 0, 0, 0.00099], 2.0), best, law)
    assert not OPT.same_basin(refined(THETA + [0, 0, 0, 0, 0.0011, 0], 2.0), best, law)
    assert OPT.same_basin(refined(THETA, 2.0 + 1.9e-6), best, law)  # 1e-6 relative
    assert not OPT.same_basin(refined(THETA, 2.0 + 2.1e-6), best, law)
    exact = refined(THETA, 1e-30)  # an exact fit: 1e-12 per row absolute
    assert OPT.same_basin(refined(THETA, 9e-12), exact, law, n_rows=10)
    assert not OPT.same_basin(refined(THETA, 1.1e-11), exact, law, n_rows=10)


def test_optimum_notes_warn_below_a_fifth_in_the_basin_and_for_exponents_on_their_bounds():
    law = make_law("looped")
    best = refined(THETA, 1.0)
    others = [refined(THETA + [0, 0, 0.1, 0, 0, 0], 1.5)] * 4
    n, notes = OPT._optimum_notes(best, [best, *others], law, 9)  # 1 of 5 = 0.2: no warning
    assert n == 1 and notes == []
    n, notes = OPT._optimum_notes(best, [best, *others, others[0]], law, 9)  # 1 of 6
    assert notes == [
        "only 1 of 6 refined starts reached the best optimum: the objective has competing minima; "
        "treat the estimate with care"
    ]
    on = THETA.copy()
    on[0], on[2], on[5] = -10.0, 5.0, -1.0 + 5e-10  # e on its bound is not an exponent: no note
    assert OPT._boundary_notes(on, law) == [
        "alpha = 5 sits on its bound [0.0, 5.0]",
        "phi = -1 sits on its bound [-1.0, 3.0]",
    ]
    on[5] = -1.0 + 2e-9
    assert OPT._boundary_notes(on, law) == ["alpha = 5 sits on its bound [0.0, 5.0]"]


def test_lm_batch_holds_fixed_coordinates_and_lowers_each_problem_alone():
    d, law, loss = data(), make_law("looped"), O.Loss("huber", 2e-3)
    starts = np.vstack([THETA + [0.05, 0.1, 0.02, -0.1, 0.01, 0.1], THETA + [-0.05, 0.0, -0.02, 0.1, 0.0, -0.1]])
    fixed = np.array([False, False, False, False, False, True])
    out, f = OPT.lm_batch(law, d, loss, starts, fixed=fixed)
    np.testing.assert_array_equal(out[:, 5], starts[:, 5])
    for m in range(2):
        assert f[m] == pytest.approx(O.objective(out[m], law, d, loss), rel=1e-12)
        assert f[m] < O.objective(starts[m], law, d, loss)
    # weights per problem: zero weight on a row is that row left out
    W = np.ones((1, 9))
    W[0, [2, 5]] = 0.0
    out_w, f_w = OPT.lm_batch(law, d, loss, starts[:1], W)
    keep = np.setdiff1d(np.arange(9), [2, 5])
    assert f_w[0] == pytest.approx(O.objective(out_w[0], law, d.subset(keep), loss), rel=1e-12)


def test_fit_law_from_given_starts_records_what_it_did():
    d, loss = data(n=14), O.Loss("l2")
    outside = THETA.copy()
    outside[5] = 7.0  # phi beyond its box: clipped to 3 before refining
    with one_blas_thread():
        result, state = OPT.fit_law(d, "looped", loss, seed=9, starts=np.vstack([THETA, outside]))
    assert state.starts[1, 5] == 3.0 and (result.n_starts, result.n_refined) == (2, 2)
    law = make_law("looped")
    res = law.log_predict(state.best.theta, d) - np.log(d.L)
    assert result.residual_rms_log == pytest.approx(float(np.sqrt(np.mean(res**2))), rel=1e-12)
    assert result.objective == pytest.approx(0.5 * float(res @ res), rel=1e-12)  # l2: half the sum of squares
    assert result.params == law.to_user(state.best.theta) and (result.seed, result.n_rows) == (9, 14)
    s = result.settings
    assert (s.loss, s.delta, s.n_refine, s.optimizer, s.lbfgsb_ftol, s.lbfgsb_gtol) == (
        "l2",
        None,
        16,
        "L-BFGS-B",
        1e-15,
        1e-12,
    )
    huber, _ = OPT.fit_law(d, "looped", O.Loss("huber", 0.004), starts=THETA[None, :])
    assert huber.settings.delta == 0.004


def test_adopt_optimum_replaces_the_old_optimums_warnings_and_numbers():
    d, loss = data(n=14), O.Loss("l2")
    with one_blas_thread():
        result, state = OPT.fit_law(d, "looped", loss, starts=THETA[None, :])
    law = state.law
    on_bound = state.best.theta.copy()
    on_bound[2] = 5.0  # alpha on its upper bound: a note of its own
    old = OPT.Refined(on_bound, state.best.objective * 3, 0.0, 1, "")
    result.warnings = ["kept: a table warning", *OPT._boundary_notes(on_bound, law)]
    new_best = OPT.Refined(THETA.copy(), O.objective(THETA, law, d, loss), 1e-9, 3, "")
    state = OPT.FitState(law, d, loss, old, state.starts, [old, new_best])
    moved = OPT.adopt_optimum(result, state, new_best, "moved by the profile")
    assert moved.best is new_best and result.params == law.to_user(THETA) and result.objective == new_best.objective
    assert result.warnings == ["kept: a table warning", "moved by the profile"]  # alpha's bound note is gone
    assert result.n_best_basin == 1 and result.grad_norm == 1e-9  # of the refined starts, new_best's basin
    res = law.log_predict(THETA, d) - np.log(d.L)
    assert result.residual_rms_log == pytest.approx(float(np.sqrt(np.mean(res**2))), rel=1e-12)


def test_newton_holds_fixed_coordinates_and_stops_at_the_restricted_optimum():
    d, law, loss = data(n=14), make_law("looped"), O.Loss("huber", 0.003)
    fixed = np.array([False, False, False, False, False, True])
    start = THETA + [0.02, 0.05, 0.01, -0.05, 0.01, 0.1]
    theta, f = OPT.newton(law, d, loss, start, fixed=fixed)
    assert theta[5] == start[5] and f == pytest.approx(O.objective(theta, law, d, loss), rel=1e-12)
    _, g = O.objective_and_grad(theta, law, d, loss)
    assert np.abs(g[:5]).max() < 1e-7 * max(1.0, np.abs(g).max()) or np.abs(g[:5]).max() < 1e-9
    assert f < O.objective(start, law, d, loss)


def test_lm_keeps_a_step_only_where_it_lowers_that_problems_objective():
    """From 40 scattered starts, one and two LM iterations: no problem's objective goes up (a rejected step
    raises its damping instead), and each returned f is the objective at the returned theta."""
    d, law, loss = data(), make_law("looped"), O.Loss("huber", 2e-3)
    starts = THETA + np.random.default_rng(0).normal(0, 1, (40, 6)) * [1, 2, 0.3, 2, 0.3, 0.8]
    f0 = O.batch_objective(starts, law, d, loss)
    for it in (1, 2):
        out, f = OPT.lm_batch(law, d, loss, starts.copy(), max_iter=it)
        assert np.all(f <= f0)
        np.testing.assert_allclose(f, O.batch_objective(out, law, d, loss), rtol=1e-12)


def test_a_big_table_finishes_each_distinct_subsample_optimum_once():
    """Over SCREEN_ROWS rows: the starts are solved on the fixed subsample first; starts that land on one point there
    are one start from then on (the same refined optimum, counted once per start), finished on all rows."""
    d, law, loss = data(n=1100, seed=8), make_law("looped"), O.Loss("huber", 2e-3)
    starts = np.vstack([THETA, THETA + 1e-7, THETA])
    with one_blas_thread():
        best, refined = OPT.multistart(law, d, loss, starts)
    assert len(refined) == 3 and refined[0] is refined[1] is refined[2] is best
    assert best.objective == pytest.approx(O.objective(best.theta, law, d, loss), rel=1e-12)  # on all 1,100 rows
    _, g = O.objective_and_grad(best.theta, law, d, loss)
    assert best.grad_norm == pytest.approx(float(np.linalg.norm(g)), rel=1e-9)
