"""`loopscale tune`'s pure rules by hand (issue 58), no training: loopscale/launch/tune.py (the first grid's ks about
the centre, the multiplier's spelling, each refusal of a grid, the default cells, how a grid grows, the parabola's
5-lr window and the pooled noise, the cost line, the record's 4 significant digits) and loopscale/launch/tune_text.py
(the rule's table and lines: r in numeric order, the width transfer's multipliers at the reference width, each
cell's optimum and edge, the cost in minutes). Milliseconds."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from loopscale.errors import ConfigError
from loopscale.fit.lr_optimum import LrOptimum
from loopscale.launch import tune as T
from loopscale.launch.tune_rules import plain, transfer_of
from loopscale.launch.tune_text import rule_lines, rule_table


@pytest.mark.parametrize(
    "grid, ks",
    [
        (T.TuneGrid(), [-2, -1, 0, 1, 2]),
        (T.TuneGrid(points=4), [-1, 0, 1, 2]),  # an even grid: one more above the centre
        (T.TuneGrid(points=3, step=2.0, centre=0.5), [-2, -1, 0]),
        # ln 1.9 / ln sqrt 2 = 1.85: the centre is rounded to the nearest power of the step, sqrt 2^2
        (T.TuneGrid(centre=1.9), [0, 1, 2, 3, 4]),
        (T.TuneGrid(points=6, step=3.0, centre=1 / 3.0), [-3, -2, -1, 0, 1, 2]),
    ],
)
def test_the_first_grid_is_points_powers_of_the_step_about_the_centre(grid, ks):
    assert grid.first_ks() == ks


def test_a_multiplier_is_step_to_the_k_spelled_to_12_digits_and_each_bad_grid_refused():
    g = T.TuneGrid()
    assert [g.multiplier(k) for k in (-1, 0, 3)] == [0.707106781187, 1.0, 2.82842712475]
    assert repr(T.TuneGrid(step=3.0).multiplier(-2)) == "0.111111111111"
    assert (g.points, g.step, g.centre, g.max_extend) == (5, 2**0.5, 1.0, 3)
    for bad, message in [
        (dict(points=2), "points=2 must be an integer >= 3 (a parabola needs 3 lrs)"),
        (dict(points=5.0), "points=5.0 must be an integer >= 3 (a parabola needs 3 lrs)"),
        (dict(step=1.0), "step=1.0 must be > 1 (the ratio of neighbouring learning rates)"),
        (dict(centre=0.0), "centre=0.0 must be > 0 (a multiplier of the experiment's lr)"),
    ]:
        with pytest.raises(ConfigError) as err:
            T.TuneGrid(**bad)
        assert str(err.value) == message
    assert T.TuneGrid(points=3).first_ks() == [-1, 0, 1]  # 3: the smallest grid allowed


def test_the_default_cells_are_the_smallest_budget_at_its_lower_middle_width_and_the_largest_at_its_widest():
    points = ["C1e18-d64", "C1e18-d128", "C1e18-d32", "C1e18-d256", "C3e18-d512", "C1e19_2e19-d128", "C2e19-d96"]
    # 1e18's widths 32, 64, 128, 256: the lower middle is 64; the largest budget 2e19 was trained at 128 and 96
    assert T.default_cells(points) == ["C1e18-d64", "C2e19-d128"]
    assert T.default_cells(["C1e18-d64", "C1e18-d32", "C1e18-d128"]) == ["C1e18-d64", "C1e18-d128"]
    assert T.default_cells(["C5e17-s3"]) == ["C5e17-s3"]  # one point: one cell, not two copies
    with pytest.raises(ConfigError, match="sweeps no `point`"):
        T.default_cells([])
    with pytest.raises(ConfigError, match="a tuning cell needs a width"):
        T.default_cells(["C1e18-x64"])


def test_a_grid_grows_by_two_lrs_beyond_the_edge_it_missed():
    g = T.Grid("base", 2, "C1e18-d64", [], [-2, -1, 0, 1, 2])
    assert T.extend(g, -1) == [-3, -4] and g.ks == [-4, -3, -2, -1, 0, 1, 2]
    assert T.extend(g, +1) == [3, 4] and g.ks == [-4, -3, -2, -1, 0, 1, 2, 3, 4]


def _parabola(x, L):
    c2, c1, c0 = np.polyfit(x, L, 2)
    rss = float(np.sum((np.polyval([c2, c1, c0], x) - L) ** 2))
    return -c1 / (2 * c2), rss


def test_each_grid_is_fitted_on_the_5_lrs_nearest_its_lowest_loss_at_the_noise_pooled_over_grids():
    tg = T.TuneGrid()
    wide = T.Grid("base", 1, "c", [], [-3, -2, -1, 0, 1, 2, 3])
    # k=3 an outlier low; every loss within 1.2x of it (a run over that did not train: lr_optimum.failed)
    wide.L = {-3: [3.58], -2: [3.5], -1: [3.405], 0: [3.3], 1: [3.31], 2: [3.52], 3: [3.0]}
    seeds = T.Grid("base", 2, "c", [], [-2, -1, 0, 1])
    seeds.L = {-2: [3.6], -1: [3.41, 3.45], 0: [3.33], 1: [3.4]}
    three = T.Grid("base", 4, "c", [], [-1, 0, 1])
    three.L = {-1: [3.5], 0: [3.4], 1: [3.45]}
    two = T.Grid("base", 8, "c", [], [0, 1])
    two.L = {0: [3.5], 1: [3.4]}
    fits, noise = T.fit_grids([wide, seeds, three, two], tg)

    ln = math.log(2**0.5)
    # wide: the lowest loss is k = 3 (the last): the window is the last 5 ks, -1 .. 3
    xw = np.array([-1, 0, 1, 2, 3]) * ln
    _, rss_w = _parabola(xw, np.array([3.405, 3.3, 3.31, 3.52, 3.0]))
    xs = np.array([-2, -1, -1, 0, 1]) * ln
    vertex_s, rss_s = _parabola(xs, np.array([3.6, 3.41, 3.45, 3.33, 3.4]))
    # three lrs add no degrees of freedom; two lrs are not fitted
    assert noise["dof"] == 2 + 2
    assert noise["sigma_nats"] == pytest.approx(math.sqrt((rss_w + rss_s) / 4), rel=1e-9)
    assert fits[id(two)] is None and fits[id(three)] is not None
    assert fits[id(seeds)].best == pytest.approx(math.exp(vertex_s), rel=1e-9)
    assert fits[id(wide)].side == 1  # its lowest loss is the grid's top lr


def test_the_cost_line_of_a_round():
    s = T.TuneSettings(overrides=[], workers=4)
    cost = {"jobs": 10, "todo": 3, "flops": 1.23456e15, "cpu_hours": 1.6}
    assert T._cost_line(0, cost, s) == (
        "tuning grid: 3 of 10 runs to train, 1.23e+15 FLOPs, 1.60 CPU h at the probed speed, ~24 min wall on 4 "
        "worker(s)"
    )
    assert T._cost_line(2, {**cost, "cpu_hours": None}, s) == "extension 2: 3 of 10 runs to train, 1.23e+15 FLOPs"
    assert T._cost_line(1, {**cost, "cpu_hours": 0.0}, s) == (
        "extension 1: 3 of 10 runs to train, 1.23e+15 FLOPs, 0.00 CPU h at the probed speed"
    )
    assert (s.workers, s.threads_per_worker, s.runs_dir, s.probe, s.force, s.dry_run) == (
        4,
        1,
        "runs/tune",
        True,
        False,
        False,
    )
    assert T.TuneSettings(overrides=[]).workers == 2


def test_the_record_is_plain_yaml_with_numbers_to_4_significant_digits():
    value = {"a": (np.float64(1.234567), 2), "b": [np.int64(7), np.bool_(True), True], "c": 123456.0, "d": "x"}
    out = plain(value)
    assert out == {"a": [1.235, 2], "b": [7, True, True], "c": 123500.0, "d": "x"}
    assert type(out["b"][0]) is int and type(out["b"][1]) is bool and type(out["b"][2]) is bool
    assert T._value(["+optim.lr_scale=2", "seed=1"], "optim.lr_scale") == "2"
    assert T._value(["seed=1"], "optim.lr_scale") is None and T._key("~runs_dir=x") == "runs_dir"


# -- tune_text.py --------------------------------------------------------------------------------------------


def result(transfer, cached=False, trained=12):
    cells = {
        "C1e18-d64": {"best": 1.23456, "bracketed": True},
        "C1e19-d128": {"best": 0.8123, "bracketed": False},
        "C1e20-d256": {"reason": "no curve"},
    }
    rule = {
        10: {"best": 0.5, "interval": [0.4, 0.6], "heterogeneity_p": None, "cells": {"C1e18-d64": {"best": 0.5}}},
        2: {"best": 1.0512, "interval": [0.9, 1.2345], "heterogeneity_p": 0.04567, "cells": cells},
        1: {"best": None, "cells": {}},
    }
    record = {
        "rule": rule,
        "transfer": transfer,
        "cost": {"runs": 24, "flops": 3.4567e16, "runs_wall_s": 1234.0},
        "noise": {"sigma_nats": 0.0123, "dof": 9},
    }
    return T.TuneResult(Path("rule.yaml"), {}, record, cached, trained)


def test_the_rule_table_is_r_in_numeric_order_with_each_cells_optimum_and_edge():
    columns, rows = rule_table(result({"used": False, "reason": "the cells hold one width"}))
    assert columns == ["r", "multiplier", "95% interval", "cells (best, bracketed)", "cells agree (p)"]
    assert rows == [
        ["1", "-", "-", "", "-"],
        ["2", "x1.05", "[0.9, 1.23]", "C1e18-d64 x1.23; C1e19-d128 x0.812 (edge)", "0.046"],
        ["10", "x0.5", "[0.4, 0.6]", "C1e18-d64 x0.5 (edge)", "-"],
    ]


def test_a_used_width_transfer_shows_each_r_at_the_reference_width_and_says_so():
    transfer = {
        "used": True,
        "ref_width": 64.0,
        "a": {1.0: math.log(1.5), 2.0: math.log(1.25), 10.0: math.log(0.75)},
        "intervals_at_ref": {1.0: [1.2, 1.8], 2.0: [1.1, 1.4], 10.0: [0.6, 0.9]},
        "gamma": -0.51234,
        "gamma_se": 0.1234,
        "chi2": 3.456,
        "dof": 4,
    }
    columns, rows = rule_table(result(transfer))
    assert columns[1] == "multiplier at d64"
    assert [row[:3] for row in rows] == [
        ["1", "x1.5", "[1.2, 1.8]"],
        ["2", "x1.25", "[1.1, 1.4]"],
        ["10", "x0.75", "[0.6, 0.9]"],
    ]
    assert rule_lines(result(transfer)) == [
        "width transfer: ln best = a_r + gamma ln(width / 64), gamma = -0.512 +- 0.123 (chi2 3.46 on 4 dof): the "
        "rule (the multipliers above are at the reference width)",
        "24 runs, 3.46e+16 FLOPs, 20.6 min of run wall time (12 trained now); noise of one loss 0.0123 nats on 9 dof",
    ]
    unused = {**transfer, "used": False}
    assert rule_lines(result(unused, cached=True))[0].endswith(": not the rule (|gamma| < 2 se)")
    assert rule_lines(result(unused, cached=True))[1].startswith(
        "24 runs, 3.46e+16 FLOPs, 20.6 min of run wall time (answered from the rule file); "
    )
    assert len(rule_lines(result({"used": False, "reason": "one width"}))) == 1


def test_the_loop_axis_varies_optim_lr_loop_keeps_the_experiments_rule_and_keys_apart_from_the_lr_axis():
    g = T.Grid("baseline", 2, "C2.5e11-d24", ["experiment=isodepth_cpu_demo", "model.r=2", "optim=muonh"], [-1, 0])
    grid = T.TuneGrid(points=3, step=2.0, centre=1.0)  # the jobs are the Grid's own ks, -1 and 0
    jobs = T.grid_jobs([g], grid, "/tmp/tune", ["trainer.r_eval=off"], axis="loop")
    assert [job.overrides for _, _, job in jobs] == [
        [
            *g.overrides,
            "point=C2.5e11-d24",
            f"optim.lr_loop={m!r}",
            "runs_dir=/tmp/tune/C2.5e11-d24",
            "trainer.r_eval=off",
        ]
        for m in (0.5, 1.0)
    ]  # no optim.lr_rule=1: the loop is tuned at the experiment's tuned lr
    cfgs = [job.cfg for _, _, job in jobs]
    assert [c.optim.lr_loop for c in cfgs] == [0.5, 1.0] and cfgs[
        0
    ].optim.lr_rule == 3.22  # the shipped rule, r = 2 (no width transfer)
    assert cfgs[0].run_name == "baseline-r2-d24-lrloop0.5-lrt3.22"
    lr_jobs = T.grid_jobs([g], grid, "/tmp/tune", [], axis="lr")
    assert [job.cfg.optim.lr_rule for _, _, job in lr_jobs] == [1.0, 1.0]
    groups, cells = T.groups_of(["experiment=isodepth_cpu_demo", "model.r=2", "optim=muonh"], ["C2.5e11-d24"], "loop")
    assert (
        T.tune_key(groups, cells, grid, "loop")
        != T.tune_key(groups, cells, grid, "lr")
        == T.tune_key(groups, cells, grid)
    )
    with pytest.raises(ConfigError, match="loopscale tune sets optim.lr_loop itself"):
        T.groups_of(["experiment=isodepth_cpu_demo", "optim=muonh", "optim.lr_loop=0.5"], ["C2.5e11-d24"], "loop")
    with pytest.raises(ConfigError, match="axis='width' is not one of \\['loop', 'lr'\\]"):
        T.TuneSettings(["experiment=isodepth_cpu_demo"], axis="width")


def test_the_loop_rule_is_each_cells_optimum_at_its_width_to_3_digits(tmp_path):
    grids = [T.Grid("baseline", r, cell, [], [0]) for r in (1, 2) for cell in ("C1e18-d16", "C2e18-d48")]
    best = {(1, "C1e18-d16"): 0.31234, (1, "C2e18-d48"): 1.98765, (2, "C1e18-d16"): 0.25001, (2, "C2e18-d48"): 0.0456}
    fits = {id(g): LrOptimum(best[g.r, g.cell], None, 3.0, False, 0, 0.1) for g in grids}
    path = tmp_path / "rule.yaml"
    result = T._write_loop_rule(path, "mine", "baseline", grids, fits, {"cells": ["C1e18-d16", "C2e18-d48"]}, 8)
    assert result.multipliers == {1: {16: 0.312, 48: 1.99}, 2: {16: 0.25, 48: 0.0456}} and result.trained == 8
    assert result.record["axis"] == "loop" and not result.record["transfer"]["used"]
    fits[id(grids[3])] = None
    with pytest.raises(ConfigError, match="no optimum at r = 2, C2e18-d48"):
        T._write_loop_rule(path, "mine", "baseline", grids, fits, {}, 8)


def test_a_loop_cell_whose_losses_do_not_curve_upwards_writes_no_rule(tmp_path):
    """One cell a width: a grid flat within the noise (the least-squares parabola through 3.585, 3.60, 3.58, 3.60,
    3.585 curves downwards, c2 < 0) has only its lowest loss, at x1, which the lr axis would not combine either
    (`combine_optima` keeps fits with an se): refused, nothing written, where the rule used to say x1."""
    tg = T.TuneGrid()  # 5 lrs, x0.5 .. x2
    curving = T.Grid("baseline", 2, "C1e18-d16", [], tg.first_ks())
    curving.L = {k: [3.6 + 0.01 * (k - 1) ** 2 + 0.001 * (k % 2)] for k in curving.ks}  # vertex near x1.41
    flat = T.Grid("baseline", 2, "C2e18-d48", [], tg.first_ks())
    flat.L = {k: [v] for k, v in zip(flat.ks, [3.585, 3.60, 3.58, 3.60, 3.585])}
    fits, noise = T.fit_grids([curving, flat], tg)
    assert fits[id(flat)].best == 1.0 and fits[id(flat)].side == 0 and fits[id(flat)].log_se is None
    assert fits[id(curving)].log_se > 0 and noise["dof"] == 4
    path = tmp_path / "rule.yaml"
    with pytest.raises(ConfigError, match="no optimum at r = 2, C2e18-d48 \\(the losses do not curve upwards"):
        T._write_loop_rule(path, "mine", "baseline", [curving, flat], fits, {"cells": []}, 10)
    assert not path.exists()
    fits[id(curving)] = LrOptimum(1.5, None, 3.6, False, 0, None)  # a 3-lr grid: no pooled noise, no se
    with pytest.raises(ConfigError, match="no optimum at r = 2, C1e18-d16 \\(no noise estimate"):
        T._write_loop_rule(path, "mine", "baseline", [curving, flat], fits, {"cells": []}, 10)


def test_a_width_transfer_needs_one_r_with_optima_at_two_widths():
    """r = 1's optimum only at d24 and r = 2's only at d48 (the other cells flat: no se): ln best = a_r + gamma
    ln(width / 24) has 3 unknowns and 2 optima, each r's intercept absorbing its width, so no transfer (the tune
    used to end in numpy's LinAlgError after training, nothing written); with r = 1 at both widths gamma is
    r = 1's slope, ln(3 / 2) / ln 2 = 0.585."""
    grids = [T.Grid("baseline", r, cell, [], [0]) for r in (1, 2) for cell in ("C1e18-d24", "C1e18-d48")]
    best = {(1, "C1e18-d24"): 2.0, (1, "C1e18-d48"): 3.0, (2, "C1e18-d24"): 1.0, (2, "C1e18-d48"): 1.5}
    se = {(1, "C1e18-d24"): 0.1, (1, "C1e18-d48"): None, (2, "C1e18-d24"): None, (2, "C1e18-d48"): 0.2}
    fits = {id(g): LrOptimum(best[g.r, g.cell], None, 3.0, False, 0, se[g.r, g.cell]) for g in grids}
    cells = ["C1e18-d24", "C1e18-d48"]
    assert transfer_of(grids, fits, cells, 8) == {"used": False, "reason": "no r has optima at two widths"}
    fits[id(grids[1])] = LrOptimum(3.0, None, 3.0, False, 0, 0.1)
    t = transfer_of(grids, fits, cells, 8)
    assert t["gamma"] == pytest.approx(math.log(1.5) / math.log(2), rel=1e-9) and t["dof"] == 0
    assert t["a"][2.0] == pytest.approx(math.log(1.5) - t["gamma"] * math.log(2), rel=1e-9)


