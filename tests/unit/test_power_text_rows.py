"""`loopscale power`'s Markdown rows by hand (issue 58; loopscale/analysis/power_text.py): a design's row (points x
seeds, FLOPs, hours, phi's width with its Monte-Carlo error and the share within the 0.16 rule, bias with its sign,
delta-phi's width, MDE and its sigma-point / sigma-upper pair), the hours text, a curve pilot's columns and which
delta-phi a design is judged by."""

from __future__ import annotations

import loopscale.analysis.power_text as power_text


def _design(**over) -> dict:
    d = {
        "name": "as given",
        "n_points": 22,
        "seeds": 2,
        "cost": {"flops": 1.234e19, "flops_with_candidate": 2.5e19, "cpu_hours_with_candidate": 12.3456}
        | {"cpu_pool_wall_h_with_candidate": 3.21, "gpu_hours_with_candidate": 0.5},
        "phi": {"width95": 0.1234, "width95_mc_se": 0.0041, "within_rule": 0.625, "bias": -0.0123},
        "delta_phi": {"width95": 0.2, "mde": 0.0876, "mde_mc_se": 0.0052, "mde_point": 0.08, "mde_upper": 0.112},
    }
    return d | over


def test_a_designs_row():
    assert power_text.design_row(_design()) == [
        "as given",
        "22 x 2",
        "1.23e+19",
        "2.5e+19",
        "CPU 12.3 h (3.21 h wall on the pool); GPU 0.5 h",
        "0.123 ± 0.004 (62% <= 0.16)",
        "-0.012",
        "0.200",
        "0.088 ± 0.005",
        "0.080 / 0.112",
    ]
    bare = _design(phi={"width95": 0.2, "bias": 0.004, "width95_mc_se": float("nan")})
    assert power_text.design_row(bare)[5:7] == ["0.200", "+0.004"]


def test_the_hours_say_what_is_known():
    assert power_text._hours({"cpu_hours": 2.0}) == "CPU 2 h"
    assert power_text._hours({"gpu_hours": 1.5}) == "GPU 1.5 h"
    assert power_text._hours({}) == "-"
    assert power_text._hours({"cpu_hours": 2.0, "cpu_pool_wall_h": 0.25}) == "CPU 2 h (0.25 h wall on the pool)"


def test_a_curve_pilots_columns_and_the_delta_phi_a_design_is_judged_by():
    d = _design(curves={"worth": 0.93, "phi": {"width95": 0.1111}, "delta_phi": {"mde": 0.07, "mde_mc_se": 0.004}})
    assert power_text.curve_row(d) == ["0.93 (< 1: the finals are fitted)", "0.111", "0.070 ± 0.004"]
    d["curves"]["worth"] = 1.0
    assert power_text.curve_row(d)[0] == "1.00"
    assert power_text.delta_phi_of(d) == {"mde": 0.07, "mde_mc_se": 0.004}
    assert power_text.delta_phi_of(_design())["mde"] == 0.0876
