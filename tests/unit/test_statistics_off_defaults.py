"""The statistics at the settings users run (issue 58, item 3): 2-4 seeds a point (unequal), forked sweeps whose
branches share part of their noise (parent share < 1), asymmetric and one-sided intervals, every fold of
`validate`, pinned and free parameters in AICc, the sigma model's choice margin. Each test checks a computed
quantity against an independent calculation: a closed form, a brute-force refit, or a simulation with a known
truth (docs/design.md, "The noise model", "The verdict", "Power", "Out of sample")."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize
from scipy.stats import norm

from loopscale.fit import noise as N
from loopscale.fit import replicates as R
from loopscale.fit import seed_sigma as SS
from loopscale.fit import synthetic as S
from loopscale.fit import two_stage as T
from loopscale.fit.fit_table import fit_table
from loopscale.fit.laws.registry import law_class, law_data_from_table
from loopscale.fit.pilot import Truth, draw_noise
from loopscale.fit.power import make_problem, noise_clusters, simulate_design
from loopscale.fit.runs_table import canonical_table
from loopscale.fit.validation.run import validate
from loopscale.fit.verdict import delta_answer, mde
from support.paths import FIXTURES

PHI = S.PUBLISHED_PHI["baseline"]
rng_of = np.random.default_rng


def unequal_seeds(sigma: float = 0.004, seed: int = 0, **kw) -> tuple[pd.DataFrame, np.ndarray]:
    """The published grid with 2, 3 or 4 seeds a point (drawn per point), log-normal seed noise of `sigma`."""
    grid = S.isodepth_grid(S.BASELINE_SIZES)
    counts = rng_of(seed).choice([2, 3, 4], size=len(grid))
    return S.seeded_sweep(grid, PHI, counts, sigma, seed=seed, **kw), counts


# ----------------------------------------------------------------------------------------------
# Replicates and the seed sigma
# ----------------------------------------------------------------------------------------------
def test_within_point_deviations_with_unequal_seeds_and_a_duplicate_equal_a_groupby():
    """SS_g = sum over a point's seeds of (seed mean - point mean)^2, a duplicated seed counted once at its
    mean; df_g = seeds - 1 (computed here with pandas, row by row)."""
    table, counts = unequal_seeds()
    rerun = table.iloc[[5]].assign(L=table["L"].iloc[5] * 1.003)  # one seed's run counted twice, another loss
    table = pd.concat([table, rerun], ignore_index=True)
    reps = R.replicate_groups(table)
    ss, df = SS.within_point(np.log(table["L"].to_numpy()), reps)
    frame = table.assign(logL=np.log(table["L"]), point=reps.point)
    seed_means = frame.groupby(["point", "seed"])["logL"].mean().reset_index()
    for p, g in seed_means.groupby("point"):
        assert ss[p] == pytest.approx(((g["logL"] - g["logL"].mean()) ** 2).sum(), rel=1e-9, abs=1e-18)
        assert df[p] == len(g) - 1
    assert sorted(reps.seeds) == sorted(counts) and int(reps.duplicate.sum()) == 1


def helmert_contrasts(log_L_by_point: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(contrasts, their point): a point's n seeds give n - 1 orthonormal (Helmert) contrasts, independent
    N(0, sigma_g^2) whatever the point's mean; the j-th is (y_1 + ... + y_j - j y_{j+1}) / sqrt(j (j + 1))."""
    values, points = [], []
    for g, y in enumerate(log_L_by_point):
        for j in range(1, len(y)):
            values.append((y[:j].sum() - j * y[j]) / math.sqrt(j * (j + 1)))
            points.append(g)
    return np.array(values), np.array(points)


def helmert_loglik(contrasts: tuple[np.ndarray, np.ndarray], sigma_by_point: np.ndarray) -> float:
    """The likelihood of the within-point deviations, brute force: the sum of the contrasts' normal densities."""
    values, points = contrasts
    return float(norm.logpdf(values, scale=sigma_by_point[points]).sum())


def aicc(loglik: float, k: int, n: int) -> float:
    return -2 * loglik + 2 * k + 2 * k * (k + 1) / (n - k - 1)


