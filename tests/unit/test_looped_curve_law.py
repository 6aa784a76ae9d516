"""The looped law at every evaluation of a loss curve (issue 55, `looped-curve`): its schedule features read
from a curves table, its Jacobian, the rows it fits (after the warmup, a forked parent's stable phase once),
phi recovered from curves drawn from it, and the cluster-robust interval's ingredients."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from loopscale.data.heldout import curve_steps
from loopscale.errors import InputError
from loopscale.fit.cluster_se import cluster_robust_cov, residual_rho
from loopscale.fit.curves.synthetic import looped_curves, wsd_multipliers
from loopscale.fit.fit_table import fit_table
from loopscale.fit.laws.looped_curve import LoopedCurve, schedule_features
from loopscale.fit.laws.registry import make_law
from loopscale.fit.objective import Loss
from loopscale.fit.optimize import fit_law
from loopscale.fit.runs_table import canonical_table
from loopscale.fit.synthetic import DEMO_BATCH_TOKENS, DEMO_DENSE, demo_grid
from support.curve_laws import assert_jacobian_exact

TRUTH = {**DEMO_DENSE, "phi": 0.75, "K": 0.3}


def evaluated(points: int):
    """Where loopscale evaluates a run's curve: `points` log-spaced and regular, and the schedule's corners."""
    return lambda steps, warmup, cooldown: curve_steps(steps, points, (warmup, cooldown), cooldown)


def test_schedule_features_are_the_lr_area_and_the_annealing_area():
    steps, warmup = 100, 2
    mult = wsd_multipliers(steps, warmup)
    at = np.array([2, 10, 80, 81, 90, 100])
    table = pd.DataFrame({"run": "a", "step": at, "tokens": 64 * at, "lr_multiplier": mult[at]})
    knots = pd.DataFrame({"run": "a", "step": [0, 1], "tokens": [0, 64], "lr_multiplier": mult[[0, 1]]})
    S1, S2 = schedule_features(pd.concat([knots, table], ignore_index=True), decay=0.9)
    np.testing.assert_allclose(S1[2:], 64 * np.cumsum(mult)[at], rtol=1e-12)  # tokens weighted by the lr
    m, area = 0.0, []
    for k in range(steps + 1):
        m = 0.9 * m + ((mult[k - 1] - mult[k]) if k > warmup else 0.0)
        area.append((area[-1] if area else 0.0) + 0.1 * m)
    np.testing.assert_allclose(S2[2:], np.array(area)[at], rtol=1e-10, atol=1e-15)
    assert S2[2:4].tolist() == [0.0, 0.0] and S2[-1] > S2[-2] > 0  # no anneal before the cooldown


def test_jacobian_with_an_anneal_matches_finite_differences():
    table = looped_curves(demo_grid().head(6), make_law("looped-curve"), TRUTH, DEMO_BATCH_TOKENS, evaluated(10))
    data = LoopedCurve.data_from_table(canonical_table(table.rename(columns={"val_loss": "L"}), "looped-curve"))
    assert data.extra["S2"].max() > 0.1
    law = make_law("looped-curve", data.r)
    theta = law.from_user(TRUTH) + 0.01
    assert_jacobian_exact(law, theta, data)


def test_rows_fitted_start_after_the_warmup_and_count_a_parents_stable_phase_once():
    rows = pd.DataFrame(
        {
            "run": ["a"] * 4 + ["b"] * 4,
            "parent": ["p"] * 8,
            "step": [1, 2, 4, 6] * 2,
            "lr_multiplier": [0.5, 1.0, 1.0, 0.5, 0.5, 1.0, 1.0, 1.0],
            "from_parent": [True, True, True, False, True, True, True, False],
        }
    )
    kept = LoopedCurve.rows_to_fit(rows)
    assert kept[["run", "step"]].values.tolist() == [["a", 2], ["a", 4], ["a", 6], ["b", 6]]


def test_phi_recovered_from_curves_and_their_residuals_correlated_along_each_curve():
    table = looped_curves(
        demo_grid(), make_law("looped-curve"), TRUTH, DEMO_BATCH_TOKENS, evaluated(8), eval_sigma=0.002, rho=0.6, seed=2
    )
    canon = canonical_table(table.rename(columns={"val_loss": "L"}), "looped-curve")
    assert len(canon) < len(table)  # the warmup's rows are the schedule's, not fitted
    result = fit_table(canon, "looped-curve", noise="off", profile=False, n_refine=4)
    assert result.params["phi"] == pytest.approx(0.75, abs=0.05)
    assert result.params["K"] == pytest.approx(0.3, rel=0.2) and result.params["lambda"] == 0.0
    law = make_law("looped-curve", canon["r"].to_numpy())
    data = law.data_from_table(canon)
    _, state = fit_law(data, law, Loss("l2"), 0, n_refine=2)
    res = law.log_predict(state.best.theta, data) - data.log_L
    # the AR(1) drawn along each curve (0.6; centring each short curve on its mean biases the estimate down)
    assert residual_rho(res, canon["run"], canon["step"]) > 0.15
    by_run = cluster_robust_cov(law, state.best.theta, data, canon["run"])
    by_row = cluster_robust_cov(law, state.best.theta, data, np.arange(len(canon)))
    i = law.internal_names.index("phi")
    assert by_run[i, i] > by_row[i, i]  # correlated points inform less than independent ones would


@pytest.fixture(scope="module")
def curve_fit():
    """A looped-curve fit of curves drawn from it, with the canonical table it fitted."""
    table = looped_curves(demo_grid(), make_law("looped-curve"), TRUTH, DEMO_BATCH_TOKENS, evaluated(6), seed=4)
    canon = canonical_table(table.rename(columns={"val_loss": "L"}), "looped-curve")
    return canon, fit_table(canon, "looped-curve", noise="off", profile=False, n_refine=2)


def test_a_curve_fit_is_drawn_as_curves(curve_fit):
    from loopscale.plots.registry import figures

    canon, fit = curve_fit
    drawn = figures(canon, fit)
    assert list(drawn) == ["loss_curves"] and len(drawn["loss_curves"].axes) == 4  # one panel per r


def test_a_runs_evaluations_are_one_draw_of_noise():
    """The profile's scale sums each dependence group's residuals (noise.dependence_groups): a curves table's
    groups are its runs (a forked branch's, its parent's), so phi's interval counts curves, not evaluations."""
    from loopscale.fit.noise import draw_groups

    table = pd.DataFrame({"run": ["a", "a", "b", "b", "c"], "step": [1, 2, 1, 2, 1], "parent": [None] * 4 + ["p"]})
    table["parent"] = table["parent"].astype(object)
    assert draw_groups(table.drop(columns="parent")).tolist() == [0, 0, 1, 1, 2]
    forked = table.assign(parent=["p", "p", "q", "q", "p"])
    assert draw_groups(forked).tolist() == [0, 0, 1, 1, 0]  # branches of one parent: one draw
    assert draw_groups(table.drop(columns=["parent", "step"])) is None  # a runs table: each row its own run


