"""The uncertainty steps' own rules written out (issue 58), on one small l2 fit started at its truth (no screen:
milliseconds): the profile's grid and values, its interval ends where the profile crosses f_min + threshold (the
threshold taken as `profile_threshold` gives it: its scaling is pinned elsewhere), the LR test's statistic and
p-value from the same moments, the Hermite root-finder, the percentile interval at a level off 95%, which rows
the held-out budget leaves, and the bootstrap's replicates (resample.py): each the optimum of its own draw."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy.stats import f as f_dist

from loopscale.errors import InputError
from loopscale.fit import resample
from loopscale.fit import uncertainty as U
from loopscale.fit.fit_table import _attach_profile
from loopscale.fit.laws.form import LawData
from loopscale.fit.objective import Loss, objective, objective_and_grad
from loopscale.fit.optimize import fit_law
from loopscale.fit.record_blocks import Settings
from loopscale.fit.result import FitResult
from loopscale.fit.runs_table import budget_clusters
from loopscale.fit.task_pool import one_blas_thread

TRUTH = np.array([np.log(1.7), np.log(41.0), 0.27, np.log(620.0), 0.31, 0.43])


@pytest.fixture(scope="module")
def state():
    rng = np.random.default_rng(3)
    n = 24
    r = np.resize([1.0, 2.0, 4.0], n)
    N_once, N_rec, D = rng.uniform(2e7, 9e7, n), rng.uniform(3e7, 2e8, n), rng.uniform(2e9, 8e10, n)
    L = (1.7 + 41.0 * (N_once + r**0.43 * N_rec) ** -0.27 + 620.0 * D**-0.31) * np.exp(0.01 * rng.standard_normal(n))
    with one_blas_thread():  # as fit_table runs it
        _, st = fit_law(LawData(N_once, N_rec, r, D, L), "looped", Loss("l2"), starts=TRUTH[None, :])
    return st


def test_the_profile_grid_its_values_and_its_ends_where_it_crosses_the_threshold(state):
    phi_hat, f_min = state.best.theta[5], state.best.objective
    prof = U.profile_param(state, "phi", half_width=0.6, n_points=13)
    np.testing.assert_allclose(prof.x, np.linspace(phi_hat - 0.6, phi_hat + 0.6, 13), rtol=1e-12)
    for x, f in zip(prof.x[::4], prof.objective[::4]):  # each grid value: the objective minimised with phi held
        assert f == pytest.approx(U.profile_solve(state, "phi", x, TRUTH).objective, rel=1e-7)
    thr, _ = U.profile_threshold(state)
    assert prof.threshold == thr and prof.param == "phi"
    lo, hi = prof.interval
    for end in (lo, hi):  # the profile is f_min + threshold at each end
        assert U.profile_solve(state, "phi", end, TRUTH).objective - f_min == pytest.approx(thr, rel=1e-4)
    x, f = np.array(prof.x), np.array(prof.objective) - f_min
    inside = x[f <= thr]
    assert x[x < inside.min()].max() < lo < inside.min() and inside.max() < hi < x[x > inside.max()].min()
    # the interval from two ends alone (power's path) is the same interval
    np.testing.assert_allclose(U.profile_interval(state, "phi"), [lo, hi], atol=2e-4)
    # a grid that reaches past the box is clipped to it, and a side still inside at the grid's end is open
    wide = U.profile_param(state, "phi", half_width=1.6, n_points=5)
    np.testing.assert_allclose(wide.x, [-1.0, phi_hat - 0.8, phi_hat, phi_hat + 0.8, phi_hat + 1.6], rtol=1e-12)
    narrow = U.profile_param(state, "phi", half_width=0.05, n_points=3)
    assert narrow.interval == [None, None]


def test_the_lr_test_is_the_profiles_statistic_at_one_value(state):
    out = U.lr_test(state, "phi", 0.2)
    restricted = U.profile_solve(state, "phi", 0.2, TRUTH).objective
    _, stats = U.profile_threshold(state)
    T = 2 * (restricted - state.best.objective) * stats["mean_psi_prime"] / stats["mean_psi_sq"]
    assert out["objective_restricted"] == pytest.approx(restricted, rel=1e-9)
    assert out["statistic"] == pytest.approx(T, rel=1e-7) and out["df"] == 1 and out["value"] == 0.2
    assert out["p_value"] == pytest.approx(f_dist.sf(T, 1, stats["reference_dof"]), rel=1e-6)
    assert stats["reference_dof"] == 24 - 6  # G - p of this fit: one group per row
    # a restricted objective below the fit's (a fit that missed its optimum) is no evidence: T = 0, not |gap|
    worse = dataclasses.replace(state, best=dataclasses.replace(state.best, objective=state.best.objective * 1.5))
    assert U.lr_test(worse, "phi", float(state.best.theta[5]))["statistic"] == 0.0
    at_hat = U.lr_test(state, "phi", float(state.best.theta[5]))
    assert at_hat["statistic"] == pytest.approx(0.0, abs=1e-8) and at_hat["p_value"] == pytest.approx(1.0, abs=1e-6)


def test_hermite_crossing_is_exact_for_quadratics_and_cubics_and_bisects_without_a_root():
    # g = (x - 1)^2 - 4 on [1, 4]: g(1) = -4, g'(1) = 0, g(4) = 5, g'(4) = 6; root 3
    assert U._hermite_crossing(1.0, -4.0, 0.0, 4.0, 5.0, 6.0) == pytest.approx(3.0, rel=1e-12)
    # g = x^3 - 2 on [0, 2]: root 2^(1/3)
    assert U._hermite_crossing(0.0, -2.0, 0.0, 2.0, 6.0, 12.0) == pytest.approx(2 ** (1 / 3), rel=1e-12)
    # decreasing direction: bracket from the inside point at x0 = 5 towards x1 = 2, g = 9 - x^2... root 3
    assert U._hermite_crossing(5.0, -16.0, -10.0, 2.0, 5.0, -4.0) == pytest.approx(3.0, rel=1e-12)
    assert U._hermite_crossing(0.0, -1.0, np.nan, 2.0, 1.0, 1.0) == 1.0  # no usable cubic: the midpoint


def test_percentile_interval_at_a_level_off_95():
    v = list(np.arange(101.0)[::-1])
    assert U.percentile_ci({"phi": v}, level=0.8)["phi"] == pytest.approx([10.0, 90.0], rel=1e-12)
    ci = U.percentile_ci({"a": v, "b": list(2 * np.arange(101.0))})
    assert ci["a"] == pytest.approx([2.5, 97.5], rel=1e-12) and ci["b"] == pytest.approx([5.0, 195.0], rel=1e-12)


def test_the_held_out_budget_is_the_largest_after_rounding_and_needs_twice_the_parameters():
    C = np.array([1e18, 1.0046e19, 1e19, 3e18, 1e18, 3e18, 1e18, 3e18, 2e18, 2e18, 2e18, 2e18, 2e18, 1e18, 1e18])
    np.testing.assert_array_equal(budget_clusters(C)[:3], [1e18, 1e19, 1e19])  # 3 significant digits
    train = U.holdout_train_rows(C, "looped")  # 13 rows below 1e19 >= 2 x 6
    np.testing.assert_array_equal(train, C < 9e18)
    with pytest.raises(InputError, match=r"leaves 11 rows, fewer than 12 \(twice the law's 6 parameters\)"):
        U.holdout_train_rows(np.r_[np.full(11, 1e18), 5e18], "looped")
    assert U.holdout_train_rows(np.r_[np.full(12, 1e18), 5e18], "looped").sum() == 12  # 12 rows: enough
    with pytest.raises(InputError, match="the phi profile needs a law with one phi"):
        U.profile_phi(type("S", (), {"law": type("L", (), {"profile_param": None, "name": "chinchilla"})()})())


# ----------------------------------------------------------------------------------------------
# resample.py
# ----------------------------------------------------------------------------------------------
def test_each_bootstrap_replicate_is_the_weighted_optimum_of_its_own_chunk_draw(state):
    """20 replicates in chunks of 16 and 4: replicate j of chunk k minimises the objective weighted by row j of
    chunk_weights(seed, k): its objective is that weighted objective at its theta, no higher than the full-data
    optimum's under the same weights, and its gradient there is ~0."""
    boot = resample.bootstrap(state, 20, seed=7)
    assert boot["replicates_per_task"] == 16 and boot["n_starts_per_replicate"] == 2  # the optimum + 1 screened
    assert boot["cluster"] is None and "two_stage" not in boot and boot["seed"] == 7
    law, data, loss = state.law, state.data, state.loss
    W = np.vstack([resample.chunk_weights(7, 0, 16, 24, None, 0), resample.chunk_weights(7, 1, 4, 24, None, 0)])
    for j in (0, 9, 17, 19):
        theta = law.from_user({k: v[j] for k, v in boot["params"].items()})
        f, g = objective_and_grad(theta, law, data, loss, W[j])
        assert boot["objective"][j] == pytest.approx(f, rel=1e-9)
        assert f <= objective(state.best.theta, law, data, loss, W[j]) * (1 + 1e-12)
        assert np.linalg.norm(g) < 1e-6
    labels = np.tile([3, 0, 5, 1, 4, 2], 4)  # clusters interleaved in the table
    clustered = resample.bootstrap(state, 3, seed=2, clusters=labels, polish=False)
    Wc = resample.chunk_weights(2, 0, 3, 24, labels, 6)
    for j in range(3):
        theta = law.from_user({k: v[j] for k, v in clustered["params"].items()})
        assert clustered["objective"][j] == pytest.approx(objective(theta, law, data, loss, Wc[j]), rel=1e-9)
    assert clustered["cluster"] == "custom"
    assert np.all(Wc[:, :6].sum(axis=1) == 6) and np.all(Wc[:, :6] == Wc[:, 6:12])  # a row: its cluster's count
    # chunk k of seed s draws from its own generator, seeded by the pair: (5, 3) is not (6, 2)
    assert not np.array_equal(
        resample.chunk_weights(5, 3, 4, 24, None, 0), resample.chunk_weights(6, 2, 4, 24, None, 0)
    )


