"""The pooled scale of an unweighted curve-law fit (docs/design.md, "The noise model", "The pooled scale over its
expectation"): psi summed within each dependence group (a run's or a forked parent's evaluations), over that sum's
expectation under independent noise with the fit's own leverage, sum_g 1' (I - H)_gg 1, read against F(1, nu) with
Satterthwaite's nu; every other unweighted fit keeps n (G - p) / G on F(1, G - p) (n - p for single rows: exact for
least squares). Designs: looped-entry-curve on the CPU demo's 44 runs, 8 evaluations a run, grouped by model (16
groups of 14-24 fitted evaluations: unequal, each spanning 2-3 runs); the looped law on the demo's 44 final points
grouped by two models (8 groups of 5-6 points), by row or not at all."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from loopscale.data.heldout import curve_steps
from loopscale.fit import synthetic as S
from loopscale.fit.curves.synthetic import looped_curves
from loopscale.fit.laws.registry import law_data_from_table, make_law
from loopscale.fit.noise_scale import pooled_scale_moments, reference_quantile
from loopscale.fit.objective import Loss
from loopscale.fit.optimize import fit_law
from loopscale.fit.runs_table import canonical_table
from loopscale.fit.uncertainty import profile_threshold

SIGMA = 0.005  # a row's noise in log L
CURVE_LAW = "looped-entry-curve"
CURVE_TRUTH = {**S.DEMO_DENSE, "phi": 0.65, "kappa": 0.4, "K": 0.3, "lambda": 0.0}


def model_labels(table) -> np.ndarray:
    return np.unique(table[["r", "N_once", "N_rec"]].astype(str).agg("-".join, axis=1), return_inverse=True)[1]


def curve_fit(draw: int, loss: Loss | None = None, run_sigma: float = 0.002, rho: float = 0.5):
    """looped-entry-curve fitted (from the truth, in log units) to the demo grid's curves drawn from it: a run
    offset (run_sigma) and an AR(1) of sd SIGMA along each curve; rows grouped by model."""
    evaluate = lambda steps, warmup, cooldown: curve_steps(steps, 8, (warmup, cooldown), cooldown)  # noqa: E731
    table = looped_curves(S.demo_grid(), make_law(CURVE_LAW), CURVE_TRUTH, S.DEMO_BATCH_TOKENS, evaluate,
                          seed_sigma=run_sigma, eval_sigma=SIGMA, rho=rho, seed=draw)  # fmt: skip
    canon = canonical_table(table.rename(columns={"val_loss": "L"}), CURVE_LAW)
    law = make_law(CURVE_LAW, canon["r"].to_numpy(float))
    data = replace(law_data_from_table(canon, law), noise_group=model_labels(canon))
    _, state = fit_law(data, law, loss or Loss(), starts=law.from_user(CURVE_TRUTH)[None, :])
    return state


def final_points_fit(grouping: str, draw: int):
    """The looped law fitted to one draw of the demo grid's 44 final points (independent noise, log units), rows
    grouped by two models ("two models": 8 groups of 5-6 points), one group a row ("rows") or none ("none")."""
    grid = S.demo_grid(S.BASELINE_R, "baseline").reset_index(drop=True)
    groups = {"two models": model_labels(grid) // 2, "rows": np.arange(len(grid)), "none": None}[grouping]
    rng = np.random.default_rng(draw)
    table = grid.assign(L=S.law_loss(grid, S.DEMO_DENSE, S.DEMO_PHI) * np.exp(SIGMA * rng.standard_normal(len(grid))))
    law = make_law("looped", table["r"].to_numpy(float))
    data = replace(law_data_from_table(table, law), noise_group=groups)
    truth = law.from_user({**S.DEMO_DENSE, "phi": S.DEMO_PHI})
    _, state = fit_law(data, law, Loss(), starts=truth[None, :])
    return state


def psi_and_projection(state):
    """(psi of the residuals, psi', P = I - J (J^T J)^-1 J^T, the rows of each group)."""
    law, data = state.law, state.data
    log_pred, J = law.log_predict_and_jac(state.best.theta, data)
    res = log_pred - data.log_L
    P = np.eye(len(res)) - J @ np.linalg.inv(J.T @ J) @ J.T
    groups = np.arange(len(res)) if data.noise_group is None else data.noise_group
    rows = [np.flatnonzero(groups == k) for k in range(groups.max() + 1)]
    return state.loss.psi(res), state.loss.psi_prime(res), P, rows


def mains_threshold(state) -> float:
    """n (G - p) / G on F(1, G - p): main's pooled threshold, written out."""
    psi, dpsi, _, rows = psi_and_projection(state)
    n, G, p = len(psi), len(rows), state.law.n_params
    scale = sum(psi[r].sum() ** 2 for r in rows) / (n * (G - p) / G)
    return 0.5 * reference_quantile(G - p) * scale / dpsi.mean()


def test_a_curve_fits_scale_divides_by_the_sums_expectation_with_the_fits_leverage_written_out():
    """16 unequal groups of a model's curves (14-24 evaluations), 8 parameters: E = sum_g 1' P_gg 1 and
    nu = E^2 / sum_gh (1' P_gh 1)^2, group by group (main's n (G - p) / G = 164 on F(1, 8) charged each parameter a
    whole group; E is 232 on nu 10.9: the parameters mostly move rows within a curve)."""
    state = curve_fit(draw=3)
    psi, dpsi, P, rows = psi_and_projection(state)
    expected = sum(P[np.ix_(r, r)].sum() for r in rows)
    nu = expected**2 / sum(P[np.ix_(a, b)].sum() ** 2 for a in rows for b in rows)
    scale = sum(psi[r].sum() ** 2 for r in rows) / expected
    thr, stats = profile_threshold(state)
    assert thr == pytest.approx(0.5 * reference_quantile(nu) * scale / dpsi.mean(), rel=1e-8)
    assert stats["mean_psi_sq"] == pytest.approx(scale, rel=1e-8)
    assert stats["reference_dof"] == pytest.approx(nu, rel=1e-8)
    assert stats["independent_sum"] == pytest.approx(expected, rel=1e-8)
    n, G, p = len(psi), len(rows), state.law.n_params
    assert expected > 1.3 * n * (G - p) / G and nu > G - p + 2  # not main's sum and reference
    assert thr < 0.75 * mains_threshold(state)
    assert profile_threshold(state, "phi") == (thr, stats)  # no seed sigma: phi reads the pooled scale


@pytest.mark.slow
def test_under_independent_noise_a_curve_fits_pooled_scale_is_the_noise_variance_on_average():
    """Least squares on curves with independent evaluations (no run offset, no AR(1)): the pooled scale averages
    sigma^2 over 60 draws (E is the sum's expectation; measured 1.11 +- 0.05 on these, 1.02 +- 0.03 on 200 others),
    where main's n (G - p) / G gave 1.56 +- 0.08. ~30 s at load 10."""
    ratios, mains = [], []
    for k in range(60):
        state = curve_fit(draw=1000 + k, loss=Loss("l2"), run_sigma=0.0, rho=0.0)
        _, stats = profile_threshold(state)
        psi, _, _, rows = psi_and_projection(state)
        n, G, p = len(psi), len(rows), state.law.n_params
        ratios.append(stats["mean_psi_sq"] / SIGMA**2)
        mains.append(sum(psi[r].sum() ** 2 for r in rows) / (n * (G - p) / G) / SIGMA**2)
    mean, se = np.mean(ratios), np.std(ratios) / np.sqrt(len(ratios))
    assert abs(mean - 1) < 3 * se + 0.02
    assert np.mean(mains) > 1.25


def test_the_expectation_of_final_points_in_unequal_groups_written_out():
    """`pooled_scale_moments` on the looped law's final points in 8 groups of 5-6 (what a forked sweep's final
    points would read, were the rule applied to them): E = 28.4 on nu 5.3, where n (G - p) / G = 11 on F(1, 2)."""
    state = final_points_fit("two models", draw=3)
    _, _, P, rows = psi_and_projection(state)
    expected, nu = pooled_scale_moments(state)
    assert expected == pytest.approx(sum(P[np.ix_(r, r)].sum() for r in rows), rel=1e-8)
    assert nu == pytest.approx(expected**2 / sum(P[np.ix_(a, b)].sum() ** 2 for a in rows for b in rows), rel=1e-8)
    assert expected == pytest.approx(28.4, abs=0.1) and nu == pytest.approx(5.3, abs=0.1)


@pytest.mark.parametrize("grouping", ["two models", "none", "rows"])
def test_other_unweighted_fits_keep_n_g_minus_p_over_g_on_f_one_g_minus_p(grouping):
    """Final points grouped across points (a forked sweep's models: measured, the exact expectation there called a
    null delta-phi "real" in 8% of the 1-seed demo's sweeps), or single rows (n - p and Student's t, the
    least-squares rule, exact there): the threshold is main's, with no leverage-based sum in its statistics."""
    state = final_points_fit(grouping, draw=5)
    thr, stats = profile_threshold(state)
    _, _, _, rows = psi_and_projection(state)
    assert thr == pytest.approx(mains_threshold(state), rel=1e-12)
    assert stats["reference_dof"] == len(rows) - state.law.n_params
    assert "independent_sum" not in stats