def test_advice_and_power_read_a_curve_fit_at_a_wsd_runs_end(curve_fit):
    from loopscale.analysis.advise.law_sets import fit_law_sets
    from loopscale.fit.pilot import truth_from_fit

    _, fit = curve_fit
    p = fit.params
    point, _, _ = fit_law_sets(fit, [1, 4])
    assert point.E[0] == pytest.approx(p["E"] - p["K"]) and point.B[0] == pytest.approx(p["B"] * 0.9 ** -p["beta"])
    assert point.multiplier[4][0] == pytest.approx(4 ** p["phi"])
    truth = truth_from_fit(fit, sigma_log=0.01)
    assert truth.params["E"] == pytest.approx(p["E"] - p["K"]) and truth.params["phi"] == p["phi"]


def test_validate_holds_out_whole_runs_and_every_cooldowns_end():
    from loopscale.fit.validation.folds import FINAL, RUN, curve_folds

    table = pd.DataFrame({"run": np.repeat([f"r{i}" for i in range(7)], 4), "step": np.tile([3, 1, 9, 5], 7)})
    folds = curve_folds(table, n_params=3)
    runs = [f for f in folds if f.kind == RUN]
    assert len(runs) == 5 and all(f.reason is None for f in runs)
    held = np.sum([f.test for f in runs], axis=0)
    assert (held == 1).all()  # every row in exactly one run fold
    for f in runs:  # a run is held out whole
        assert table[f.test].groupby("run").size().eq(4).all()
    (final,) = [f for f in folds if f.kind == FINAL]
    assert final.test.sum() == 7 and (table[final.test]["step"] == 9).all()


def test_the_notebooks_curve_figure_reads_the_fits_own_table(curve_fit, tmp_path):
    from loopscale.plots.loss_curves import fit_curves_figure

    canon, fit = curve_fit
    canon.to_csv(tmp_path / "runs_curves.csv", index=False)
    fit.input["path"] = str(tmp_path / "runs_curves.csv")
    fig = fit_curves_figure(fit)
    first = fig.axes[0]
    assert (
        first.get_title().startswith("r = 1")
        and len(first.get_lines()) == (canon["r"] == 1).groupby(canon["run"]).any().sum()
    )  # one fitted line per r = 1 run