def test_distinct_starts_are_the_best_of_the_projected_family_only():
    starts = np.arange(7.0)[:, None] * np.ones((7, 2))  # 7 screened: 4 projected first, then 3 classic
    assert [s[0] for s in resample._distinct_starts(starts, 2)] == [0.0, 1.0]
    assert [s[0] for s in resample._distinct_starts(starts, 9)] == [0.0, 1.0, 2.0, 3.0]
    assert resample._distinct_starts(starts, 0) == [] and resample._distinct_starts(starts[:0], 3) == []


def test_a_profile_below_the_fit_moves_the_fit_there_and_is_drawn_again_around_it(state):
    """A 'fit' left at phi = phi_hat + 0.33 (the other coordinates optimal there): its profile walks below it, the
    lowest point is refined with every coordinate free, and the profile returned is centred on the new optimum;
    fit_table's _attach_profile then moves the record there and says so."""
    phi_hat = float(state.best.theta[5])
    with one_blas_thread():
        off = U.profile_solve(state, "phi", phi_hat + 0.33, TRUTH)
        stuck = dataclasses.replace(state, best=off)
        prof, better = U.profile_refit(stuck, "phi")
    assert better is not None and better.objective == pytest.approx(state.best.objective, rel=1e-7)
    np.testing.assert_allclose(prof.x, np.linspace(better.theta[5] - 0.5, better.theta[5] + 0.5, 21), rtol=1e-12)
    assert not prof.warning  # drawn around the new optimum: nothing below it
    result = FitResult("looped", state.law.to_user(off.theta), off.objective, 0.0, 1, 1, 1, Settings(loss="l2"))
    with one_blas_thread():
        moved = _attach_profile(result, dataclasses.replace(stuck, refined=[off]), None)
    assert moved.best.objective == pytest.approx(state.best.objective, rel=1e-7)
    assert result.params["phi"] == pytest.approx(float(better.theta[5]), abs=1e-6)
    (note,) = [w for w in result.warnings if w.startswith("the phi profile found a lower objective")]
    assert f"(phi {phi_hat + 0.33:.4g} -> " in note and note.endswith(f"{float(better.theta[5]):.4g})")