def test_each_sigma_model_is_the_maximum_likelihood_of_the_contrasts_and_counts_its_parameters():
    """Constant, log-linear in C and in N, per r: parameters, log-likelihood and AICc (k free parameters, n the
    pooled degrees of freedom) against a brute-force maximisation of the Helmert-contrast likelihood."""
    table, counts = unequal_seeds(sigma=0.004, seed=2)
    reps = R.replicate_groups(table)
    log_L = np.log(table["L"].to_numpy())
    by_point = [log_L[reps.point == p] for p in range(reps.n_points)]
    contrasts = helmert_contrasts(by_point)
    first = np.array([np.flatnonzero(reps.point == p)[0] for p in range(reps.n_points)])
    n = int((counts - 1).sum())
    models = {m.kind: m for m in SS.sigma_candidates(table, reps)}
    assert set(models) == {"constant", "log-linear in C", "log-linear in N", "per r"}
    for m in models.values():
        assert m.dof == n

    def best(sigma_of, x0):
        res = minimize(
            lambda t: -helmert_loglik(contrasts, sigma_of(t)),
            x0,
            method="Nelder-Mead",
            options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 20000},
        )
        return res.x, -res.fun

    (log_s,), ll = best(lambda t: np.full(reps.n_points, math.exp(t[0])), [math.log(0.003)])
    assert models["constant"].params["sigma"] == pytest.approx(math.exp(log_s), rel=1e-4)
    assert models["constant"].loglik == pytest.approx(ll, abs=1e-6)
    assert models["constant"].n_params == 1 and models["constant"].aicc == pytest.approx(aicc(ll, 1, n), abs=1e-6)
    for kind, column in (("log-linear in C", "C_budget"), ("log-linear in N", None)):
        x_row = np.log(table[column] if column else table["N_once"] + table["N_rec"]).to_numpy()
        m = models[kind]
        xc = x_row[first] - m.params["x_mean"]
        (a, b), ll = best(lambda t, xc=xc: np.exp(t[0] + t[1] * xc), [math.log(0.004), 0.0])
        assert (m.params["a"], m.params["b"]) == pytest.approx((a, b), abs=2e-4)
        assert m.loglik == pytest.approx(ll, abs=1e-6) and m.n_params == 2
        assert m.aicc == pytest.approx(aicc(ll, 2, n), abs=1e-6)
    per_r = models["per r"]
    r_pt = table["r"].to_numpy()[first]
    assert per_r.n_params == 4  # one sigma for each of r = 1, 2, 4, 8
    for r in (1, 2, 4, 8):  # the maximum likelihood of one sigma per r: pooled within that r
        on = r_pt == r
        pooled = math.sqrt(sum(((y - y.mean()) ** 2).sum() for y, o in zip(by_point, on) if o) / (counts[on] - 1).sum())
        assert per_r.params["sigma_r"][str(r)] == pytest.approx(pooled, rel=1e-12)
    sig = np.array([per_r.params["sigma_r"][str(int(r))] for r in r_pt])
    assert per_r.loglik == pytest.approx(helmert_loglik(contrasts, sig), abs=1e-6)


def fake(kind: str, loglik: float, k: int, dof: int = 40) -> SS.SigmaModel:
    return SS.SigmaModel(kind, {"sigma": 0.004}, dof, loglik, k)


@pytest.mark.parametrize("k", [2, 3])
def test_a_trend_is_chosen_only_when_its_aicc_beats_the_constants_by_two(k):
    """The margin: a model with k parameters whose AICc is 1.99 below the constant's is not chosen, 2.01 below
    is (the log-likelihood gain that gives each, from the AICc formula with n = 40 degrees of freedom)."""
    n = 40
    penalty = (2 * k + 2 * k * (k + 1) / (n - k - 1)) - (2 + 4 / (n - 2))
    for below, chosen in ((1.99, "constant"), (2.01, "trend")):
        gain = (below + penalty) / 2  # AICc_trend = AICc_const - below
        models = [fake("constant", 100.0, 1), fake("trend", 100.0 + gain, k)]
        assert models[0].aicc - models[1].aicc == pytest.approx(below, abs=1e-9)
        assert SS.choose_sigma_model(models).kind == chosen
    # between two models that both beat the constant, the lower AICc wins
    models = [fake("constant", 100.0, 1), fake("a", 105.0, 2), fake("b", 106.0, 2)]
    assert SS.choose_sigma_model(models).kind == "b"


