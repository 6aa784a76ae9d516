"""A run that did not train is no point of an lr basin (issue 54): loopscale/fit/lr_optimum.py `failed` (over 1.2x the
grid's lowest loss, or not finite) and `bounded_by_failure` (a grid whose edge borders failed lrs is bracketed there;
a vertex at or past the first failed lr is clipped to the last lr that trained), and loopscale/launch/tune.py
`fit_grids` leaving those runs out of the window and the pooled noise, as huginn's sandwich block at r = 1 needed
(its x4 and x5.66 at 5.19 nats, 1.45x its best: they inflated the pooled noise to 0.18 nats). No training."""

from __future__ import annotations

import math

import numpy as np
import pytest

from loopscale.fit.lr_optimum import (
    FAILED_RATIO,
    LrOptimum,
    away_from_failure,
    bounded_by_failure,
    combine_optima,
    failed,
    parabola_optimum,
)
from loopscale.launch import tune as T
from loopscale.launch.tune_rules import loop_multipliers, record_of
from loopscale.launch.tune_text import rule_table

LN = math.log(2**0.5)


def test_a_run_failed_over_1_2x_the_lowest_loss_or_not_finite_and_at_1_2x_it_trained():
    assert FAILED_RATIO == 1.2
    at = 3.0 * FAILED_RATIO
    L = np.array([3.0, at, np.nextafter(at, np.inf), np.nan, np.inf, 3.3])
    assert failed(L).tolist() == [False, False, True, True, True, False]
    assert failed(np.array([np.nan, np.nan])).tolist() == [True, True]


def fit(best: float, side: int) -> LrOptimum:
    return LrOptimum(best, (best / 2, best * 2), 3.5, False, side, 0.1)


def test_an_edge_bordering_failed_lrs_is_bracketed_and_a_vertex_past_them_is_clipped_to_the_last_lr_that_trained():
    x = np.array([-2.0, -1.0, 0.0]) * LN  # trained: x0.5, x0.707, x1
    above = np.array([1.0, 2.0]) * LN  # failed: x1.41, x2
    # the lowest loss at the top trained lr, the vertex short of x1.41: bracketed, the vertex kept
    kept = bounded_by_failure(fit(1.2, 1), x, above)
    assert kept == fit(1.2, 1).__class__(1.2, (0.6, 2.4), 3.5, False, 0, 0.1)
    # the vertex at the first failed lr exactly: clipped to x1, no interval, the reason said
    clipped = bounded_by_failure(fit(math.exp(LN), 1), x, above)
    assert (clipped.best, clipped.interval, clipped.log_se, clipped.side, clipped.at_edge) == (1.0, None, None, 0, True)
    assert clipped.reason == "runs fail from x1.41: the best is the highest lr that trained"
    # a bracketed fit inside the trained lrs is left as it is
    assert bounded_by_failure(fit(0.7, 0), x, above) == fit(0.7, 0)
    # failures below, the lowest loss at the bottom trained lr: the same on that side
    below = np.array([-4.0, -3.0]) * LN  # x0.25, x0.354
    assert bounded_by_failure(fit(0.45, -1), x, below).side == 0
    low = bounded_by_failure(fit(0.3, -1), x, below)
    assert (low.best, low.reason) == (
        pytest.approx(0.5),
        "runs fail from x0.354: the best is the lowest lr that trained",
    )
    # an edge with no failures beyond it still grows the grid there (failures on the other side do not bracket it)
    assert bounded_by_failure(fit(1.5, 1), x, below) == fit(1.5, 1)
    assert bounded_by_failure(fit(1.5, 1), x, np.array([])) == fit(1.5, 1)


def huginn_like() -> tuple[T.Grid, T.Grid]:
    """Two grids: one whose x4, x5.66 never trained (5.19 against 3.59), one healthy; 7 and 5 lrs."""
    sick = T.Grid("huginn", 1, "C2.5e11-d24", [], [-1, 0, 1, 2, 3, 4, 5])
    sick.L = {k: [v] for k, v in zip(sick.ks, [3.786, 3.688, 3.629, 3.589, 3.889, 5.188, 5.189])}
    well = T.Grid("huginn", 2, "C2.5e11-d24", [], [1, 2, 3, 4, 5])
    well.L = {k: [v] for k, v in zip(well.ks, [3.55, 3.51, 3.50, 3.505, 3.52])}
    return sick, well


