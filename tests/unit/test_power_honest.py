"""An honest `loopscale power` (issue 53, item 3): it draws what the pilot shows (seed noise, the law's misfit at
a point, heavy tails, the uncertainty of sigma itself), reads the interval the verdict reads, says how uncertain its
MDE is, and refuses a law the fitter could not recover. The pilot here is a fit of a sweep drawn by this file's
own generator (Student-t seed noise plus a point misfit), not `synthetic.seeded_sweep`'s Gaussian."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from loopscale.errors import InputError
from loopscale.fit import synthetic as S
from loopscale.fit.fit_table import fit_table
from loopscale.fit.joint import fit_joint, joint_table
from loopscale.fit.pilot import Truth, draw_noise, share_draw, split_draw, truth_from_fit, unit_draws
from loopscale.fit.power import CANDIDATE, fit_simulated, make_problem, simulate_design
from loopscale.fit.replicates import point_keys

TRUTH = {**S.TRUE_DENSE, "phi": S.PUBLISHED_PHI["baseline"]}


def sweep(grid: pd.DataFrame, seeds: int, sigma: float, tau: float, t_dof: float | None, seed: int, dphi=0.0):
    """`grid` trained `seeds` times: log L = law + sigma u_run + tau u_point, u_run Student-t (t_dof, scaled to
    variance 1) or Gaussian, u_point Gaussian and shared by the point's seeds; rows of recipe CANDIDATE get
    phi + dphi."""
    rng = np.random.default_rng(seed)
    table = grid.loc[grid.index.repeat(seeds)].reset_index(drop=True)
    table["seed"] = np.tile(np.arange(seeds), len(grid))
    phi = np.where(table["recipe"].to_numpy() == CANDIDATE, TRUTH["phi"] + dphi, TRUTH["phi"])
    log_L = np.empty(len(table))
    for p in np.unique(phi):
        on = phi == p
        log_L[on] = np.log(S.law_loss(table[on], S.TRUE_DENSE, p))
    u = (
        rng.standard_normal(len(table))
        if t_dof is None
        else rng.standard_t(t_dof, len(table)) / np.sqrt(t_dof / (t_dof - 2))
    )
    keys = point_keys(table)
    point = keys.groupby(list(keys.columns), sort=False).ngroup().to_numpy()
    log_L = log_L + sigma * u + tau * rng.standard_normal(point.max() + 1)[point]
    return table.assign(L=np.exp(log_L))


def design_of(grid: pd.DataFrame, seeds: int) -> pd.DataFrame:
    table = grid.loc[grid.index.repeat(seeds)].reset_index(drop=True)
    table["seed"] = np.tile(np.arange(seeds), len(grid))
    return table


def test_power_refuses_a_law_or_a_planted_delta_phi_outside_the_fitters_box():
    design = design_of(S.isodepth_grid(S.CPU_SIZES, (1, 2, 4)), 2)
    with pytest.raises(InputError, match="outside the fitter's box"):
        simulate_design(design, Truth({**TRUTH, "E": 1e-6}, 0.003), n_sims=4, what=("phi",))
    with pytest.raises(InputError, match="outside the fitter's box"):
        simulate_design(design, Truth(TRUTH, 0.003), n_sims=4, delta_phi=3.2, what=("delta_phi",))
    with pytest.raises(InputError, match="outside the fitter's box"):
        simulate_design(design, Truth({**TRUTH, "phi": 3.5}, 0.003), n_sims=4, what=("phi",))


def test_the_pilot_shows_its_misfit_tails_and_sigma_uncertainty_and_power_draws_them():
    """A pilot of the published grid, 2 seeds, t5 seed noise 0.002 and a point misfit 0.004: truth_from_fit finds
    the misfit (within 35%), heavy tails and sigma's degrees of freedom; a simulation that draws them gives a
    delta-phi se ~ sqrt(tau^2 + sigma^2 / 2) / (sigma / sqrt(2)) = 3.0x the one of seed noise alone (0.7-1.4x
    that factor), and an MDE interval: the upper end of sigma's interval above the point value."""
    grid = S.isodepth_grid(S.BASELINE_SIZES)
    pilot = fit_table(sweep(grid, 2, 0.002, 0.004, 5, seed=3), profile=False)
    truth = truth_from_fit(pilot)
    assert truth.misfit_log == pytest.approx(0.004, rel=0.35)
    assert truth.sigma_dof is not None and truth.sigma_dof >= 50
    design = design_of(S.isodepth_grid(S.CPU_SIZES, (1, 2, 4)), 2)
    seed_only = Truth(TRUTH, truth.sigma_log)
    full = simulate_design(design, truth, n_sims=48, seed=1, what=("delta_phi",))["delta_phi"]
    alone = simulate_design(design, seed_only, n_sims=48, seed=1, what=("delta_phi",))["delta_phi"]
    expected = np.sqrt(truth.misfit_log**2 + truth.sigma_log**2 / 2) / (truth.sigma_log / np.sqrt(2))
    assert 0.7 * expected < full["se"] / alone["se"] < 1.4 * expected
    assert full["mde_upper"] > full["mde_point"] and full["mde_mc_se"] > 0
    assert full["sigma_interval"][0] < truth.sigma_log < full["sigma_interval"][1]