def test_per_r_sigma_on_an_r_without_repeats_is_the_pooled_sigma_and_a_trend_is_clipped():
    """An r whose points have one seed each gets the pooled sigma; a log-linear trend is evaluated at C clipped
    to the replicated points' range."""
    grid = S.isodepth_grid(S.BASELINE_SIZES)
    counts = np.where(grid["r"].to_numpy() == 8, 1, np.where(grid["r"].to_numpy() == 1, 4, 2))
    sigma_r = {1: 0.002, 2: 0.006, 4: 0.012, 8: 0.004}
    table = S.seeded_sweep(grid, PHI, counts, lambda t: t["r"].map(sigma_r).to_numpy(), seed=4)
    nf = N.noise_fit(table)
    assert nf.model.kind == "per r" and nf.model.n_params == 3  # r = 1, 2, 4 have repeats
    ss, df = SS.within_point(np.log(table["L"].to_numpy()), nf.reps)
    pooled = math.sqrt(ss.sum() / df.sum())
    on8 = table["r"].to_numpy() == 8
    assert np.allclose(nf.row_sigma[on8], pooled)
    for r in (1, 2, 4):
        assert abs(nf.row_sigma[table["r"].to_numpy() == r][0] / sigma_r[r] - 1) < 0.25
    trend = SS.SigmaModel(
        "log-linear in C",
        {
            "covariate": "log_C",
            "a": math.log(0.004),
            "b": -0.5,
            "x_mean": math.log(1e18),
            "x_range": [math.log(4.64e17), math.log(4.64e18)],
        },
        10,
        0.0,
        2,
    )
    C = np.array([1e17, 4.64e17, 1e18, 4.64e18, 1e20])
    got = trend.sigma({"log_C": np.log(C), "log_N": np.zeros(5), "r": np.ones(5)})
    want = 0.004 * (np.clip(C, 4.64e17, 4.64e18) / 1e18) ** -0.5
    np.testing.assert_allclose(got, want, rtol=1e-12)


# ----------------------------------------------------------------------------------------------
# The two-stage bootstrap's draws: closed-form moments
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("inner", ["keep", "resample"])
def test_two_stage_weights_have_the_moments_of_their_design(inner):
    """Outer clusters (the points) drawn n_outer times with replacement: a point's draw count c ~
    Binomial(n_outer, 1/n_outer). keep: each of its seeds weighs c. resample: c n_g draws among its n_g seeds, a
    seed's count ~ Binomial(c n_g, 1/n_g) given c, so Var = (1 - 1/n_g) + (1 - 1/n_outer); a point's seeds always
    sum to c n_g. Checked over 4000 replicates (Monte Carlo error ~2% of the variance)."""
    table, counts = unequal_seeds(seed=6)
    reps = R.replicate_groups(table)
    h = T.hierarchy(table, reps, inner=inner)
    assert h.n_outer == reps.n_points
    w = h.weights(rng_of(0), 4000)
    n_out = reps.n_points
    var_c = 1 - 1 / n_out
    for p in range(reps.n_points):
        rows = np.flatnonzero(reps.point == p)
        n_g = len(rows)
        block = w[:, rows]
        c = block.sum(axis=1) / n_g  # the point's draw count
        assert np.allclose(c, np.round(c))
        if inner == "keep":
            assert np.all(block == block[:, :1])
        want_var = var_c if inner == "keep" else var_c + (1 - 1 / n_g)
        if p < 12:
            assert block.mean() == pytest.approx(1.0, abs=0.05)
            assert block[:, 0].var() == pytest.approx(want_var, rel=0.12)
    # c over all points: a multinomial's marginals, the total n_outer exactly
    totals = np.stack([w[:, reps.point == p].sum(axis=1) / counts[p] for p in range(n_out)], axis=1)
    assert np.all(totals.sum(axis=1) == n_out)