def test_the_loop_axis_default_cells_span_every_width_the_experiment_trains():
    """The loop rule is read between its tuned widths and never past them: its default cells are the smallest width
    at the smallest budget that trains it and the largest at the largest budget that trains it. On the CPU demo
    (widths 16-48) the lr axis' cells, d24 and d48, would leave d16 refused by every later sweep."""
    points = ["C1e18-d64", "C1e18-d128", "C1e18-d32", "C1e18-d256", "C3e18-d512", "C1e19_2e19-d128", "C2e19-d96"]
    assert T.default_cells(points, "loop") == ["C1e18-d32", "C3e18-d512"]
    assert T.default_cells(["C2e18-d16", "C1e18-d32", "C4e18-d16"], "loop") == ["C2e18-d16", "C1e18-d32"]
    assert T.default_cells(["C5e17-s3"], "loop") == ["C5e17-s3"]
    _, cells = T.groups_of(["experiment=isodepth_cpu_demo", "model.r=2"], None, "loop")
    assert cells == ["C2.5e11-d16", "C5e11-d48"]
    assert T.groups_of(["experiment=isodepth_cpu_demo", "model.r=2"], None, "lr")[1] == ["C2.5e11-d24", "C5e11-d48"]


def test_a_paper_size_cell_is_keyed_by_its_d_model_as_the_experiment_reads_its_rules(tmp_path, monkeypatch):
    """The rules are read at `${model.d_model}`; a paper-grid cell 'C1e18-s6' trains d_model 384 (64 s rounded up
    to 128). The loop rule was keyed by s (6, 10), so d_model 512 was refused as 'not at 512', and the lr axis'
    width transfer took s as its reference width: (640 / 6)^gamma where (640 / 384)^gamma was measured."""
    from loopscale.config.lr_rule import loop_multiplier, rule_file

    assert [T.cell_width([w]) for w in ("d24", "s6", "s10", "s34")] == [24, 384, 640, 2176]
    cells = ["C1e18-s6", "C1e19-s10"]
    grids = [T.Grid("baseline", r, cell, [], [0]) for r in (1, 2) for cell in cells]
    best = {(1, cells[0]): 2.0, (1, cells[1]): 1.0, (2, cells[0]): 1.5, (2, cells[1]): 0.75}
    fits = {id(g): LrOptimum(best[g.r, g.cell], None, 3.0, False, 0, 0.05) for g in grids}
    t = transfer_of(grids, fits, cells, 8)
    assert t["ref_width"] == 384 and t["gamma"] == pytest.approx(math.log(0.5) / math.log(640 / 384), rel=1e-9)
    conf = tmp_path / "conf"
    (conf / "experiment").mkdir(parents=True)
    (conf / "experiment" / "mine.yaml").write_text("# @package _global_\n")
    monkeypatch.setenv("LOOPSCALE_CONFIG_PATH", str(conf))
    result = T._write_loop_rule(rule_file("mine"), "mine", "baseline", grids, fits, {"cells": cells}, 4)
    assert result.multipliers == {1: {384: 2.0, 640: 1.0}, 2: {384: 1.5, 640: 0.75}}
    s = math.log(512 / 384) / math.log(640 / 384)  # d_model 512 = s8, between the tuned widths
    assert loop_multiplier("mine", "baseline", 2, 512) == float(f"{1.5 * 0.5**s:.3g}") == 1.02  # 1.5 x 0.5^0.563


