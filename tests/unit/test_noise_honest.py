"""The noise model knows what it does not know (issue 53, item 4): a seed sigma from one degree of freedom does not
make phi exact, a law that misses its points widens its interval as far as the scatter says (the lack-of-fit
factor from squared standardised residuals, not a bounded psi), and seed repeats in one recipe only do not make
the other recipe's single runs look exact. Synthetic sweeps with a known truth (`synthetic.seeded_sweep`) plus
a point-level misfit drawn here."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from loopscale.fit import noise as N
from loopscale.fit import synthetic as S
from loopscale.fit.fit_table import fit_table
from loopscale.fit.joint import fit_joint, joint_table
from loopscale.fit.replicates import point_keys

TRUE_PHI = S.PUBLISHED_PHI["baseline"]


def with_point_misfit(table: pd.DataFrame, tau_log: float, seed: int) -> pd.DataFrame:
    """Each point's runs moved by one draw N(0, tau^2) in log L, shared by the point's seeds (a law that misses
    its points)."""
    keys = point_keys(table)
    point = keys.groupby(list(keys.columns), sort=False).ngroup().to_numpy()
    shift = np.random.default_rng(seed).standard_normal(point.max() + 1)[point]
    return table.assign(L=table["L"].to_numpy() * np.exp(tau_log * shift))


def width(interval) -> float:
    lo, hi = interval
    assert lo is not None and hi is not None
    return float(hi - lo)


def test_one_rerun_point_does_not_make_phi_exact():
    """Single runs of the published grid (sigma 0.005) and one point re-run once, its two losses 1e-7 apart: one
    degree of freedom says sigma ~ 1e-7. The fit must not call phi measured on a 0-wide interval: its profile
    interval is about as wide as the same runs' fit without a seed sigma (which sees the scatter)."""
    table = S.seeded_sweep(S.isodepth_grid(S.BASELINE_SIZES), TRUE_PHI, 1, 0.005, seed=11)
    rerun = table.iloc[[40]].assign(seed=1, L=table["L"].iloc[40] * (1 + 1e-7))
    table = pd.concat([table, rerun], ignore_index=True)
    fit = fit_table(table)
    off = fit_table(table, noise="off")
    assert fit.noise["model"] is not None and fit.noise["model"]["dof"] == 1
    assert width(fit.profile_phi["interval"]) > 0.7 * width(off.profile_phi["interval"])
    assert fit.noise["lack_of_fit"] > 1e6  # the scatter about the law, in units of that sigma
    assert "0.000 wide" not in fit.conditioning["verdict"]


@pytest.mark.parametrize("seed", [1, 2])
def test_a_law_missing_its_points_by_5x_the_seed_noise_widens_the_interval_by_the_expected_factor(seed):
    """3 seeds a point, seed sigma 0.001, every point off the law by N(0, (5 x 0.001)^2) shared by its seeds. A
    point's mean then scatters by sqrt(25 + 1/3) / sqrt(1/3) = 8.7x what its seeds say, so phi's interval must be
    ~8.7x the one of the same design without the misfit (a bounded psi capped the factor at ~1.5)."""
    grid = S.isodepth_grid(S.BASELINE_SIZES)
    clean = S.seeded_sweep(grid, TRUE_PHI, 3, 0.001, seed=seed)
    missed = with_point_misfit(clean, 5 * 0.001, seed=100 + seed)
    w_clean = width(fit_table(clean).profile_phi["interval"])
    fit = fit_table(missed)
    w_missed = width(fit.profile_phi["interval"])
    expected = np.sqrt((25 + 1 / 3) / (1 / 3))
    assert 0.8 * expected < w_missed / w_clean < 1.25 * expected  # measured 1.08x and 1.00x of it (seeds 1, 2)
    assert fit.noise["scale"]["misfit_log"] == pytest.approx(0.005, rel=0.3)  # the misfit at a point, recovered
    lo, hi = fit.profile_phi["interval"]
    assert lo < TRUE_PHI < hi


def test_seed_repeats_in_one_recipe_only_do_not_make_a_null_delta_phi_real():
    """The baseline (r 1, 2, 4, 8) with 3 seeds of small seed noise (0.0005), a candidate recipe (r 2, 4, 8) with
    one run a point and the same phi; every point off the law by N(0, 0.004^2). With the seed copies the
    candidate's single runs were standardised by the baseline's tiny sigma and delta-phi came out "real"; it
    must not (the same runs without the copies give "not measured" or "no difference")."""
    base = S.isodepth_grid(S.BASELINE_SIZES, S.BASELINE_R, "baseline")
    cand = S.isodepth_grid(S.TBPTT_SIZES, S.PROBE_R, "tbptt").assign(recipe="candidate")  # a second recipe's grid
    answers = []
    for k in range(3):
        b = S.seeded_sweep(base, TRUE_PHI, 3, 0.0005, seed=20 + k)
        c = S.seeded_sweep(cand, TRUE_PHI, 1, 0.0005, seed=40 + k)
        table = with_point_misfit(pd.concat([b, c], ignore_index=True), 0.004, seed=60 + k)
        jt, recipes = joint_table([table], "recipe")
        fit = fit_joint(jt, "recipe", recipes, separate=False)
        d = fit.joint["delta_phi"]["candidate"]
        lo, hi = d["profile_interval"]
        answers.append(fit.conditioning["delta_phi"]["candidate"]["answer"])
        assert lo < 0 < hi, (k, d["profile_interval"])
    assert "real" not in answers