@pytest.mark.parametrize("inner", ["keep", "resample"])
def test_two_stage_weights_with_budgets_as_outer_clusters(inner):
    """--cluster by budget: each replicate draws the 6 budgets with replacement, a budget drawn c times brings
    each of its points c times (their seeds kept, or c n_g draws among them); c ~ Binomial(6, 1/6)."""
    table, counts = unequal_seeds(seed=7)
    reps = R.replicate_groups(table)
    budget = table["C_budget"].to_numpy()
    h = T.hierarchy(table, reps, clusters=budget, inner=inner)
    assert h.n_outer == 6
    w = h.weights(rng_of(4), 3000)
    c = {}
    for b in np.unique(budget):
        on = budget == b
        c[b] = w[:, on].sum(axis=1) / on.sum()  # every row of the budget: its draw count on average
        for p in np.unique(reps.point[on]):
            rows = reps.point == p
            assert np.all(w[:, rows].sum(axis=1) == c[b] * rows.sum())  # the point comes with its budget
            if inner == "keep":
                assert np.all(w[:, rows] == c[b][:, None])
    draws = np.stack(list(c.values()), axis=1)
    assert np.all(draws == np.round(draws)) and np.all(draws.sum(axis=1) == 6)
    assert draws.mean() == pytest.approx(1.0, abs=0.03) and draws.var(axis=0).mean() == pytest.approx(5 / 6, rel=0.1)


def test_forked_parents_are_the_seeds_of_their_model_and_their_branches_move_together():
    """A forked sweep (3 parents a model, share 0.5): the outer clusters are the models; resampling draws among
    a model's parents, and every branch of a parent always has its parent's weight."""
    grid = S.isodepth_grid(S.CPU_SIZES, (1, 2, 4))
    table = S.seeded_sweep(grid, PHI, 3, 0.004, seed=1, forked=True, parent_share=0.5)
    reps = R.replicate_groups(table)
    h = T.hierarchy(table, reps, inner="resample")
    models = table.groupby(["r", "N_once", "N_rec"]).ngroups
    assert h.n_outer == models
    w = h.weights(rng_of(2), 2000)
    for _, rows in table.groupby("parent").groups.items():
        rows = np.asarray(rows)
        assert np.all(w[:, rows] == w[:, rows[:1]])
    first = table.groupby("parent").head(1).index.to_numpy()  # one branch per parent: its weight is the parent's
    pw = w[:, first]
    assert pw.mean() == pytest.approx(1.0, abs=0.05)
    assert pw.var(axis=0).mean() == pytest.approx((1 - 1 / models) + (1 - 1 / 3), rel=0.1)


# ----------------------------------------------------------------------------------------------
# The verdict on delta-phi: asymmetric and one-sided intervals, the MDE
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "interval,answer,margin",
    [
        ((0.004, 0.41), "real", None),  # asymmetric, just above 0
        ((-0.37, -0.0002), "real", None),  # negative
        ((-0.011, 0.043), "no difference", 0.05),  # the larger side, rounded up to 0.01
        ((-0.07, 0.01), "no difference", 0.07),
        ((-0.02, 0.05), "no difference", 0.05),  # 0.05 is 0.05 (not 0.06 by rounding)
        ((-0.02, 0.08), "no difference", 0.08),  # at the smallest published effect
        ((-0.02, 0.0801), "not measured", None),  # beyond it
        ((-0.09, 0.001), "not measured", None),
        ((0.0, 0.3), "not measured", None),  # touches 0: not excluded, too wide for no difference
        ((0.01, None), "not measured", None),  # one-sided: no closed interval
        ((None, -0.01), "not measured", None),
    ],
)
def test_delta_phi_answers_on_asymmetric_and_one_sided_intervals(interval, answer, margin):
    out = delta_answer(0.02, list(interval), 0.03, "profile")
    assert out["answer"] == answer, out["line"]
    if margin is not None:
        assert f"|Δφ| < {margin:.2f} at 95%" in out["line"]
    assert out["mde"] == pytest.approx((norm.ppf(0.975) + norm.ppf(0.80)) * 0.03, rel=1e-9)
    assert delta_answer(0.02, list(interval), 0.03, "profile", blocking=["phi on its bound"])["answer"] == (
        "not measured"
    )