def test_an_lr_tune_that_moves_the_lr_says_the_loop_rule_was_tuned_at_the_old_one():
    """The loop's optima are measured at the experiment's tuned lr and the loop rule records that lr rule
    (`loop.lr_rule`); a new lr rule leaves the `loop:` block as it was, so the lr tune says so (and sweeps refuse
    it) when the recipe has one and its multipliers (3 digits) or width transfer (4) moved; silent when they did
    not, or when the recipe has no loop rule."""
    from loopscale.launch.tune_rules import stale_loop_note

    tuned_at = {"multipliers": {1: 7.71, 2: 7.01}, "transfer": {"width_exponent": -0.8, "ref_width": 24.0}}
    loop = {"multipliers": {"baseline": {2: {16: 0.5, 48: 0.25}}}, "lr_rule": {"baseline": tuned_at}}

    def file(multipliers, transfer):
        rule = {"multipliers": {"baseline": multipliers, "hyper": {2: 3.0}}, "loop": loop}
        return {**rule, "transfer": {"baseline": transfer}} if transfer else rule

    scaling = {"width_exponent": -0.80001, "ref_width": 24}
    assert stale_loop_note(file({1: 7.7149, 2: 7.0111}, scaling), "demo", "baseline") is None  # as written
    note = stale_loop_note(file({1: 7.71, 2: 6.5}, scaling), "demo", "baseline")
    assert note.startswith("note: recipe baseline's loop rule") and note.endswith(
        "rerun `loopscale tune experiment=demo model.recipe=baseline --axis loop`"
    )
    assert stale_loop_note(file({1: 7.71, 2: 7.01}, None), "demo", "baseline") == note  # the transfer dropped
    assert stale_loop_note(file({1: 7.71, 2: 6.5}, None), "demo", "hyper") is None  # no loop rule of its own
    assert stale_loop_note({}, "demo", "baseline") is None  # no file yet