def test_heavy_tails_are_found_in_the_pilots_residuals_and_gaussian_ones_are_not():
    grid = S.isodepth_grid(S.BASELINE_SIZES)
    heavy = truth_from_fit(fit_table(sweep(grid, 3, 0.004, 0.0, 3, seed=5), profile=False))
    normal = truth_from_fit(fit_table(sweep(grid, 3, 0.004, 0.0, None, seed=5), profile=False))
    assert heavy.tail_dof is not None and heavy.tail_dof < 10
    assert normal.tail_dof is None


def test_a_pilot_with_one_dof_of_sigma_plans_with_an_uncertain_sigma():
    """sigma from few degrees of freedom: its 95% interval is wide, and the MDE at its upper end is far above the
    point value (the MDE `power` recommends draws sigma from that uncertainty)."""
    truth = Truth(TRUTH, 0.003, sigma_dof=3)
    lo, hi = truth.sigma_interval()
    assert lo < 0.6 * 0.003 and hi > 2 * 0.003
    design = design_of(S.isodepth_grid(S.CPU_SIZES, (1, 2, 4)), 2)
    out = simulate_design(design, truth, n_sims=32, seed=2, what=("delta_phi",))["delta_phi"]
    assert out["mde_upper"] > 2 * out["mde_point"]
    assert out["mde"] > 1.1 * out["mde_point"]  # each sweep's sigma drawn from its uncertainty: a wider spread


@pytest.mark.slow
def test_realised_power_at_the_recommended_mde_is_near_80_percent():
    """The issue's case, smaller: a pilot of the CPU grid (2 seeds, t5 noise 0.004, misfit 0.001), `power`'s MDE
    from it, then 40 sweeps with that delta-phi planted, each fitted as a user would (`fit_joint`, the verdict):
    the share called "real" lies in 60-97% (target 70-90%; 40 sweeps: +-7 points of Monte-Carlo error)."""
    grid = S.isodepth_grid(S.CPU_SIZES, (1, 2, 4, 8))
    pilot = fit_table(sweep(grid, 2, 0.004, 0.001, 5, seed=7), profile=False)
    dphi = simulate_design(design_of(grid, 2), truth_from_fit(pilot), n_sims=100, seed=0, what=("delta_phi",))
    mde = dphi["delta_phi"]["mde"]
    probe = grid[grid["r"] > 1].assign(recipe=CANDIDATE)
    both = pd.concat([grid, probe], ignore_index=True)
    real = 0
    for k in range(40):
        jt, recipes = joint_table([sweep(both, 2, 0.004, 0.001, 5, seed=100 + k, dphi=mde)], "recipe")
        fit = fit_joint(jt, "recipe", recipes, separate=False)
        real += fit.conditioning["delta_phi"][CANDIDATE]["answer"] == "real"
    assert 0.6 <= real / 40 <= 0.97