def test_heavy_tailed_seed_noise_does_not_make_a_spurious_sigma_trend():
    """Student-t (5 dof) seed noise of constant sigma, 2 seeds a point: Gaussian AICc saw a trend in 12 of these 40
    sweeps (issue 53 measured 34% on its design); with each model's likelihood gain discounted by the kurtosis left
    in the deviations it standardises (Box 1953) 5 of 40, the margin's own rate at Gaussian noise (about one in
    eight, docs/results.md); a real trend (sigma halving over the budgets, Gaussian, 3 seeds) is still found."""
    grid = S.isodepth_grid(S.BASELINE_SIZES)
    table = grid.loc[grid.index.repeat(2)].reset_index(drop=True).assign(seed=np.tile([0, 1], len(grid)))
    log_L = np.log(S.law_loss(table, S.TRUE_DENSE, TRUE_PHI))
    trends = 0
    for k in range(40):
        rng = np.random.default_rng(k)
        noise = 0.005 * rng.standard_t(5, len(table)) / np.sqrt(5 / 3)
        trends += N.noise_fit(table.assign(L=np.exp(log_L + noise))).model.kind != "constant"
    assert trends <= 6
    three = grid.loc[grid.index.repeat(3)].reset_index(drop=True).assign(seed=np.tile([0, 1, 2], len(grid)))
    log_L = np.log(S.law_loss(three, S.TRUE_DENSE, TRUE_PHI))
    budget = np.log(three["C_budget"].to_numpy(float))
    sigma = 0.008 * 0.5 ** ((budget - budget.min()) / (budget.max() - budget.min()))
    for k in range(4):  # 3 seeds (12 of 12 draws found it; with 2 the Gaussian AICc misses it too, 2 of 5)
        noise = sigma * np.random.default_rng(k).standard_normal(len(three))
        found = N.noise_fit(three.assign(L=np.exp(log_L + noise)))
        assert found.model.kind == "log-linear in C" and found.model.params["b"] < 0


def test_the_misfit_at_a_point_and_the_residual_pools_are_their_formulas_written_out():
    """docs/design.md (power, what the pilot shows), on a sweep with 2 seeds at some points and 4 at others and a
    misfit shared by a point's seeds: the law's misfit at a point is tau^2 = sum_g rbar_g^2 / (G - p) -
    mean_g sigma^2 / n_g (rbar_g a point's mean residual; each point's seed noise averaged over ITS seeds), and
    the record's residual pools are the standardised residuals: seed-level, a point's runs' deviations from their
    mean x sqrt(n_g / (n_g - 1)); point-level, the points' mean residuals; each centred and scaled to unit RMS."""
    from loopscale.fit.result import predict_loss

    grid = S.isodepth_grid(S.BASELINE_SIZES)
    counts = np.where(np.arange(len(grid)) % 2 == 0, 2, 4)
    table = with_point_misfit(S.seeded_sweep(grid, TRUE_PHI, counts, 0.002, seed=4), 0.003, seed=5)
    fit = fit_table(table, profile=False)
    keys = point_keys(table)
    point = keys.groupby(list(keys.columns), sort=False).ngroup().to_numpy()
    n_g = np.bincount(point)
    res = np.log(predict_loss(fit, table)) - np.log(table["L"].to_numpy())
    rbar = np.bincount(point, weights=res) / n_g
    sigma = fit.noise["sigma_log"]  # the constant model: one sigma for every row
    G = len(n_g)
    tau2 = np.sum(rbar**2) / (G - 6) - np.mean(sigma**2 / n_g)
    assert fit.noise["model"]["kind"] == "constant"
    assert fit.noise["scale"]["misfit_log"] == pytest.approx(np.sqrt(tau2), rel=1e-6)

    def unit(v):
        v = v - v.mean()
        return np.sort(v / np.sqrt(np.mean(v**2)))

    dev = (res - rbar[point]) * np.sqrt(n_g / (n_g - 1))[point]
    units = fit.noise["units"]
    assert len(units["point"]) == G and len(units["seed"]) == len(table)
    np.testing.assert_allclose(units["point"], unit(rbar), atol=6e-5)  # the record keeps 4 decimals
    np.testing.assert_allclose(units["seed"], unit(dev), atol=6e-5)