def rss_of(x, L) -> float:
    return float(np.sum((np.polyval(np.polyfit(x, L, 2), x) - np.asarray(L)) ** 2))


def rss_sick(x) -> float:
    return rss_of(x, [3.786, 3.688, 3.629, 3.589, 3.889])


def test_the_runs_that_did_not_train_leave_the_window_and_the_pooled_noise():
    tg = T.TuneGrid()
    sick, well = huginn_like()
    fits, noise = T.fit_grids([sick, well], tg)
    # the sick grid's window: its 5 trained lrs x0.707 .. x2.83 (k -1 .. 3), not the 5 nearest its lowest (k 0 .. 4)
    x_sick = np.log([tg.multiplier(k) for k in range(-1, 4)])  # the multipliers as spelled (12 digits)
    x_well = np.log([tg.multiplier(k) for k in range(1, 6)])
    rss = rss_sick(x_sick) + rss_of(x_well, [3.55, 3.51, 3.50, 3.505, 3.52])
    assert noise == {"sigma_nats": pytest.approx(math.sqrt(rss / 4), rel=1e-9), "dof": 4}
    # the window of the 5 lrs nearest the lowest loss, failed runs and all (before): the noise 3x as large
    x_old, L_old = np.arange(0, 5) * LN, [3.688, 3.629, 3.589, 3.889, 5.188]
    rss_old = rss_of(x_old, L_old)
    assert math.sqrt((rss_old + rss - rss_sick(x_sick)) / 4) > 3 * noise["sigma_nats"]
    expect = parabola_optimum(x_sick, np.array([3.786, 3.688, 3.629, 3.589, 3.889]), noise["sigma_nats"], 4)
    assert fits[id(sick)] == expect and fits[id(sick)].side == 0
    # the record lists them, the table says so
    record = record_of([sick, well], fits, noise, T.TuneSettings(["experiment=x"]), ["C2.5e11-d24"], "k", [], [], 0.0)
    cell = record["rule"][1]["cells"]["C2.5e11-d24"]
    assert cell["failed"] == [4.0, 5.657] and record["rule"][2]["cells"]["C2.5e11-d24"]["failed"] == []


def test_a_grid_whose_loss_falls_up_to_the_lrs_that_fail_is_not_grown_into_them():
    """The lowest trained loss at the top trained lr, every higher lr failed: no extension round (it would only
    train more failures), the best clipped to that lr when the parabola's vertex lies past the first failure."""
    tg = T.TuneGrid()
    g = T.Grid("huginn", 1, "C2.5e11-d48", [], [-1, 0, 1, 2, 3, 4, 5])
    g.L = {k: [v] for k, v in zip(g.ks, [4.146, 3.99, 3.878, 5.199, 5.201, 5.201, 5.201])}
    fits, noise = T.fit_grids([g], tg)
    f = fits[id(g)]
    assert f.side == 0 and f.best == pytest.approx(2**0.5) and f.interval is None and f.log_se is None
    assert f.reason == "runs fail from x2: the best is the highest lr that trained"
    record = record_of([g], fits, noise, T.TuneSettings(["experiment=x"]), ["C2.5e11-d48"], "k", [], [], 0.0)
    headers, rows = rule_table(T.TuneResult(None, {}, record, False))
    assert rows[0][3] == "C2.5e11-d48 x1.41 (x2, x2.83, x4, x5.66 did not train)"