def test_power_reads_the_verdicts_own_delta_phi_interval_on_a_forked_seeded_sweep():
    """On a forked sweep with a seed sigma the verdict's profile threshold is delta-phi's own (S_k^2 on F(1, nu_k):
    `uncertainty.profile_threshold(state, name)`, not the pooled scale): `power`'s simulated fit
    (`power.fit_simulated`, the fast path and `profile_interval`'s bracketing) must give the interval `fit --joint`
    gives the same table (`fit_joint`, the multi-start and the profile grid), or its MDE plans for another
    interval than the one the user's verdict reads. The demo's 3-seed forked design, half of a run's noise its
    parent job's, delta-phi 0.07 planted: two draws, both ends to 1e-4 (the root-finders' tolerance)."""
    grid = S.demo_grid(S.BASELINE_R, "baseline")
    design = design_of(grid, 3)
    design["parent"] = "parent-" + design[["r", "N_once", "N_rec", "seed"]].astype(str).agg("-".join, axis=1)
    truth = Truth({**S.DEMO_DENSE, "phi": S.DEMO_PHI}, 0.005, parent_share=0.5)
    problem = make_problem(design, truth, joint=True, delta_phi=0.07)
    for seed in (0, 1):
        rng = np.random.default_rng(seed)
        job = rng.standard_normal(problem.clusters.max() + 1)[problem.clusters]
        eps = 0.005 * (np.sqrt(0.5) * job + np.sqrt(0.5) * rng.standard_normal(len(problem.table)))
        L = np.exp(problem.log_L + eps)
        estimate, low, high = fit_simulated(problem, L)
        jt, recipes = joint_table([problem.table.assign(L=L)], "recipe")
        verdict = fit_joint(jt, "recipe", recipes, separate=False).joint.delta_phi[CANDIDATE]
        assert estimate == pytest.approx(verdict.estimate, abs=1e-5)
        assert [low, high] == pytest.approx(verdict.profile_interval, abs=1e-4)


@pytest.mark.parametrize("share", [0.2, 0.5, 0.9])
def test_the_pilot_shows_how_much_of_a_runs_noise_its_forked_job_shares(share):
    """A forked pilot (the demo's design, 3 seeds, a share rho of each run's noise its parent job's): the pilot
    measures rho from its residuals (`noise_scale.parent_share`, corrected for what the fit absorbs) and `power`
    draws it, not 1 (a job's whole noise shared: the demo's MDE 0.090 against 0.073 at the truth's 0.5, so 96%
    power where 80% was promised; docs/results.md). Four pilots' mean within 0.12 of the truth."""
    grid = S.demo_grid(S.BASELINE_R, "baseline")
    dense = dict(S.DEMO_DENSE)
    shares = []
    for seed in range(4):
        table = S.seeded_sweep(grid, S.DEMO_PHI, 3, 0.005, seed, dense, forked=True, parent_share=share)
        shares.append(truth_from_fit(fit_table(table, profile=False)).parent_share)
    assert abs(np.mean(shares) - share) < 0.12
    assert truth_from_fit(fit_table(table, profile=False), parent_share=1.0).parent_share == 1.0  # stated wins


def test_a_pilot_without_seed_repeats_does_not_promise_that_seeds_average_its_misfit_away():
    """One seed a point: the pilot's RMS residual is seed noise and misfit together and it cannot tell their
    shares. For its own design the split does not matter; for 4 seeds a point, calling the misfit 0 (all of it
    seed noise) promised an MDE of half the 1-seed one (se ~ 1 / sqrt(4)). Drawing the split (w ~ U(0, 1)) gives
    a point's sd sqrt(w + (1 - w) / 4) of sigma, 0.79 on average: the 4-seed MDE is above 0.62x the 1-seed one."""
    grid = S.isodepth_grid(S.CPU_SIZES, (1, 2, 4))
    pilot = fit_table(sweep(S.isodepth_grid(S.BASELINE_SIZES), 1, 0.004, 0.002, None, seed=11), profile=False)
    truth = truth_from_fit(pilot)
    assert truth.split_unknown and truth.misfit_log == 0.0
    mde = {
        k: simulate_design(design_of(grid, k), truth, n_sims=32, seed=3, what=("delta_phi",))["delta_phi"]["mde_point"]
        for k in (1, 4)
    }
    assert mde[4] > 0.62 * mde[1]