def test_the_mde_is_2_80_se_of_the_replicates():
    reps = rng_of(3).normal(0.1, 0.037, 200)
    se = float(np.std(reps, ddof=1))
    assert mde(se) == pytest.approx((norm.ppf(0.975) + norm.ppf(0.8)) * se, rel=1e-12)
    assert mde(None) is None


# ----------------------------------------------------------------------------------------------
# power: forked designs with a parent share < 1, several seeds
# ----------------------------------------------------------------------------------------------
def forked_design(seeds: int) -> pd.DataFrame:
    """The CPU grid's points, each (r, size, seed) one forked job whose branches are its budgets."""
    grid = S.isodepth_grid(S.CPU_SIZES, (1, 2, 4))
    design = grid.loc[grid.index.repeat(seeds)].reset_index(drop=True)
    design["seed"] = np.tile(np.arange(seeds), len(grid))
    design["parent"] = (
        "job-r" + design["r"].astype(str) + "-s" + design["size"].astype(str) + "-" + design["seed"].astype(str)
    )
    return design


@pytest.mark.parametrize("share", [0.0, 0.3, 0.8])
def test_the_simulated_noise_shares_rho_of_its_variance_within_a_forked_job(share):
    """eps = sigma (sqrt(rho) z_job + sqrt(1 - rho) z_run): variance sigma^2 per run, covariance rho sigma^2 between
    two branches of one job (one seed), none between seeds or jobs (20000 draws: MC error ~0.01)."""
    design = forked_design(2)
    clusters = noise_clusters(design)
    assert len(set(clusters)) == design.groupby(["parent", "seed"]).ngroups
    sigma, rng = 0.01, rng_of(5)
    draws = np.stack([draw_noise(rng, clusters, sigma, share) for _ in range(20000)]) / sigma
    sizes = np.bincount(clusters)
    same = np.flatnonzero(clusters == np.flatnonzero(sizes == 2)[0])  # a job with branches at both budgets
    other = np.flatnonzero(clusters != clusters[same[0]])[0]
    assert sizes.max() == 2 and len(same) == 2
    assert draws.var(axis=0).mean() == pytest.approx(1.0, abs=0.03)
    assert np.corrcoef(draws[:, same[0]], draws[:, same[1]])[0, 1] == pytest.approx(share, abs=0.03)
    assert abs(np.corrcoef(draws[:, same[0]], draws[:, other])[0, 1]) < 0.03


def test_power_at_a_parent_share_below_one_matches_the_sandwich_se():
    """The demo's forked design (each job's branches at 2-3 budgets), 2 seeds, parent share 0.9: the simulated se
    of phi against the linearised least-squares se under the clustered noise, Cov = (J'J)^-1 J' Sigma J (J'J)^-1,
    Sigma = sigma^2 (rho [same job] + (1 - rho) I) (the Huber on standardised residuals is ~95% efficient at
    Gaussian noise); 120 sweeps: MC error ~7%. Here the shared noise makes the se 1.49x the independent one, so a
    share drawn as independent noise falls outside."""
    grid = S.demo_grid((1, 2, 4))
    design = grid.loc[grid.index.repeat(2)].reset_index(drop=True)
    design["seed"] = np.tile(np.arange(2), len(grid))
    design["parent"] = (
        "job-r" + design["r"].astype(str) + "-w" + design["width"].astype(str) + "-" + design["seed"].astype(str)
    )
    sigma, share = 0.003, 0.9
    truth = Truth({**S.DEMO_DENSE, "phi": S.DEMO_PHI}, sigma, parent_share=share)
    problem = make_problem(design, truth, joint=False)
    data = law_data_from_table(problem.table.assign(L=np.exp(problem.log_L)), problem.law)
    _, J = problem.law.log_predict_and_jac(problem.starts[0], data)
    same = problem.clusters[:, None] == problem.clusters[None, :]
    Sigma = sigma**2 * (share * same + (1 - share) * np.eye(len(design)))
    bread = np.linalg.inv(J.T @ J)
    cov = bread @ J.T @ Sigma @ J @ bread
    k = problem.law.internal_names.index("phi")
    expected = math.sqrt(cov[k, k])
    independent = math.sqrt(sigma**2 * bread[k, k])  # what the same design gives with independent noise
    assert expected / independent > 1.4  # the share matters here
    out = simulate_design(design, truth, n_sims=120, seed=2, what=("phi",))["phi"]
    assert out["n_failed"] == 0
    assert 0.85 < out["se"] / expected < 1.2 and out["se"] / independent > 1.2