BOTH_RULES = """\
# @package _global_
defaults:
  - isodepth_cpu_demo
  - override /optim: muonh  # the loop's own lr is a MuonH group (the demo trains AdamW)
sweep: both
optim:
  lr_rule: ${ls.lr_rule:both,${ls.recipe:${model}},${model.r},${model.d_model}}
  lr_loop: ${ls.lr_loop_rule:both,${ls.recipe:${model}},${model.r},${model.d_model}}
"""


def test_an_experiment_reading_both_rules_tunes_its_lr_at_lr_loop_1_and_its_loop_only_after_its_lr(
    tmp_path, monkeypatch, capsys
):
    """The lr axis holds a loop rule the experiment reads at lr_loop = 1, before the loop rule exists and after
    (the loop rule is tuned at the tuned lr, after it); an lr_loop given as a number is kept. The loop axis before
    the lr rule exists: one line, exit 2, saying to tune the lr axis first."""
    from loopscale.cli import main as cli_main
    from loopscale.config.lr_rule import rule_file, write_loop_rule, write_rule

    conf = tmp_path / "conf"
    (conf / "experiment").mkdir(parents=True)
    (conf / "experiment" / "both.yaml").write_text(BOTH_RULES)
    monkeypatch.setenv("LOOPSCALE_CONFIG_PATH", str(conf))
    tune = ["tune", "experiment=both", "model.r=2", "--cells", "C2.5e11-d24", "--points", "3", "--dry-run"]
    tune += ["--no-probe", "--runs-dir", str(tmp_path / "runs")]
    assert cli_main([*tune, "--axis", "loop"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("loopscale tune: error: experiment both reads its lr rule from")
    assert "tune it with `loopscale tune experiment=both model.recipe=baseline` (the lr axis" in err
    assert cli_main(tune) == 0
    assert "tuning grid: 3 of 3 runs to train" in capsys.readouterr().out

    ((base, cfg),) = T.groups_of(["experiment=both", "model.r=2"], ["C2.5e11-d24"], "lr")[0]
    assert base[-1] == "optim.lr_loop=1.0" and cfg.optim.lr_loop == 1.0 and cfg.optim.lr_rule == 1.0
    write_rule(rule_file("both"), "both", "baseline", {2: 2.0}, {"cells": []})
    write_loop_rule(rule_file("both"), "both", "baseline", {2: {24: 0.25}}, {})
    ((_, cfg),) = T.groups_of(["experiment=both", "model.r=2"], ["C2.5e11-d24"], "lr")[0]
    assert cfg.optim.lr_loop == 1.0  # not the loop rule's 0.25: it was tuned at the lr this tune replaces
    ((base, cfg),) = T.groups_of(["experiment=both", "model.r=2", "optim.lr_loop=0.5"], ["C2.5e11-d24"], "lr")[0]
    assert cfg.optim.lr_loop == 0.5 and "optim.lr_loop=1.0" not in base
    ((_, cfg),) = T.groups_of(["experiment=both", "model.r=2"], ["C2.5e11-d24"], "loop")[0]
    assert cfg.optim.lr_rule == 2.0 and cfg.optim.lr_loop == 1.0


def test_a_tuning_run_is_planned_at_the_datas_vocabulary_as_it_trains_so_a_warmup_frac_reads_back():
    """A finished tuning run is compared with the config it would train (`job_loss`); a warmup_frac's warmup is a
    share of the run's steps, which depend on the vocabulary through the head's FLOPs. Planned at the model's
    compose-time vocabulary instead of the data's 512 (what the run trains at), r = 2 at C2.5e11-d24 gave 13 warmup
    steps against the 18 the run trained with, and every AdamW tune stopped at its first finished run."""
    g = T.Grid("baseline", 2, "C2.5e11-d24", ["experiment=isodepth_cpu_demo", "model.r=2", "optim=adamw"], [0])
    ((_, _, job),) = T.grid_jobs([g], T.TuneGrid(), "/tmp/tune", [], axis="lr")
    (branch,) = T.points_of(job.cfg)
    # 354 whole batches of 16 x 64 tokens fit in 2.5e11 FLOPs (the run trained
    # 354 steps); 5% of them, rounded, is the shared warmup
    assert branch.budget.compute_flops == 2.5e11 and branch.optim.warmup_steps == round(0.05 * 354) == 18