def test_a_grid_with_fewer_than_three_lrs_that_trained_grows_away_from_the_failures():
    """huginn's r = 1 at d48 on its first grid: x1.41 trained, x2-x5.66 failed; no parabola, but the grid must grow
    downwards (it then trained x1 and x0.707, docs/results.md), not stop without an optimum."""
    tg = T.TuneGrid(centre=2.828)
    g = T.Grid("huginn", 1, "C2.5e11-d48", [], tg.first_ks())
    g.L = {k: [v] for k, v in zip(g.ks, [3.878, 5.199, 5.201, 5.201, 5.201])}
    fits, _ = T.fit_grids([g], tg)
    f = fits[id(g)]
    assert (f.side, f.best, f.interval, f.log_se) == (-1, pytest.approx(2**0.5), None, None)
    assert f.reason == "1 lr(s) trained: the grid grows away from the lrs that failed"
    assert away_from_failure(np.log([1.0, 2.0]), np.array([3.5, 3.4]), np.log([0.5])).side == 1  # failed below
    assert away_from_failure(np.log([1.0]), np.array([3.5]), np.log([0.5, 2.0])) is None  # failed on both sides
    assert away_from_failure(np.log([1.0]), np.array([3.5]), np.array([])) is None  # nothing failed: no parabola


def test_a_rule_whose_only_cell_stops_short_of_failed_lrs_takes_its_last_trained_lr_without_an_interval(tmp_path):
    """One cell at r = 1, its vertex past the first failed lr: the rule is that cell's last trained lr (it used to
    write nothing, saying no cell's losses curve upwards); the loop axis reads it as that width's optimum."""
    tg = T.TuneGrid()
    g = T.Grid("huginn", 1, "C2.5e11-d48", [], [-1, 0, 1, 2, 3])
    g.L = {k: [v] for k, v in zip(g.ks, [4.146, 3.99, 3.878, 5.199, 5.201])}
    fits, noise = T.fit_grids([g], tg)
    assert fits[id(g)].bounded and fits[id(g)].log_se is None
    record = record_of([g], fits, noise, T.TuneSettings(["experiment=x"]), ["C2.5e11-d48"], "k", [], [], 0.0)
    rule = record["rule"][1]
    assert (rule["best"], rule["interval"], rule["cells_used"]) == (1.414, None, 1)
    assert rule["reason"] == "every cell's best is the last lr that trained before lrs that failed: no interval"
    assert loop_multipliers([g], fits, tmp_path / "rule.yaml") == {1: {48: 1.41}}
    # a cell with an se beside it: the combination is that cell's alone, as before
    f = parabola_optimum(np.log([1.0, 1.41, 2.0]), np.array([3.6, 3.5, 3.55]), 0.01, 8)
    assert combine_optima([fits[id(g)], f], 8)["best"] == pytest.approx(f.best, rel=1e-9)


def test_with_seeds_the_window_is_five_lrs_with_every_run_at_them_and_a_failed_seed_leaves_alone():
    """7 lrs x 2 seeds: the window is the 5 lrs nearest the lowest mean loss, 10 runs (it was 5 runs: 3 lrs); one
    seed over 1.2x the lowest run is left out and its lr listed, the other seed at that lr kept."""
    tg = T.TuneGrid()
    g = T.Grid("baseline", 2, "C1e18-d24", [], [-3, -2, -1, 0, 1, 2, 3])
    base = {-3: 3.70, -2: 3.58, -1: 3.52, 0: 3.50, 1: 3.51, 2: 3.56, 3: 3.65}
    g.L = {k: [v - 0.002, v + 0.002] for k, v in base.items()}
    g.L[-1] = [3.52, 4.40]  # one seed of x0.707 did not train (4.40 > 1.2 x 3.498)
    fits, noise = T.fit_grids([g], tg)
    x = np.log([tg.multiplier(k) for k in (-2, -1, 0, 0, 1, 1, 2, 2)])
    x = np.concatenate([x[:1], x[:1], x[1:]])  # -2 twice, -1 once (its other seed failed), then 0, 1, 2 twice
    L = [3.578, 3.582, 3.52, 3.498, 3.502, 3.508, 3.512, 3.558, 3.562]
    assert noise["dof"] == 9 - 3
    assert noise["sigma_nats"] == pytest.approx(math.sqrt(rss_of(x, L) / 6), rel=1e-9)
    record = record_of([g], fits, noise, T.TuneSettings(["experiment=x"]), ["C1e18-d24"], "k", [], [], 0.0)
    assert record["rule"][2]["cells"]["C1e18-d24"]["failed"] == [0.7071]