# ----------------------------------------------------------------------------------------------
# validate: every fold a refit on exactly its training rows; AICc with pinned and free parameters
# ----------------------------------------------------------------------------------------------
SMALL = FIXTURES / "looped_synthetic_small.csv"  # 56 runs: 3 budgets, r in {1, 2, 4, 8}, 0.5% noise


@pytest.fixture(scope="module")
def small_validation():
    table = canonical_table(pd.read_csv(SMALL), "looped")
    with np.errstate(all="ignore"):
        fit = fit_table(table, "looped")
        record = validate(table, fit, conventions=False, jobs=1)
    return table, fit, record


def test_every_fold_is_a_refit_on_its_training_rows_that_predicts_exactly_the_held_out_ones(small_validation):
    table, _, record = small_validation
    budgets = sorted(table["C"].round(-15).unique()) if "C_budget" not in table else sorted(table["C_budget"].unique())
    folds = record["folds"]
    assert [f["kind"] for f in folds] == ["full"] + ["budget"] * 3 + ["r"] * 3 and len(budgets) == 3
    r = table["r"].to_numpy()
    labels = {f["label"]: j for j, f in enumerate(folds)}
    held = {labels["r = 2"]: r == 2, labels["r = 4"]: r == 4, labels["r = 8"]: r == 8}
    C = table["C"].to_numpy()
    for j, f in enumerate(folds):
        if f["kind"] == "budget":
            held[j] = np.isclose(C, float(f["label"][4:]), rtol=0.2)
    results = [res for res in record["results"] if res["form"] == 0 and res["fold"] > 0]
    assert sorted(res["fold"] for res in results) == list(range(1, 7))  # every fold of the fit's law was done
    for res in results:
        test = held[res["fold"]]
        assert folds[res["fold"]]["n_test"] == int(test.sum()) > 0
        assert res["rows"] == np.flatnonzero(test).tolist() and res["n_train"] == int((~test).sum())
        # brute force: the multi-start fitter on the training rows alone, asked for the held-out rows
        with np.errstate(all="ignore"):
            own = fit_table(table[~test].reset_index(drop=True), "looped")
        want = law_class("looped").predict_table(own.params, table[test].reset_index(drop=True))
        np.testing.assert_allclose(res["predicted"], want, rtol=2e-4)
        assert res["params"]["phi"] == pytest.approx(own.params["phi"], abs=2e-3)
        train = table[~test].reset_index(drop=True)
        own_res = np.log(law_class("looped").predict_table(own.params, train)) - np.log(train["L"].to_numpy())
        assert res["train_rms_log"] == pytest.approx(float(np.sqrt(np.mean(own_res**2))), rel=1e-3)
        np.testing.assert_allclose(res["observed"], table["L"].to_numpy()[test])
        rel = np.asarray(res["predicted"]) / table["L"].to_numpy()[test] - 1
        assert res["held_out"]["mean_abs_rel_error"] == pytest.approx(np.abs(rel).mean(), rel=1e-9)
        assert res["held_out"]["mean_rel_error"] == pytest.approx(rel.mean(), rel=1e-9, abs=1e-15)