def test_sigma_from_heavy_tailed_noise_is_drawn_wider_than_a_chi_square_on_its_dof():
    """var(s^2) / sigma^4 = 2 / nu + kappa c / nu: with Student-t 4.5 noise (kappa 12) and one seed a point, the
    pilot's RMS residual on n - p dof is as uncertain as a chi-square on far fewer; the pilot says so (its sigma
    dof below half of n - p, the interval power draws from wider); Gaussian noise keeps n - p."""
    grid = S.isodepth_grid(S.BASELINE_SIZES)
    n_p = len(grid) - 6
    heavy = truth_from_fit(fit_table(sweep(grid, 1, 0.004, 0.0, 4.5, seed=2), profile=False))
    normal = truth_from_fit(fit_table(sweep(grid, 1, 0.004, 0.0, None, seed=2), profile=False))
    assert heavy.tail_dof is not None and heavy.sigma_dof < 0.5 * n_p
    assert normal.tail_dof is None and normal.sigma_dof == n_p
    lo, hi = heavy.sigma_interval()
    assert (
        hi / lo
        > Truth(TRUTH, heavy.sigma_log, sigma_dof=n_p).sigma_interval()[1]
        / Truth(TRUTH, heavy.sigma_log, sigma_dof=n_p).sigma_interval()[0]
    )


def _mde_at(design: pd.DataFrame, truth: Truth, n_sims: int = 64) -> float:
    """`power`'s delta-phi MDE of a design from a pilot's noise, put at the true law with sigma 0.004 known (only
    the noise's shape, its misfit split and the parent share left to differ between pilots)."""
    at = replace(truth, params=TRUTH, sigma_log=0.004, sigma_dof=None)
    return simulate_design(design, at, n_sims=n_sims, seed=4, what=("delta_phi",))["delta_phi"]["mde"]


def test_a_pilot_with_heavy_tails_below_the_kurtosis_gate_is_drawn_with_them_and_a_gaussian_one_is_not():
    """One seed a point, Student-t 5 noise whose sample kurtosis (0.87) falls below the gate (2 se, 0.91): the
    pilot's tails are not called heavy, and `power` used to draw Gaussian noise for it, so its MDE was a
    Gaussian pilot's. The fit is Huber (in log units, delta 1e-3: near the median at this noise), more precise
    on heavy-tailed noise than on Gaussian of the same variance (1 / f(0)^2: 0.82x the Gaussian's se for t5):
    drawing the pilot's own residuals (smoothed), its MDE is below 0.92x a Gaussian draw's, while a Gaussian
    pilot's residuals give the Gaussian draw's MDE to within 12%."""
    grid = S.isodepth_grid(S.BASELINE_SIZES)
    heavy = truth_from_fit(fit_table(sweep(grid, 1, 0.004, 0.0, 5, seed=5), profile=False))
    normal = truth_from_fit(fit_table(sweep(grid, 1, 0.004, 0.0, None, seed=5), profile=False))
    assert heavy.tail_dof is None and normal.tail_dof is None  # neither past the gate
    design = design_of(S.isodepth_grid(S.CPU_SIZES, (1, 2, 4)), 1)
    gaussian = _mde_at(design, replace(normal, seed_units=None, point_units=None))
    assert _mde_at(design, heavy) < 0.92 * gaussian
    assert abs(_mde_at(design, normal) / gaussian - 1) < 0.12


def test_a_forked_pilot_says_how_sure_it_is_of_its_parent_share_and_power_draws_the_share_from_that():
    """Twelve forked pilots of two seeds (the demo's design, a true share 0.5 of a run's noise its parent job's):
    the share each measures has a standard error (`noise_scale.parent_share`) of the size of the shares' spread
    over the pilots (0.5-2x here, 12 pilots; 0.73-1.21x over 30 in bench_calibration's forked cells:
    docs/results.md), and each simulated sweep draws its share from N(rho, se^2) clipped to [0, 1] as the
    estimate is (`pilot.share_draw`)."""
    grid = S.demo_grid(S.BASELINE_R, "baseline")
    truths = [
        truth_from_fit(
            fit_table(
                S.seeded_sweep(grid, S.DEMO_PHI, 2, 0.005, seed, dict(S.DEMO_DENSE), forked=True, parent_share=0.5),
                profile=False,
            )
        )
        for seed in range(12)
    ]
    spread = np.std([t.parent_share for t in truths], ddof=1)
    se = np.sqrt(np.mean([t.parent_share_se**2 for t in truths]))
    assert 0.5 * spread < se < 2.0 * spread
    rng = np.random.default_rng(0)
    draws = np.array([share_draw(rng, replace(truths[0], parent_share=0.4, parent_share_se=0.2)) for _ in range(4000)])
    assert draws.min() >= 0 and draws.max() <= 1
    assert abs(draws.mean() - 0.4) < 0.02 and abs(draws.std() - 0.2) < 0.02
    assert share_draw(rng, replace(truths[0], parent_share=0.4, parent_share_se=0.0)) == 0.4  # a stated share