def forked_curves() -> pd.DataFrame:
    """Two parent jobs (r = 1 and 2; wsd, 100 steps, 10 tokens a step, no warmup), each with two branches: `short`
    cools down over steps 40-50, `long` over 80-100; each branch's rows repeat its parent's stable-phase evaluations
    up to its fork."""
    rows = []
    for r, tag in ((1, ""), (2, "-r2")):
        for run, fork, end in (("short", 40, 50), ("long", 80, 100)):
            stable = [s for s in (1, 5, 10, 20, 30, 40, 60, 80) if s <= fork]
            for s in stable + [fork + (end - fork) // 2, end]:
                lr = 1.0 if s <= fork else 1 - (s - fork) / (end - fork)
                rows.append({"run": run + tag, "parent": "p" + tag, "step": s, "tokens": 10 * s, "lr_multiplier": lr,
                             "r": r, "N_once": 1e5, "N_rec": 1e5, "D": 10 * end, "L": 4.0 - 0.01 * s,
                             "from_parent": s <= fork})  # fmt: skip
    return pd.DataFrame(rows)


def test_a_fitted_rows_schedule_terms_are_summed_over_its_runs_whole_schedule():
    """A later branch's stable-phase rows up to the first branch's fork are fitted once, in the first branch; its
    own rows' S1 and S2 are still its whole run's (the sum from step 0), not a schedule read from the rows kept."""
    raw = forked_curves()
    table = canonical_table(raw, "looped-curve")
    assert table.loc[table["run"] == "long", "step"].tolist() == [60, 80, 90, 100]  # 1-40 fitted in `short`
    data = LoopedCurve.data_from_table(table)
    alone = raw[raw["run"] == "long"].reset_index(drop=True)  # the long branch's every row
    S1, S2 = schedule_features(alone, decay=0.0)
    at = alone["step"].isin([60, 80, 90, 100]).to_numpy()
    long = (table["run"] == "long").to_numpy()
    np.testing.assert_allclose(data.D[long], S1[at], rtol=1e-12)  # S1 at step 60 = 600 tokens, not ~300
    np.testing.assert_allclose(data.extra["S2"][long], S2[at], atol=1e-12)
    # written out: 10 tokens a step at lr 1 to step 80, then lr 1 - (s - 80) / 20; S1 = sum of lr x tokens, and with
    # lambda = 0 S2 = the peak lr minus the lr now
    np.testing.assert_allclose(data.D[long], [600.0, 800.0, 872.5, 895.0], rtol=1e-12)
    np.testing.assert_allclose(data.extra["S2"][long], [0.0, 0.0, 0.5, 1.0], atol=1e-12)
    # the rows kept are the same read twice (validate reads rows_to_fit, then canonical_table does again)
    again = LoopedCurve.data_from_table(canonical_table(LoopedCurve.rows_to_fit(raw), "looped-curve"))
    np.testing.assert_allclose(again.D, data.D, rtol=1e-12)


def test_curve_start_drops_early_evaluations_and_leaves_the_rest_of_the_schedule_as_it_was():
    from loopscale.fit.laws.looped_curve import rows_from_start

    table = canonical_table(forked_curves(), "looped-curve")
    keep = rows_from_start(table, 0.25)  # `short`: steps >= 12.5; `long`: >= 25
    kept = table.loc[keep].reset_index(drop=True)
    assert kept.loc[kept["parent"] == "p", ["run", "step"]].values.tolist() == [
        ["short", 20], ["short", 30], ["short", 40], ["short", 45], ["short", 50],
        ["long", 60], ["long", 80], ["long", 90], ["long", 100],
    ]  # fmt: skip
    full, dropped = LoopedCurve.data_from_table(table), LoopedCurve.data_from_table(kept)
    np.testing.assert_allclose(dropped.D, full.D[keep], rtol=1e-12)  # S1 of a kept row: from step 0 all the same
    np.testing.assert_allclose(dropped.extra["S2"], full.extra["S2"][keep], atol=1e-12)
    assert rows_from_start(table, 0.0).all()
    # a parent's shared row is kept once, under whichever branch comes first: which rows survive the start must not
    # depend on that order (the shortest branch's start decides for the parent's rows)
    backwards = canonical_table(forked_curves().iloc[::-1].reset_index(drop=True), "looped-curve")
    kept_back = backwards.loc[rows_from_start(backwards, 0.25)]
    assert sorted(map(tuple, kept_back[["parent", "step"]].values.tolist())) == sorted(
        map(tuple, kept[["parent", "step"]].values.tolist())
    )
    with pytest.raises(InputError, match="curve-start"):
        rows_from_start(table, 1.0)