# the forms' free parameters: the looped law's six, less a pinned E, a k_r for each r > 1 in place of phi, one
# more exponent for the N x D term, a slope of phi in ln r (looped-logr) or in ln N_c (looped-logn)
FREE = {
    "looped": 6,
    "looped-pinned-e": 5,
    "looped-free": 5 + 3,
    "looped-nxd": 7,
    "looped-logr": 7,
    "looped-entry": 7,
    "looped-logn": 7,
}


def test_aicc_and_bic_count_free_parameters_only_and_are_recomputed_from_the_residuals(small_validation):
    table, fit, record = small_validation
    n = len(table)
    for i, form in enumerate(record["forms"]):
        if form["law"] is None:
            continue
        assert form["k"] == FREE[form["law"]], form
        full = next(res for res in record["results"] if res["form"] == i and res["fold"] == 0)
        pred = law_class(form["law"]).predict_table(full["params"], table)
        rss = float(np.sum((np.log(pred) - np.log(table["L"].to_numpy())) ** 2))
        k = FREE[form["law"]]
        info = full["information"]
        assert (info["n"], info["k"]) == (n, k) and info["rss"] == pytest.approx(rss, rel=1e-6)
        assert info["aicc"] == pytest.approx(n * math.log(rss / n) + 2 * k + 2 * k * (k + 1) / (n - k - 1), abs=1e-6)
        assert info["bic"] == pytest.approx(n * math.log(rss / n) + k * math.log(n), abs=1e-6)
        if form["law"] == "looped-pinned-e":  # pinned at the fit's E: not moved by its refit
            assert full["params"]["E"] == pytest.approx(fit.params["E"], rel=1e-12)


def test_power_on_a_runs_table_with_more_seeds_draws_each_seed_anew(tmp_path):
    """`power --table T --seeds K` on a forked runs table: K seeds a point are K independent jobs, so at a parent
    share of 1 the se of phi falls as 1 / sqrt(K) (K = 4: half the one-seed se; one seed copied four times would
    leave it unchanged). 20 sweeps each: the ratio's Monte Carlo spread is ~0.35-0.75."""
    from loopscale.analysis.power_designs import PowerRequest, power_record

    grid = S.isodepth_grid(S.CPU_SIZES, (1, 2, 4))
    path = tmp_path / "runs.csv"
    S.seeded_sweep(grid, PHI, 1, 0.004, seed=3, forked=True).to_csv(path, index=False)
    truth = Truth({**S.TRUE_DENSE, "phi": PHI}, 0.004, parent_share=1.0)
    se = {}
    for k in (1, 4):
        req = PowerRequest(table=str(path), seeds=k, sims=20, seed=5, no_menu=True, probe=False)
        design = power_record(req, truth)["designs"][0]
        assert (design["seeds"], design["n_runs"]) == (k, k * len(grid))
        se[k] = design["phi"]["se"]
    assert se[4] / se[1] < 0.8


def test_the_validation_verdict_reads_the_folds_numbers(small_validation):
    """The verdict line's numbers, recomputed from the folds' predictions: the mean over budget folds of the mean
    |L_hat / L - 1| and the worst one, the same over r folds, phi's largest move when one r is dropped; a fold is
    flagged exactly when its held-out RMS log error is over twice the refit's own (docs/design.md, "Out of
    sample")."""
    _, fit, record = small_validation
    v = record["verdict"]
    folds = record["folds"]
    full_phi = next(res for res in record["results"] if res["form"] == 0 and res["fold"] == 0)["params"]["phi"]
    by_kind = {"budget": [], "r": []}
    for res in record["results"]:
        if res["form"] == 0 and res["fold"] > 0 and res["ok"]:
            by_kind[folds[res["fold"]]["kind"]].append(res)
    for kind, key in (("budget", "budget_error"), ("r", "r_error")):
        rel = [np.asarray(res["predicted"]) / np.asarray(res["observed"]) - 1 for res in by_kind[kind]]
        assert v[key][0] == pytest.approx(np.mean([np.abs(x).mean() for x in rel]), rel=1e-9)
        assert v[key][1] == pytest.approx(max(np.abs(x).max() for x in rel), rel=1e-9)
    shifts = [abs(res["params"]["phi"] - full_phi) for res in by_kind["r"]]
    assert v["phi_shift"] == pytest.approx(max(shifts), rel=1e-12) and max(shifts) > min(shifts)
    lo, hi = record["fit"]["phi_interval"]
    assert v["half_width"] == pytest.approx((hi - lo) / 2, rel=1e-12)
    for res in by_kind["budget"] + by_kind["r"]:
        log_res = np.log(np.asarray(res["predicted"]) / np.asarray(res["observed"]))
        flagged = float(np.sqrt(np.mean(log_res**2))) > 2 * res["train_rms_log"]
        assert any(f.startswith(f"held out {folds[res['fold']]['label']}:") for f in v["flags"]) == flagged
    assert v["holds"] == (not v["flags"])