def test_the_drawn_split_keeps_a_one_run_points_variance_at_the_pilots_sigma():
    """docs/design.md (power, a pilot without seed repeats): tau^2 = w sigma^2 and the seed variance (1 - w) sigma^2,
    w ~ Uniform(0, 1): whatever w, a point of one run has variance sigma^2 (its own design), and w spreads over
    (0, 1) (its mean near 1/2 over 400 draws)."""
    truth = Truth(TRUTH, 0.004, sigma_dof=10, split_unknown=True)
    rng = np.random.default_rng(0)
    draws = np.array([split_draw(rng, truth) for _ in range(400)])
    np.testing.assert_allclose(draws[:, 0] ** 2 + draws[:, 1] ** 2, 0.004**2, rtol=1e-12)
    w = (draws[:, 1] / 0.004) ** 2
    assert 0.0 < w.min() < 0.05 and 0.95 < w.max() < 1.0 and abs(w.mean() - 0.5) < 0.05
    assert split_draw(rng, Truth(TRUTH, 0.004, misfit_log=0.001)) == (0.004, 0.001)  # a split pilot: as measured


def _kurtosis(v: np.ndarray) -> float:
    v = v - v.mean()
    return float(np.mean(v**4) / np.mean(v**2) ** 2 - 3)


def test_a_pools_smoothed_draws_have_unit_variance_and_each_level_draws_from_its_own_pool():
    """docs/design.md (power): u is a pool value plus Gaussian jitter of Silverman's bandwidth, scaled back to unit
    variance (a pool of 10 values: h^2 ~ 0.3, unscaled draws would have variance ~1.3); u_job and u_run come from
    the seed-level pool, u_point from the point-level one. The two pools here differ in shape: seed-level two-valued
    (+-1, excess kurtosis -2), point-level heavy (most values 0, two far out: excess kurtosis ~ +2 with the jitter)."""
    rng = np.random.default_rng(0)
    seed_pool = tuple([-1.0] * 5 + [1.0] * 5)
    point_pool = tuple(np.array([-2.0, 0, 0, 0, 0, 0, 0, 0, 0, 2.0]) / np.sqrt(0.8))
    for pool in (seed_pool, point_pool):
        u = unit_draws(rng, 40_000, None, pool)
        assert abs(u.mean()) < 0.02 and abs(u.var() - 1) < 0.03
    n = 40_000
    clusters, points = np.arange(n), np.arange(n)
    run = draw_noise(rng, clusters, 0.01, 0.0, points, 0.0, None, seed_pool, point_pool) / 0.01  # u_run alone
    job = draw_noise(rng, clusters, 0.01, 1.0, points, 0.0, None, seed_pool, point_pool) / 0.01  # u_job alone
    at_point = draw_noise(rng, clusters, 1e-9, 0.0, points, 0.01, None, seed_pool, point_pool) / 0.01  # u_point
    assert _kurtosis(run) < -1 and _kurtosis(job) < -1  # the seed-level pool's shape
    assert _kurtosis(at_point) > 1  # the point-level pool's
    for u in (run, job, at_point):
        assert abs(u.var() - 1) < 0.05


def test_a_stated_parent_share_is_exact_and_a_measured_one_carries_its_standard_error():
    """docs/operations.md (power): `--parent-share` overrides the share a forked pilot's residuals show, and a
    stated share is exact (drawn as itself in every sweep: `share_draw`); the measured one comes with its se."""
    grid = S.demo_grid(S.BASELINE_R, "baseline")
    table = S.seeded_sweep(grid, S.DEMO_PHI, 2, 0.005, 1, dict(S.DEMO_DENSE), forked=True, parent_share=0.5)
    pilot = fit_table(table, profile=False)
    measured = truth_from_fit(pilot)
    assert 0 < measured.parent_share < 1 and measured.parent_share_se > 0
    stated = truth_from_fit(pilot, parent_share=0.3)
    assert stated.parent_share == 0.3 and stated.parent_share_se == 0.0
    rng = np.random.default_rng(0)
    assert {share_draw(rng, stated) for _ in range(20)} == {0.3}
