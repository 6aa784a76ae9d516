"""The test-time law's formulas written out by hand (issue 58): the form and its box
(loopscale/fit/laws/testtime.py), the canonical table (loopscale/fit/testtime.py), test-time phi
(loopscale/fit/testtime_phi.py) and the fit's checks (loopscale/fit/testtime_checks.py).

    L_g(r_eval) = L_inf + A s(x_eff) + delta max(0, 1 - 1/x),  x = r_eval / r_scale,
    s = exp(-(x - 1) / tau) or x^-gamma,  x_eff = min(x, 1) for a fixed-r model, x for a sampled one."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import loopscale.fit.testtime as tt  # the modules: their testtime_* functions are not tests
import loopscale.fit.testtime_checks as checks
import loopscale.fit.testtime_phi as tt_phi
from loopscale.errors import InputError
from loopscale.fit.laws.testtime import TestTime, is_sampled
from loopscale.fit.objective import Loss


def _grid(model, r_scale, fixed, r_eval):
    return pd.DataFrame({"model": model, "r_eval": r_eval, "r_scale": r_scale, "fixed": fixed})


# ----------------------------------------------------------------------------------------------------
# laws/testtime.py


def test_exp_form_of_a_fixed_r_model_saturates_at_r_train_and_drifts_past_it():
    params = {"tau": 0.6, "L_inf[a]": 3.1, "A[a]": 0.25, "delta[a]": 0.08}
    r_eval = [1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 20.0]  # r_train 4
    out = TestTime.predict_table(params, _grid("a", 4.0, True, r_eval))
    expected = []
    for r in r_eval:
        x = r / 4.0
        s = math.exp(-(min(x, 1.0) - 1.0) / 0.6)
        d = max(0.0, 1.0 - 1.0 / x)
        expected.append(3.1 + 0.25 * s + 0.08 * d)
    assert out == pytest.approx(expected, rel=1e-13)
    assert out[3] == pytest.approx(3.35, rel=1e-13) and out[5] == pytest.approx(3.35 + 0.04, rel=1e-13)


def test_power_form_of_a_sampled_model_keeps_gaining_past_its_scale_and_never_drifts():
    params = {"gamma": 1.3, "L_inf[b]": 3.05, "A[b]": 0.4}
    r_eval = [1.0, 2.5, 5.0, 10.0]
    out = TestTime.predict_table(params, _grid("b", 2.5, False, r_eval))
    assert out == pytest.approx([3.05 + 0.4 * (r / 2.5) ** -1.3 for r in r_eval], rel=1e-13)


def test_two_models_read_their_own_parameters_by_sorted_label():
    params = {"tau": 2.0, "L_inf[x]": 2.0, "A[x]": 1.0, "delta[x]": 0.5, "L_inf[a]": 5.0, "A[a]": 0.1}
    table = pd.concat([_grid("x", 2.0, True, [1.0, 4.0]), _grid("a", 1.0, False, [3.0])], ignore_index=True)
    out = TestTime.predict_table(params, table)
    assert out == pytest.approx([2.0 + math.exp(0.25), 2.0 + 1.0 + 0.25, 5.0 + 0.1 * math.exp(-1.0)], rel=1e-13)
    law = TestTime.from_params(params)
    assert law.shape == "exp" and law.groups == ("a", "x") and law.fixed == (False, True)


def test_the_box_is_set_from_each_models_losses_and_the_rate():
    law = TestTime("power", ("a", "b"), (True, False), ((2.0, 3.0), (4.0, 5.0)))
    assert law.internal_names == ("gamma", "L_inf[a]", "A[a]", "delta[a]", "L_inf[b]", "A[b]")
    assert law.bounds() == [(0.0, 10.0), (0.2, 6.0), (0.0, 300.0), (-0.1, 300.0), (0.4, 10.0), (0.0, 500.0)]
    exp = TestTime("exp", ("a",), (False,), ((2.0, 3.0),), held=(("A[a]", 0.0),))
    assert exp.bounds()[0] == pytest.approx((math.log(0.01), math.log(1000.0)))
    assert exp.bounds()[2] == (0.0, 0.0) and exp.user_names == ("tau", "L_inf[a]", "A[a]")
    assert exp.to_user(np.array([math.log(3.0), 2.5, 0.0]))["tau"] == pytest.approx(3.0)


def test_bind_table_holds_what_the_rows_cannot_identify():
    fixed_two = _grid("f", 4.0, True, [2.0, 4.0, 8.0]).assign(L=[3.5, 3.2, 3.25])  # x_eff 0.5, 1: two depths
    sampled_one = _grid("s", 1.0, False, [3.0, 3.0]).assign(L=[3.0, 3.01])  # one depth
    law = TestTime.bind_table(pd.concat([fixed_two, sampled_one], ignore_index=True), "power")
    assert law.groups == ("f", "s") and law.fixed == (True, False)
    assert law.spans == ((3.2, 3.5), (3.0, 3.01))
    assert dict(law.held) == {"A[s]": 0.0, "gamma": 1.0}  # no model has three depths: the rate held at 1
    no_past = _grid("f", 4.0, True, [1.0, 2.0, 4.0]).assign(L=[3.9, 3.5, 3.2])  # three depths, none past r_train
    law = TestTime.bind_table(no_past, "exp")
    assert dict(law.held) == {"delta[f]": 0.0}
    three = _grid("f", 4.0, True, [1.0, 2.0, 4.0, 4.5]).assign(L=[3.9, 3.5, 3.2, 3.21])
    assert TestTime.bind_table(three, "exp").held == ()


def test_which_r_train_cells_mean_sampled():
    for word in ("sampled", "random", "poisson-lognormal", "uniform{2,4}", " Sampled "):
        assert is_sampled(word)
    for value in (None, 4, 4.0, np.int64(2), "4", " 8 ", "", "fixed", " Fixed ", "None", "nan", "false", "0", "FALSE"):
        assert not is_sampled(value)


# ----------------------------------------------------------------------------------------------------
# testtime.py: the canonical table


def test_the_table_scales_a_sampled_model_by_its_mean_r_and_labels_models_by_r_train_without_a_model_column():
    raw = pd.DataFrame(
        {
            "r_train": [4, 4, "sampled", "sampled"],
            "mean_r": [None, None, None, None],
            "r_eval": [2, 8, 1, 4],
            "val_loss": [3.4, 3.3, 3.2, 3.1],
        }
    )
    table = tt.testtime_table(raw)
    assert table["model"].tolist() == ["r_train=4", "r_train=4", "r_train=sampled", "r_train=sampled"]
    assert table["fixed"].tolist() == [True, True, False, False] and table["L"].tolist() == [3.4, 3.3, 3.2, 3.1]
    assert table["r_scale"].tolist() == [4.0, 4.0, 1.0, 1.0]
    scheme = pd.DataFrame(
        {"model": ["m", "m"], "r": [3.5, 3.5], "r_sampling": ["poisson", "poisson"], "r_eval": [1, 2], "L": [3.0, 2.9]}
    )
    out = tt.testtime_table(scheme, tt.TestTimeColumns(sampled="r_sampling"))
    assert out["fixed"].tolist() == [False, False] and out["r_scale"].tolist() == [3.5, 3.5]  # the mean r


def test_the_table_refuses_a_fixed_model_without_r_train_and_a_nonpositive_loss():
    raw = pd.DataFrame({"model": ["a", "a"], "r_train": [0, 0], "r_eval": [1, 2], "L": [3.0, 2.9]})
    with pytest.raises(InputError, match=r"r_train > 0 for a fixed-r model.*rows \[0, 1\]"):
        tt.testtime_table(raw)
    with pytest.raises(InputError, match=r"needs a positive number in every row; rows \[1\]"):
        tt.testtime_table(raw.assign(r_train=[4, 4], L=[3.0, 0.0]))
    with pytest.raises(InputError, match=r"needs r_eval > 0.*rows \[0\]"):
        tt.testtime_table(raw.assign(r_train=[4, 4], r_eval=[0, 2]))
    with pytest.raises(InputError, match="more than one r_train"):
        tt.testtime_table(raw.assign(r_train=[4, 8]))


# ----------------------------------------------------------------------------------------------------
# testtime_phi.py

TRAIN = {"E": 1.6, "A": 30.0, "alpha": 0.2, "B": 900.0, "beta": 0.37}


def _m_by_hand(L, N_once, N_rec, D):
    excess = L - TRAIN["E"] - TRAIN["B"] * D ** -TRAIN["beta"]
    return ((excess / TRAIN["A"]) ** (-1 / TRAIN["alpha"]) - N_once) / N_rec


def test_phi_tt_is_the_log_step_of_the_multiplier_from_r_to_r_plus_one():
    params = {"gamma": 0.9, "L_inf[m]": 3.0, "A[m]": 0.3}
    model = {"model": "m", "r_scale": 2.0, "fixed": False, "N_once": 3e6, "N_rec": 7e6, "D": 2e9}
    out = tt_phi.testtime_phi(params, model, TRAIN, 3.0)
    L3, L4 = 3.0 + 0.3 * 1.5**-0.9, 3.0 + 0.3 * 2.0**-0.9
    m3, m4 = _m_by_hand(L3, 3e6, 7e6, 2e9), _m_by_hand(L4, 3e6, 7e6, 2e9)
    assert m4 > m3 > 0
    assert out["r"] == 3.0 and out["m_tt"] == pytest.approx([m3, m4], rel=1e-9)
    assert out["params_worth_next_pass"] == pytest.approx(7e6 * (m4 - m3), rel=1e-9)
    assert out["phi_tt"] == pytest.approx(math.log(m4 / m3) / math.log(4 / 3), rel=1e-9)


def test_phi_rows_price_tokens_from_c_at_the_models_cost_and_name_a_model_without_sizes():
    params = {"tau": 1.5, "L_inf[m]": 3.0, "A[m]": 0.3, "delta[m]": 0.05}
    table = pd.DataFrame(
        {"model": ["m", "m"], "r_eval": [2.0, 4.0], "r_scale": [4.0, 4.0], "fixed": [True, True]}
        | {"N_once": [2e6, 2e6], "N_rec": [5e6, 5e6], "C": [1.32e17, 1.32e17]}
    )
    record = {"per_model": {"m": {"params": params}}}
    out = tt_phi.phi_rows(table, record, TRAIN)["m"]
    D = 1.32e17 / (6 * (2e6 + 4.0 * 5e6))  # C = 6 (N_once + r_scale N_rec) D: 1e9 tokens
    model = {"model": "m", "r_scale": 4.0, "fixed": True, "N_once": 2e6, "N_rec": 5e6, "D": D}
    assert out == tt_phi.testtime_phi(params, model, TRAIN, 4.0)
    assert D == pytest.approx(1e9)
    bare = tt_phi.phi_rows(table.drop(columns=["N_rec"]), record, TRAIN)
    assert bare == {"m": {"reason": "the table has no N_once, N_rec and D (or C) for this model"}}


# ----------------------------------------------------------------------------------------------------
# testtime_checks.py


def _fit(**over):
    base = {"n_rows": 7, "n_free": 4, "dof": 3, "sigma_log": 0.002, "params": {"tau": 0.8, "L_inf[a]": 3.1}}
    base["intervals"] = {"tau": [0.5, 1.2], "L_inf[a]": [3.0, None], "A[a]": [None, None], "delta[a]": [0.0, None]}
    return base | over


def test_the_held_out_depth_passes_up_to_three_sigma_with_a_tenth_of_a_percent_floor():
    at = checks._holdout_check(_fit(holdout={"mean_abs_rel_error": 0.006}))[0]  # 3 x 0.2% = 0.6%: on the line
    assert at.ok and at.target == "<= 0.60% mean |rel err|" and at.protects == checks.EXTRAPOLATION
    assert not checks._holdout_check(_fit(holdout={"mean_abs_rel_error": 0.00601}))[0].ok
    quiet = _fit(sigma_log=0.0001, holdout={"mean_abs_rel_error": 0.001})  # 3 sigma = 0.03% < the 0.1% floor
    assert checks._holdout_check(quiet)[0].ok and checks._holdout_check(quiet)[0].target == "<= 0.10% mean |rel err|"
    over = checks._holdout_check(_fit(sigma_log=None, holdout={"mean_abs_rel_error": 0.0011}))[0]
    assert not over.ok and over.reason == "the largest r_eval of each model is predicted to 0.11% (> 0.10%)"
    assert checks._holdout_check(_fit()) == []


def test_only_the_rate_and_the_floors_need_closed_intervals_and_only_with_a_residual():
    out = checks._interval_checks(_fit())
    assert [(c.name, c.ok, c.protects) for c in out] == [
        ("tau interval", True, checks.CALIBRATED),
        ("L_inf[a] interval", False, checks.CALIBRATED),
    ]
    assert out[1].reason == "L_inf[a]'s profile interval is open on one side"
    assert checks._interval_checks(_fit(dof=0)) == []
    gamma = checks._interval_checks(_fit(intervals={"gamma": [None, 2.0]}))
    assert [(c.name, c.value) for c in gamma] == [("gamma interval", "open")]


def test_held_parameters_block_except_the_drift_which_warns():
    law = TestTime("exp", ("a",), (True,), ((3.0, 3.5),), held=(("log_tau", 0.0), ("A[a]", 0.0), ("delta[a]", 0.0)))
    out = checks._held_checks(law)
    assert [(c.name, c.protects, c.ok) for c in out] == [
        ("tau free", checks.IDENTIFIED, False),
        ("A[a] free", checks.IDENTIFIED, False),
        ("delta[a] free", checks.EXTRAPOLATION, False),
    ]
    assert out[0].value == "tau held at 1" and out[0].reason == f"tau held at 1 ({checks.RATE_WHY})"
    assert out[1].reason == "A[a] held at 0 (one depth at or below r_scale: no saturating term to fit)"
    assert out[2].reason == "delta[a] held at 0 (no row past r_train: the drift past the trained depth is not measured)"
    power = TestTime("power", ("a",), (False,), ((3.0, 3.5),), held=(("gamma", 1.0),))
    assert checks._held_checks(power)[0].value == "gamma held at 1"


def test_the_rate_on_its_bound_blocks_within_the_fitters_tolerance():
    law = TestTime("power", ("a",), (False,), ((3.0, 3.5),))
    fit = _fit(params={"gamma": 10.0, "L_inf[a]": 3.0})
    assert not checks._rate_check(law, fit, np.array([10.0 - 0.5e-6, 3.0, 0.1]))[0].ok
    assert checks._rate_check(law, fit, np.array([10.0 - 2e-6, 3.0, 0.1]))[0].ok
    assert not checks._rate_check(law, fit, np.array([0.5e-6, 3.0, 0.1]))[0].ok
    on = checks._rate_check(law, fit, np.array([10.0, 3.0, 0.1]))[0]
    assert on.reason == "gamma = 10 on its bound" and on.target == "inside (0, 10)"
    held = TestTime("power", ("a",), (False,), ((3.0, 3.5),), held=(("gamma", 1.0),))
    assert checks._rate_check(held, fit, np.array([1.0, 3.0, 0.1])) == []


def test_the_headline_gives_the_rate_and_each_floor_with_open_ends():
    law = TestTime("exp", ("a", "b"), (True, False), ((3.0, 3.5), (3.0, 3.5)))
    fit = _fit(params={"tau": 0.81234, "L_inf[a]": 3.1, "L_inf[b]": 2.98765, "A[a]": 0.2})
    fit["intervals"] = {"tau": [0.5, None], "L_inf[a]": [3.0, 3.2]}
    assert checks.headline(fit, law) == "tau = 0.8123 [0.5, open], L_inf[a] = 3.1 [3, 3.2], L_inf[b] = 2.988"


def test_the_verdict_is_measured_only_with_a_residual():
    law = TestTime("power", ("a",), (False,), ((3.0, 3.5),))
    good = _fit(n_free=3, params={"gamma": 1.2, "L_inf[a]": 3.0, "A[a]": 0.3})
    good["intervals"] = {"gamma": [1.0, 1.4], "L_inf[a]": [2.9, 3.1]}
    rec = checks.checks_record(law, good, np.array([1.2, 3.0, 0.3]))
    assert rec.verdict == "test-time law measured: gamma = 1.2 [1, 1.4], L_inf[a] = 3 [2.9, 3.1]"
    exact = checks.checks_record(law, good | {"n_rows": 3, "dof": 0}, np.array([1.2, 3.0, 0.3]))
    assert not exact.measured and "3 rows fix 3 free parameters exactly" in exact.verdict


def test_a_models_summary_is_its_curve_to_its_largest_depth_and_the_gain_of_each_next_pass():
    params = {"tau": 0.6, "L_inf[a]": 3.1, "A[a]": 0.25, "delta[a]": 0.08}
    rows = tt.testtime_table(
        pd.DataFrame({"model": "a", "r_train": 4, "r_eval": [1, 2, 6, 4], "L": [3.6, 3.4, 3.37, 3.35]})
    )
    out = tt.model_summary(rows, {"params": params})

    def L(r):
        x = r / 4
        return 3.1 + 0.25 * math.exp(-(min(x, 1) - 1) / 0.6) + 0.08 * max(0.0, 1 - 1 / x)

    assert out["trained"] == "fixed r = 4" and out["r_scale"] == 4.0 and out["quoted_r"] == 4.0
    assert out["curve_r"] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]  # to the largest r_eval
    assert out["curve_L"] == pytest.approx([L(r) for r in range(1, 7)], rel=1e-12)
    assert out["gain_next_pass"] == pytest.approx([L(r) - L(r + 1) for r in range(1, 7)], rel=1e-9)
    sampled = tt.testtime_table(pd.DataFrame({"model": "s", "r_train": "sampled", "r_eval": [1, 3], "L": [3.5, 3.2]}))
    quoted = tt.model_summary(sampled, {"params": {"tau": 1.0, "L_inf[s]": 3.0, "A[s]": 0.5}})
    assert quoted["trained"] == "sampled r" and quoted["quoted_r"] == 3.0 and quoted["curve_r"] == [1.0, 2.0, 3.0]
    scaled = tt.testtime_table(
        pd.DataFrame({"model": "m", "r": [2.5, 2.5], "r_sampling": "poisson", "r_eval": [1, 2], "L": [3.5, 3.2]})
    )
    wide = tt.model_summary(scaled, {"params": {"tau": 1.0, "L_inf[m]": 3.0, "A[m]": 0.5}})
    assert wide["quoted_r"] == 2.5 and wide["curve_r"] == [1.0, 2.0, 3.0]  # up to ceil(r_scale) = 3


# ----------------------------------------------------------------------------------------------------
# analysis/advise/testtime.py: inference-time r as an axis


def _tt_table(model, fixed, r_scale, r_evals, a, b, n_once=1e6, n_rec=3e6):
    return pd.DataFrame(
        {"model": model, "r_eval": [float(r) for r in r_evals], "r_scale": r_scale, "fixed": fixed}
        | {"flops_per_token_eval": [a + b * r for r in r_evals], "N_once": n_once, "N_rec": n_rec}
    )


def test_inference_advice_searches_whole_r_to_twice_the_measured_within_the_budget():
    import loopscale.analysis.advise.testtime as adv_tt

    params = {"gamma": 0.8, "L_inf[s]": 3.0, "A[s]": 0.6}  # keeps gaining: the most passes that fit win
    table = _tt_table("s", False, 1.0, [1, 2, 3], a=1e6, b=2e5)
    record = {"per_model": {"s": {"params": params, "conditioning": {"verdict": "measured"}}}}
    assert adv_tt.flops_line(table) == pytest.approx((1e6, 2e5))
    assert adv_tt.flops_line(table.iloc[:1]) == (1.2e6, 0.0)
    a, b = adv_tt.flops_line(table)
    out = adv_tt.inference_advice(record, table, a + b * 6)  # r = 6 = 2 x 3 is the reach; on the budget fits
    best = out["best"]
    assert (best["r"], best["extrapolated"]) == (6, True) and best["flops_per_token"] == pytest.approx(2.2e6)
    assert best["L"] == pytest.approx(3.0 + 0.6 * 6**-0.8, rel=1e-12) and best["N_unique"] == 4e6
    assert adv_tt.inference_advice(record, table, 1e6 + 2e5 * 9)["best"]["r"] == 6  # not past 2x the measured
    inside = adv_tt.inference_advice(record, table, 1e6 + 2e5 * 3.5)["best"]
    assert (inside["r"], inside["extrapolated"]) == (3, False)
    with pytest.raises(
        InputError, match=r"no model runs one pass within 1\.1e\+06 FLOPs per token \(the cheapest needs 1\.2e\+06\)"
    ):
        adv_tt.inference_advice(record, table, 1.1e6)
    with pytest.raises(InputError, match="has no 'flops_per_token_eval' column"):
        adv_tt.inference_advice(record, table.drop(columns=[adv_tt.FLOPS_COLUMN]), 1e7)


def test_a_saturated_curve_runs_the_fewest_passes_within_a_hundredth_of_a_percent():
    import loopscale.analysis.advise.testtime as adv_tt

    # exp with tau 1: L(r) - L_inf = A e^-(r - 1) <= 1e-4 L_min (~3e-4) from r = 9 on
    params = {"tau": 1.0, "L_inf[s]": 3.0, "A[s]": 0.5}
    table = _tt_table("s", False, 1.0, [1, 2, 4, 8], a=0.0, b=1.0)
    record = {"per_model": {"s": {"params": params, "conditioning": {"verdict": "measured"}}}}
    L = [3.0 + 0.5 * math.exp(-(r - 1)) for r in range(1, 17)]
    first = next(r for r, v in zip(range(1, 17), L) if v <= min(L) * (1 + 1e-4))
    assert adv_tt.inference_advice(record, table, 100.0)["best"]["r"] == first == 9


def test_the_held_out_depth_is_each_models_largest_r_eval_predicted_from_the_rest():
    r_eval = [1.0, 2.0, 3.0, 4.0, 6.0, 8.0]
    L = [3.0 + 0.5 * r**-0.9 for r in r_eval]
    L[-1] *= 1.02  # the largest depth 2% above the law the rest follow exactly
    table = tt.testtime_table(pd.DataFrame({"model": "s", "r_train": "sampled", "r_eval": r_eval, "L": L}))
    with np.errstate(all="ignore"):
        hold = tt._holdout_largest(table, "power", Loss(), 4)
    assert hold["n_rows"] == 1 and hold["r_eval"] == [8.0]
    assert hold["mean_abs_rel_error"] == pytest.approx(1 - 1 / 1.02, rel=1e-4)  # |L_hat / L - 1|, not 0.02
    short = tt.testtime_table(pd.DataFrame({"model": "s", "r_train": "sampled", "r_eval": [1, 2, 4], "L": L[:3]}))
    assert tt._holdout_largest(short, "power", Loss(), 4) is None  # the rest would hold the rate
    two = pd.DataFrame(
        {"model": ["a"] * 5 + ["b"] * 2, "r_train": "sampled", "r_eval": [1, 2, 3, 4, 6, 1, 4]}
        | {"L": [3.5, 3.3, 3.2, 3.15, 3.1, 3.6, 3.4]}
    )
    exact = tt.testtime_table(pd.DataFrame({"model": "s", "r_train": "sampled", "r_eval": [1, 2, 3, 4], "L": L[:4]}))
    assert tt._holdout_largest(exact, "power", Loss(), 4) is None  # 3 rows left for 3 free: no residual
    # rows enough for the rest (5 > 4 free), but b left with one depth would hold its A: not a fair test
    assert tt._holdout_largest(tt.testtime_table(two), "power", Loss(), 4) is None


def test_shapes_are_compared_leaving_out_each_row_above_the_smallest_depth_the_rest_can_spare():
    r_eval = [1.0, 2.0, 3.0, 5.0]
    L = [3.0 + 0.5 * r**-0.9 for r in r_eval]  # the power law exactly, but r = 3 2% above it
    L[2] *= 1.02
    rows = {"model": ["s"] * 4 + ["f"] * 3, "r_train": ["sampled"] * 4 + [2] * 3}
    raw = pd.DataFrame(rows | {"r_eval": r_eval + [1.0, 2.0, 4.0], "L": L + [3.6, 3.4, 3.45]})
    with np.errstate(all="ignore"):
        out = tt.compare_shapes(tt.testtime_table(raw), Loss(), 2)
    # s: r = 2, 3, 5 (never its smallest); f: leaving out r = 2 (one depth left) or r = 4 (no row past r_train,
    # delta held) would hold a parameter the full fit frees: none
    assert out["rows"] == [("s", 2.0), ("s", 3.0), ("s", 5.0)]
    assert len(out["abs_rel_error"]["power"]) == 3 and out["better"] == "power"
    assert out["mean_abs_rel_error"]["power"] == pytest.approx(np.mean(out["abs_rel_error"]["power"]), rel=1e-12)
    # r = 3 left out: the other three rows fix the power law exactly, so its error is |L_hat / L - 1| = 1 - 1/1.02
    assert out["abs_rel_error"]["power"][1] == pytest.approx(1 - 1 / 1.02, rel=1e-3)