def test_the_per_r_noise_summary_pools_each_r_alone():
    """Per r (2-4 seeds a point, one r without repeats): points, replicated points, degrees of freedom, the sigma
    of log L pooled from that r's points only, sigma_L = sigma_log x the r's mean L (first order), computed here
    with pandas."""
    grid = S.isodepth_grid(S.BASELINE_SIZES)
    counts = np.where(grid["r"].to_numpy() == 8, 1, rng_of(8).choice([2, 3, 4], size=len(grid)))
    table = S.seeded_sweep(grid, PHI, counts, lambda t: 0.002 * t["r"].to_numpy() ** 0.5, seed=8)
    nf = N.noise_fit(table)
    summary = N.per_r_summary(table, nf)
    frame = table.assign(logL=np.log(table["L"]), point=nf.reps.point)
    for r, rows in frame.groupby("r"):
        s = summary[str(int(r))]
        dev = rows.groupby("point")["logL"].agg(lambda y: ((y - y.mean()) ** 2).sum())
        dof = int((rows.groupby("point").size() - 1).sum())
        assert (s["n_points"], s["dof"]) == (rows["point"].nunique(), dof)
        assert s["n_replicated_points"] == int((rows.groupby("point").size() > 1).sum())
        if r == 8:
            assert s["sigma_log"] is None and s["dof"] == 0
            continue
        assert s["sigma_log"] == pytest.approx(math.sqrt(dev.sum() / dof), rel=1e-9)
        assert s["sigma_L_nats"] == pytest.approx(s["sigma_log"] * rows["L"].mean(), rel=1e-9)
        assert s["model_sigma_log"] == pytest.approx(nf.row_sigma[table["r"].to_numpy() == r].mean(), rel=1e-9)


def test_a_points_misfit_is_shared_by_its_seeds():
    """docs/design.md, power: eps = ... + tau u_point, u_point shared by a point's seeds: seeds do not average the
    law's misfit away (a point's mean keeps tau, not tau / sqrt(seeds))."""
    points = np.repeat(np.arange(4000), 3)  # 3 seeds a point, each run its own cluster
    eps = draw_noise(rng_of(3), np.arange(len(points)), 1e-9, 0.0, points=points, misfit_log=0.01)
    by_point = eps.reshape(-1, 3)
    assert np.abs(by_point - by_point[:, :1]).max() < 1e-7  # a point's seeds share their misfit draw
    assert by_point.mean(axis=1).std() == pytest.approx(0.01, rel=0.05)  # not 0.01 / sqrt(3)


def test_each_sweeps_sigma_is_drawn_as_nu_over_chi2():
    """docs/design.md, power: each sweep's sigma scaled by f = sqrt(nu / chi2_nu) (sigma^2 ~ nu s^2 / chi2_nu):
    E f^2 = nu / (nu - 2), so a pilot's sigma on few degrees of freedom plans with a larger noise on average."""
    from loopscale.fit.pilot import scale_draw

    rng = rng_of(4)
    f2 = np.array([scale_draw(rng, 5) ** 2 for _ in range(40000)])
    assert f2.mean() == pytest.approx(5 / 3, rel=0.05)  # E[nu / chi2_nu] at nu = 5 (MC error ~0.7%)
    assert scale_draw(rng, None) == 1.0
