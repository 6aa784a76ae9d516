"""The lr rule `loopscale tune` writes: how it combines one r's cells (loopscale/fit/lr_optimum.py `combine_optima`;
docs/operations.md, "Tuning the learning rate": ln(best) weighted by 1 / se^2, a t interval at the pooled noise's
degrees of freedom, Cochran's Q on cells - 1 degrees of freedom for whether the cells agree, computed here from their
formulas), and how a sweep reads it (loopscale/config/lr_rule.py: a recipe or r the rule was not tuned for is an
error, never a silent multiplier of 1)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from loopscale.config.lr_rule import loop_multiplier, multiplier, read_rule, rule_file, write_loop_rule, write_rule
from loopscale.errors import ConfigError
from loopscale.fit.lr_optimum import LrOptimum, combine_optima


def cell(best: float, log_se: float | None) -> LrOptimum:
    return LrOptimum(best, None, 3.0, False, 0, log_se)


@pytest.mark.parametrize("cells", [[(1.2, 0.1), (2.0, 0.2)], [(0.8, 0.05), (1.1, 0.1), (1.9, 0.3)]])
def test_the_cells_are_weighted_by_their_precision_and_q_is_read_on_cells_minus_one_dof(cells):
    dof = 9
    out = combine_optima([cell(b, s) for b, s in cells], dof)
    x = np.log([b for b, _ in cells])
    w = 1 / np.square([s for _, s in cells])
    mean, se = np.sum(w * x) / np.sum(w), 1 / math.sqrt(np.sum(w))
    q_value = float(np.sum(w * (x - mean) ** 2))
    assert out["best"] == pytest.approx(math.exp(mean), rel=1e-12)
    assert out["log_se"] == pytest.approx(se, rel=1e-12)
    t = stats.t.ppf(0.975, dof)
    assert out["interval"] == pytest.approx([math.exp(mean - t * se), math.exp(mean + t * se)], rel=1e-9)
    assert out["heterogeneity_Q"] == pytest.approx(q_value, rel=1e-12)
    assert out["heterogeneity_p"] == pytest.approx(stats.chi2.sf(q_value, len(cells) - 1), rel=1e-9)
    assert out["cells_used"] == len(cells)


def test_a_cell_without_a_curve_is_left_out_and_one_cell_has_no_heterogeneity_test():
    out = combine_optima([cell(1.5, 0.1), cell(4.0, None), None], dof=0)
    assert out["best"] == pytest.approx(1.5) and out["cells_used"] == 1 and out["heterogeneity_p"] is None
    assert out["interval"] == pytest.approx(
        [1.5 * math.exp(-1.959963984540054 * 0.1), 1.5 * math.exp(1.959963984540054 * 0.1)]
    )
    assert combine_optima([cell(1.0, None)], dof=3)["best"] is None


def test_a_sweep_reads_its_tuned_multiplier_and_refuses_an_untuned_r_or_recipe(tmp_path, monkeypatch):
    conf = tmp_path / "conf"
    (conf / "experiment").mkdir(parents=True)
    (conf / "experiment" / "mine.yaml").write_text("# @package _global_\n")
    monkeypatch.setenv("LOOPSCALE_CONFIG_PATH", str(conf))
    with pytest.raises(ConfigError, match="does not exist: tune it with `loopscale tune experiment=mine"):
        multiplier("mine", "baseline", 2)
    path = write_rule(rule_file("mine"), "mine", "baseline", {1: 1.5, 2: 1.25}, {"cells": []})
    assert path == conf / "lr_rules" / "mine.yaml"
    assert multiplier("mine", "baseline", 1) == 1.5 and multiplier("mine", "baseline", "2") == 1.25
    with pytest.raises(ConfigError, match="no tuned lr for recipe baseline at r = 4 .*loopscale tune experiment=mine"):
        multiplier("mine", "baseline", 4)
    with pytest.raises(ConfigError, match="no tuned lr for recipe lora .*model.recipe=lora"):
        multiplier("mine", "lora", 1)


def test_a_users_rule_is_read_before_the_shipped_one(tmp_path, monkeypatch):
    """loopscale/config/lr_rule.py: the rule is looked up in each LOOPSCALE_CONFIG_PATH directory's lr_rules/ first,
    then in the shipped sweeps/ (which holds isodepth_cpu_demo's), as experiments are."""
    conf = tmp_path / "conf"
    monkeypatch.setenv("LOOPSCALE_CONFIG_PATH", str(conf))
    (conf / "lr_rules").mkdir(parents=True)
    write_rule(conf / "lr_rules" / "isodepth_cpu_demo.yaml", "isodepth_cpu_demo", "baseline", {1: 0.125}, {})
    assert rule_file("isodepth_cpu_demo") == conf / "lr_rules" / "isodepth_cpu_demo.yaml"
    assert multiplier("isodepth_cpu_demo", "baseline", 1) == 0.125  # the shipped rule says 7.71


def test_a_width_transfer_scales_the_multiplier_by_width_over_ref_width_to_the_exponent(tmp_path, monkeypatch):
    """docs/operations.md (loopscale tune): ln best = a_r + gamma ln(width / ref_width); a run at twice the reference
    width with gamma = -1 gets half the reference multiplier, at half the width twice it."""
    conf = tmp_path / "conf"
    (conf / "experiment").mkdir(parents=True)
    (conf / "experiment" / "mine.yaml").write_text("# @package _global_\n")
    monkeypatch.setenv("LOOPSCALE_CONFIG_PATH", str(conf))
    transfer = {"width_exponent": -1.0, "ref_width": 24.0}
    write_rule(rule_file("mine"), "mine", "baseline", {1: 2.0, 2: 1.6}, {}, transfer)
    assert multiplier("mine", "baseline", 1, 48) == 1.0
    assert multiplier("mine", "baseline", 2, 12) == 3.2
    assert multiplier("mine", "baseline", 2, 24) == 1.6
    with pytest.raises(ConfigError, match="scales recipe baseline's lr with the width"):
        multiplier("mine", "baseline", 1)


def test_tuning_one_recipe_keeps_the_other_recipes_rule(tmp_path):
    """One recipe a tune: writing it sets its multipliers, transfer and record and keeps every other recipe's."""
    path = tmp_path / "lr_rules" / "mine.yaml"
    write_rule(path, "mine", "baseline", {1: 1.5, 2: 1.25}, {"key": "b"}, {"width_exponent": -0.5, "ref_width": 24})
    write_rule(path, "mine", "hyper", {2: 0.9}, {"key": "h"})
    rule = read_rule(path)
    assert rule["multipliers"] == {"baseline": {1: 1.5, 2: 1.25}, "hyper": {2: 0.9}}
    assert rule["recipes"] == {"baseline": {"key": "b"}, "hyper": {"key": "h"}}
    assert rule["transfer"] == {"baseline": {"width_exponent": -0.5, "ref_width": 24.0}}


def test_the_loop_rule_is_read_per_width_log_linear_between_tuned_widths_and_never_extrapolated(tmp_path, monkeypatch):
    """loopscale/config/lr_rule.py `loop_multiplier`: optim.lr_loop at a tuned width is its optimum; between two tuned
    widths w0 < d < w1 it is exp((1 - s) ln m0 + s ln m1), s = ln(d / w0) / ln(w1 / w0); outside them refused."""
    conf = tmp_path / "conf"
    (conf / "experiment").mkdir(parents=True)
    (conf / "experiment" / "mine.yaml").write_text("# @package _global_\n")
    monkeypatch.setenv("LOOPSCALE_CONFIG_PATH", str(conf))
    with pytest.raises(ConfigError, match="no tuned loop lr for recipe baseline: .*--axis loop"):
        loop_multiplier("mine", "baseline", 2, 24)
    write_rule(rule_file("mine"), "mine", "baseline", {1: 2.0, 2: 1.6}, {"cells": []})
    write_loop_rule(rule_file("mine"), "mine", "baseline", {1: {16: 0.5, 48: 2.0}, 2: {48: 0.04, 16: 0.25}}, {})
    rule = read_rule(rule_file("mine"))
    assert rule["multipliers"]["baseline"] == {1: 2.0, 2: 1.6}  # the lr axis' rule kept beside the loop's
    assert rule["loop"]["multipliers"]["baseline"] == {1: {16: 0.5, 48: 2.0}, 2: {16: 0.25, 48: 0.04}}
    assert loop_multiplier("mine", "baseline", 1, 16) == 0.5 and loop_multiplier("mine", "baseline", "2", "48") == 0.04
    s = math.log(24 / 16) / math.log(48 / 16)  # 0.369
    assert loop_multiplier("mine", "baseline", 1, 24) == float(
        f"{math.exp((1 - s) * math.log(0.5) + s * math.log(2.0)):.3g}"
    )
    assert loop_multiplier("mine", "baseline", 1, 24) == 0.834  # 0.5 x 4^0.369
    assert loop_multiplier("mine", "baseline", 2, 32) == float(
        f"{0.25 ** (1 - math.log(2) / math.log(3)) * 0.04 ** (math.log(2) / math.log(3)):.3g}"
    )
    for width in (12, 64):
        with pytest.raises(ConfigError, match=f"at widths \\[16, 48\\], not at {width}: .*not extrapolated"):
            loop_multiplier("mine", "baseline", 1, width)
    with pytest.raises(ConfigError, match="no tuned loop lr for recipe baseline at r = 4"):
        loop_multiplier("mine", "baseline", 4, 16)


def test_a_loop_rule_tuned_at_another_lr_rule_is_refused_where_it_is_read(tmp_path, monkeypatch):
    """The loop rule records the lr rule it was tuned at (`loop.lr_rule`); once the lr axis is retuned to other
    multipliers (3 digits as written) or another transfer, `${ls.lr_loop_rule:...}` is a ConfigError that says
    why and what to do, not the old optimum read at the new lr. A loop rule tuned with no lr rule was tuned at the
    untuned lr; one written before the record was kept is read until an lr tune records the rule it replaces."""
    conf = tmp_path / "conf"
    (conf / "experiment").mkdir(parents=True)
    for name in ("mine", "bare", "old"):
        (conf / "experiment" / f"{name}.yaml").write_text("# @package _global_\n")
    monkeypatch.setenv("LOOPSCALE_CONFIG_PATH", str(conf))
    path = rule_file("mine")
    write_rule(path, "mine", "baseline", {1: 2.0, 2: 1.6}, {"cells": []})
    write_loop_rule(path, "mine", "baseline", {2: {16: 0.5, 48: 0.25}}, {})
    assert read_rule(path)["loop"]["lr_rule"] == {"baseline": {"multipliers": {1: 2.0, 2: 1.6}, "transfer": None}}
    write_rule(path, "mine", "baseline", {1: 2.0004, 2: 1.6}, {"cells": []})  # the same rule to 3 digits
    assert loop_multiplier("mine", "baseline", 2, 16) == 0.5
    write_rule(path, "mine", "baseline", {1: 2.0, 2: 1.3}, {"cells": []})
    stale = "tuned at the lr rule r -> x \\{1: 2.0, 2: 1.6\\}, and the lr rule is now r -> x \\{1: 2.0, 2: 1.3\\}"
    with pytest.raises(ConfigError, match=f"{stale}.*model.recipe=baseline --axis loop`, or set optim.lr_loop=1"):
        loop_multiplier("mine", "baseline", 2, 16)
    write_rule(path, "mine", "baseline", {1: 2.0, 2: 1.3}, {"cells": []}, {"width_exponent": -0.5, "ref_width": 24})
    write_loop_rule(path, "mine", "baseline", {2: {16: 0.4, 48: 0.2}}, {})  # retuned: read again
    assert loop_multiplier("mine", "baseline", 2, 48) == 0.2
    write_rule(path, "mine", "baseline", {1: 2.0, 2: 1.3}, {"cells": []})  # the width transfer dropped
    with pytest.raises(ConfigError, match="x \\{1: 2.0, 2: 1.3\\} x \\(width / 24\\)\\^-0.5, and the lr rule is now"):
        loop_multiplier("mine", "baseline", 2, 48)

    write_loop_rule(rule_file("bare"), "bare", "baseline", {2: {16: 0.5}}, {})  # no lr rule yet: the untuned lr
    assert loop_multiplier("bare", "baseline", 2, 16) == 0.5
    write_rule(rule_file("bare"), "bare", "baseline", {2: 1.6}, {"cells": []})
    with pytest.raises(ConfigError, match="tuned at the lr rule none \\(the untuned lr\\), and the lr rule is now r"):
        loop_multiplier("bare", "baseline", 2, 16)

    legacy = rule_file("old")  # a loop rule from before the record: read; the next lr tune records the old rule
    legacy.parent.mkdir(parents=True, exist_ok=True)
    legacy.write_text("multipliers: {baseline: {2: 1.6}}\nloop: {multipliers: {baseline: {2: {16: 0.5}}}}\n")
    assert loop_multiplier("old", "baseline", 2, 16) == 0.5
    write_rule(legacy, "old", "baseline", {2: 1.2}, {"cells": []})
    with pytest.raises(ConfigError, match="tuned at the lr rule r -> x \\{2: 1.6\\}, and the lr rule is now"):
        loop_multiplier("old", "baseline", 2, 16)
