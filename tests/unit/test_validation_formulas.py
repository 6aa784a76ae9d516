"""`loopscale validate`'s formulas written out by hand (issue 58: tests that pin the formula, not an outcome with
slack): loopscale/fit/validation/scores.py (AICc, BIC, the held-out errors, the free parameters),
loopscale/fit/validation/conventions.py (each recount of C and N, what `--column` accepts),
loopscale/fit/validation/lr_confound.py (which rows are the lr grid's, the move in grid steps and its flag) and
loopscale/fit/validation/forms.py (which forms are fitted, in which order, under which loss)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import loopscale.fit.validation.conventions as conventions
import loopscale.fit.validation.forms as forms
import loopscale.fit.validation.lr_confound as lr_confound
import loopscale.fit.validation.scores as scores
from loopscale.errors import InputError
from loopscale.fit.objective import Loss

# ----------------------------------------------------------------------------------------------------
# scores


@pytest.fixture(scope="module")
def grid():
    from loopscale.fit.laws.registry import law_class
    from loopscale.fit.runs_table import canonical_table
    from loopscale.fit.synthetic import published_grid_table

    table = canonical_table(published_grid_table(seed=1), "looped")
    return table, law_class("looped").data_from_table(table)


def test_information_is_aicc_and_bic_of_the_gaussian_working_likelihood_by_hand():
    res = np.array([0.01, -0.03, 0.02, 0.005, -0.012, 0.04, -0.002])  # n = 7
    rss = 0.01**2 + 0.03**2 + 0.02**2 + 0.005**2 + 0.012**2 + 0.04**2 + 0.002**2
    base = 7 * math.log(rss / 7)
    info = scores.information(res, 3)
    assert info["n"] == 7 and info["k"] == 3 and info["rss"] == pytest.approx(rss, rel=1e-12)
    # AIC = n ln(RSS/n) + 2k; AICc adds 2k(k+1)/(n-k-1) = 24/3; BIC = n ln(RSS/n) + k ln n
    assert info["aicc"] == pytest.approx(base + 6 + 8, rel=1e-12)
    assert info["bic"] == pytest.approx(base + 3 * math.log(7), rel=1e-12)


def test_aicc_is_none_exactly_when_n_is_at_most_k_plus_one():
    res = np.array([0.02, -0.01, 0.03, 0.01, -0.02])  # n = 5
    assert scores.information(res, 4)["aicc"] is None  # n = k + 1: the correction divides by 0
    assert scores.information(res, 5)["aicc"] is None
    at_k3 = scores.information(res, 3)
    rss = 0.0004 + 0.0001 + 0.0009 + 0.0001 + 0.0004
    assert at_k3["aicc"] == pytest.approx(5 * math.log(rss / 5) + 6 + 24 / 1, rel=1e-12)


def test_held_out_errors_are_prediction_over_observation_minus_one():
    pred, obs = np.array([3.3, 2.7, 2.0]), np.array([3.0, 3.0, 2.5])  # rel errors +0.1, -0.1, -0.2
    out = scores.held_out_errors(pred, obs)
    assert out["mean_abs_rel_error"] == pytest.approx(0.4 / 3, rel=1e-12)
    assert out["max_abs_rel_error"] == pytest.approx(0.2, rel=1e-12)
    assert out["mean_rel_error"] == pytest.approx(-0.2 / 3, rel=1e-12)  # the bias keeps its sign
    logs = [math.log(1.1), math.log(0.9), math.log(0.8)]
    assert out["rms_log"] == pytest.approx(math.sqrt(sum(v * v for v in logs) / 3), rel=1e-12)


def test_free_params_counts_the_coordinates_whose_box_is_not_one_value(grid):
    from loopscale.fit.laws.registry import law_class
    from loopscale.fit.synthetic import TRUE_PARAMS

    table, data = grid
    assert scores.free_params(law_class("looped").rival_law(data, TRUE_PARAMS)) == 6  # E A alpha B beta phi
    pinned = law_class("looped-pinned-e").rival_law(data, TRUE_PARAMS)
    assert len(pinned.bounds()) == 6 and scores.free_params(pinned) == 5  # E held by its box


class _Boxes:
    def __init__(self, boxes):
        self._boxes = boxes

    def bounds(self):
        return self._boxes


def test_free_params_leaves_out_a_pinned_coordinate():
    assert scores.free_params(_Boxes([(0.0, 5.0), (1.7, 1.7), (-1.0, 3.0), (2.0, 2.0)])) == 2


# ----------------------------------------------------------------------------------------------------
# conventions


def _table(**extra) -> pd.DataFrame:
    base = {
        "N_once": [1.0e6, 2.0e6, 3.0e6],
        "N_rec": [4.0e6, 5.0e6, 6.0e6],
        "D": [1.0e9, 2.0e9, 3.0e9],
        "C": [1.0e17, 3.0e17, 9.0e17],
        "r": [2.0, 4.0, 3.0],
    }
    return pd.DataFrame({**base, **extra})


def test_embedding_convention_adds_embedding_and_head_to_n_once_from_columns_or_vocab_times_width():
    table = _table(embedding=[10.0, 20.0, 30.0], lm_head=[1.0, 2.0, 4.0])
    changed, what = conventions.with_embedding(table, {})
    assert changed["N_once"].tolist() == [1.0e6 + 11, 2.0e6 + 22, 3.0e6 + 34]
    assert changed["N_rec"].tolist() == table["N_rec"].tolist() and what == "N_once + embedding + lm_head"
    by_vocab, _ = conventions.with_embedding(_table(width=[64.0, 128.0, 96.0]), {"vocab_size": 50.0})
    assert by_vocab["N_once"].tolist() == [1.0e6 + 2 * 3200, 2.0e6 + 2 * 6400, 3.0e6 + 2 * 4800]  # tied: both


def test_injection_convention_moves_the_concat_projection_from_n_once_to_n_rec():
    table = _table(width=[64.0, 32.0, 48.0], injection=["concat", "concat", "concat"])
    changed, _ = conventions.injection_in_rec(table, {})
    moved = np.array([2 * 64 * 64, 2 * 32 * 32, 2 * 48 * 48], dtype=float)  # W: [d, 2d], no bias
    assert changed["N_once"].tolist() == (table["N_once"] - moved).tolist()
    assert changed["N_rec"].tolist() == (table["N_rec"] + moved).tolist()
    assert conventions.injection_once("concat", 40, 3) == 3200


def _attention_per_token(d, T, p, c, k, r, with_grad):
    """4 d T FLOPs per layer pass forward; a pass with gradient costs 3x that (forward + backward), without 1x."""
    fwd = 4 * d * T
    layers_with_grad = p + c + k * with_grad
    layers_without = k * (r - with_grad)
    return 3 * fwd * layers_with_grad + fwd * layers_without


def test_attention_convention_takes_out_d_times_each_passes_t_by_t_flops():
    table = _table(width=[64.0, 32.0, 48.0], bptt_k=[np.nan, 1.0, 5.0])  # row 3: bptt_k >= r, full backprop
    fill = {"seq_len": 128.0, "n_prelude": 1.0, "n_coda": 2.0, "n_rec": 3.0}
    changed, what = conventions.without_attention(table, fill)
    expected = [
        1.0e17 - 1.0e9 * _attention_per_token(64, 128, 1, 2, 3, 2, 2),
        3.0e17 - 2.0e9 * _attention_per_token(32, 128, 1, 2, 3, 4, 1),
        9.0e17 - 3.0e9 * _attention_per_token(48, 128, 1, 2, 3, 3, 3),
    ]
    assert changed["C"].to_numpy() == pytest.approx(expected, rel=1e-12)
    assert what == "C - D x attention (T x T)"


def test_attention_convention_reads_the_iso_depth_layout_when_n_rec_is_missing():
    table = _table(width=[64.0, 32.0, 48.0])
    fill = {"seq_len": 64.0, "n_prelude": 2.0, "n_coda": 2.0, "depth": 16.0}  # k = (16 - 4) / r: 6, 3, 4
    changed, _ = conventions.without_attention(table, fill)
    ks = [6, 3, 4]
    for i, (d, r) in enumerate([(64, 2), (32, 4), (48, 3)]):
        attn = _attention_per_token(d, 64, 2, 2, ks[i], r, r)
        assert changed["C"].iloc[i] == pytest.approx(table["C"].iloc[i] - table["D"].iloc[i] * attn, rel=1e-12)


def test_attention_convention_refuses_a_c_that_does_not_hold_attention():
    table = _table(width=[64.0, 32.0, 48.0])
    fill = {"seq_len": 128.0, "n_prelude": 1.0, "n_coda": 1.0, "n_rec": 2.0}
    attn0 = _attention_per_token(64, 128, 1, 1, 2, 2, 2)
    exact = table.assign(C=[1.0e9 * attn0, 3.0e17, 9.0e17])  # C == D x attention on row 0: nothing left
    with pytest.raises(conventions.Missing, match="does not hold attention"):
        conventions.without_attention(exact, fill)
    conventions.without_attention(exact.assign(C=[1.0e9 * attn0 * 1.001, 3.0e17, 9.0e17]), fill)


def test_truncated_convention_adds_four_n_per_pass_without_gradient():
    table = _table(width=[64.0, 32.0, 48.0], bptt_k=[1.0, 2.0, np.nan])
    fill = {"seq_len": 100.0, "n_prelude": 1.0, "n_coda": 1.0, "n_rec": 2.0}
    changed, what = conventions.truncated_at_6n(table, fill)
    # a pass without gradient was priced 2N (+ its attention); at 6N it costs 4 (N_rec + 2 T d n_rec) more
    extra = [
        4 * (2 - 1) * (4.0e6 + 2 * 100 * 64 * 2),
        4 * (4 - 2) * (5.0e6 + 2 * 100 * 32 * 2),
        0.0,
    ]
    assert changed["C"].to_numpy() == pytest.approx([1.0e17 + 1.0e9 * extra[0], 3.0e17 + 2.0e9 * extra[1], 9.0e17])
    assert changed["C"].iloc[2] == table["C"].iloc[2] and what == "passes without gradient counted 6x"
    with pytest.raises(conventions.Missing, match="no runs with truncated backprop"):
        conventions.truncated_at_6n(table.assign(bptt_k=[2.0, 4.0, 7.0]), fill)  # bptt_k >= r everywhere


def test_column_fill_takes_whole_counts_zero_only_for_prelude_and_coda():
    out = conventions.fill_columns(["width = 256", "n_prelude=0", "n_coda=0", "injection=concat", "seq_len=1e3"])
    assert out == {"width": 256.0, "n_prelude": 0.0, "n_coda": 0.0, "injection": "concat", "seq_len": 1000.0}
    for bad, message in [
        ("width=0", "whole number > 0"),
        ("n_rec=0", "whole number > 0"),
        ("width=2.5", "whole number"),
        ("n_prelude=-1", "whole number >= 0"),
        ("depth=inf", "whole number"),
        ("seq_len=abc", "whole number"),
        ("width", "NAME=VALUE"),
        ("=3", "NAME=VALUE"),
        ("heads=4", "heads"),
    ]:
        with pytest.raises(InputError, match=message):
            conventions.fill_columns([bad])


def test_a_filled_column_stands_in_only_where_the_table_has_none():
    table = _table(width=[64.0, 32.0, 48.0], embedding=[1.0, 1.0, 1.0], lm_head=[np.nan, np.nan, np.nan])
    changed, _ = conventions.with_embedding(table, {"lm_head": 5.0})  # an all-NaN column is as good as none
    assert changed["N_once"].tolist() == [1.0e6 + 6, 2.0e6 + 6, 3.0e6 + 6]
    with pytest.raises(conventions.Missing, match="lm_head"):
        conventions.with_embedding(table, {})


# ----------------------------------------------------------------------------------------------------
# lr confound


def test_lr_rows_are_those_with_a_multiplier_other_than_one_and_bad_multipliers_are_refused():
    raw = pd.DataFrame({"lr_scale": [None, "", "1", 1.0, 0.5, "2", " "]})
    assert lr_confound.lr_rows(raw).tolist() == [False, False, False, False, True, True, False]
    assert lr_confound.lr_rows(pd.DataFrame({"L": [1.0, 2.0]})).tolist() == [False, False]
    for bad in ("abc", 0.0, -2.0, float("inf")):
        with pytest.raises(InputError, match="row 1, 1 such row"):
            lr_confound.lr_rows(pd.DataFrame({"lr_scale": [0.5, bad]}))


def test_the_best_lr_move_is_in_grid_steps_from_r1_and_flagged_beyond_one_step():
    out = {
        "step": 2.0,
        "flags": [],
        "groups": [
            {"r": 2, "best": 1.9},  # before r = 1 in the list: the base is found by r, not position
            {"r": 1, "best": 0.5},
            {"r": 4, "best": 0.5 * 2**1.0},  # exactly one step: not flagged
            {"r": 8, "best": 0.5 / 2**1.5},  # 1.5 steps down
            {"r": 16, "reason": "too few points"},
        ],
    }
    lr_confound._moves(out)
    by_r = {g["r"]: g for g in out["groups"]}
    assert by_r[2]["steps_from_r1"] == pytest.approx(math.log(3.8) / math.log(2), rel=1e-12)
    assert by_r[4]["steps_from_r1"] == pytest.approx(1.0, rel=1e-12)
    assert by_r[8]["steps_from_r1"] == pytest.approx(-1.5, rel=1e-12)
    assert "steps_from_r1" not in by_r[1] and "steps_from_r1" not in by_r[16]
    assert out["flags"] == [
        "the best lr at r = 2 is x3.80 r = 1's (+1.9 grid steps): a shared lr under-trains one of them",
        "the best lr at r = 8 is x0.35 r = 1's (-1.5 grid steps): a shared lr under-trains one of them",
    ]


# ----------------------------------------------------------------------------------------------------
# forms


def test_forms_are_the_fits_law_first_then_each_rival_then_the_law_under_mse(grid):
    from loopscale.fit.laws.registry import law_class, law_names
    from loopscale.fit.synthetic import TRUE_PARAMS

    table, data = grid
    huber = Loss("huber")
    out = forms.forms_for(table, data, "looped", TRUE_PARAMS, huber)
    rivals = [law_class(n).rival for n in law_names() if law_class(n).rival and n != "looped"]
    assert out[0].label == "looped (the fit's law)" and out[0].reference and out[0].loss is huber
    assert out[-1].label == "looped, MSE instead of Huber" and out[-1].loss.kind == "l2" and not out[-1].reference
    assert [f.label for f in out[1:-1]] == rivals
    assert sum(f.reference for f in out) == 1
    least_squares = forms.forms_for(table, data, "looped", TRUE_PARAMS, Loss("l2"))
    assert [f.label for f in least_squares] == [f.label for f in out[:-1]]  # already MSE: no second copy


# ----------------------------------------------------------------------------------------------------
# inputs


def test_a_points_seeds_are_one_row_at_their_geometric_mean_loss():
    import loopscale.fit.validation.inputs as inputs

    table = pd.DataFrame(
        {
            "N_once": [1e6, 1e6, 1e6, 2e6, 2e6],
            "N_rec": [4e6, 4e6, 4e6, 0.0, 0.0],
            "r": [2.0, 2.0, 2.0, 1.0, 1.0],
            "D": [1e9, 1e9, 1e9, 1e9, 3e9],
            "C": [6e16, 6e16, 6e16, 1.2e16, 3.6e16],
            "L": [3.0, 3.3, 3.1, 2.9, 2.7],
        }
    )
    points, counts = inputs.point_means(table)
    assert counts == {"n_rows": 5, "n_points": 3}
    assert points["L"].tolist() == pytest.approx([(3.0 * 3.3 * 3.1) ** (1 / 3), 2.9, 2.7], rel=1e-12)
    assert points["D"].tolist() == [1e9, 1e9, 3e9]
    single, none = inputs.point_means(table.iloc[3:].reset_index(drop=True))
    assert none is None and single is not None and len(single) == 2


def test_a_fit_records_intervals_are_low_high_numbers_open_ends_allowed():
    import loopscale.fit.validation.inputs as inputs

    assert inputs._interval_problem("ci95 phi", None) is None
    assert inputs._interval_problem("ci95 phi", [0.4, None]) is None
    assert inputs._interval_problem("ci95 phi", [0.4, 0.4]) is None
    assert inputs._interval_problem("ci95 phi", [0.5, 0.4]) == "ci95 phi [0.5, 0.4] is reversed (low > high)"
    assert inputs._interval_problem("ci95 phi", [0.4]) == "ci95 phi must be [low, high]; got [0.4]"
    assert inputs._interval_problem("ci95 phi", [True, 0.5]) == "ci95 phi must hold numbers; got [True, 0.5]"
    assert inputs._interval_problem("ci95 phi", [0.1, math.inf]).startswith("ci95 phi must hold numbers")


# ----------------------------------------------------------------------------------------------------
# the conventions' table: a recount refitted, flagged beyond the interval's half-width


@pytest.fixture(scope="module")
def fitted_grid(grid):
    from loopscale.fit.fit_table import fit_table
    from loopscale.fit.laws.registry import law_class

    table, data = grid
    with np.errstate(all="ignore"):
        fit = fit_table(table, "looped", profile=False)
    form = forms.forms_for(table, data, "looped", fit.params, Loss("huber"))[0]
    return table, form, fit.params, [law_class("looped")().from_user(fit.params)]


def test_a_recount_is_flagged_when_phi_moves_by_more_than_the_intervals_half_width(fitted_grid):
    table, form, params, starts = fitted_grid

    def run(half_width):
        phi = params["phi"]
        interval = {"phi_interval": [phi - 0.3 * half_width, phi + 1.7 * half_width]}  # asymmetric: (hi - lo) / 2
        return conventions.convention_table(table, form, params, interval, starts, fill={"vocab_size": 50000})

    wide = run(1.0)
    recorded, embedding = wide["rows"][0], wide["rows"][1]
    assert recorded == {"convention": "as recorded", "change": "", "phi": params["phi"], "delta_phi": 0.0} | {
        "a": recorded["a"], "delta_a": 0.0, "flagged": False, "reason": None}  # fmt: skip
    assert embedding["change"] == "N_once + embedding + lm_head"
    assert embedding["delta_phi"] == pytest.approx(embedding["phi"] - params["phi"], abs=1e-15)
    assert embedding["delta_a"] == pytest.approx(embedding["a"] - recorded["a"], abs=1e-15)
    move = abs(embedding["delta_phi"])
    assert 0.05 < move < 1.0 and wide["phi_half_width"] == pytest.approx(1.0)
    assert not any("phi moves" in f for f in wide["flags"])
    just_above = run(move * 1.001)
    assert not any("phi moves" in f for f in just_above["flags"])
    below = run(move * 0.999)
    assert (
        f"embedding and head in N: phi moves by {embedding['delta_phi']:+.3f} (the interval's half-width is "
        in (below["flags"][0])
    )
    assert below["rows"][1]["flagged"] is True
    reasons = {row["convention"]: row["reason"] for row in wide["rows"][2:]}
    assert reasons == {
        "injection in N_rec, not N_once": "needs column 'injection' (or --column injection=VALUE)",
        "FLOPs without attention's T x T term": "needs column 'seq_len' (or --column seq_len=VALUE)",
        "truncated passes at 6N, not 2N": "needs column 'seq_len' (or --column seq_len=VALUE)",
    }
    no_interval = conventions.convention_table(table, form, params, {}, starts, fill={"vocab_size": 50000})
    assert no_interval["phi_half_width"] is None and not any("phi moves" in f for f in no_interval["flags"])


def test_a_refit_starts_inside_the_box_and_returns_the_user_parameters_of_the_optimum(fitted_grid):
    import loopscale.fit.validation.refit as refit

    table, form, params, starts = fitted_grid
    names = list(form.law.internal_names)
    outside = np.array(starts[0], dtype=float)
    outside[names.index("phi")] = 7.5  # a start beyond the box (phi <= 3) still finds the optimum
    with np.errstate(all="ignore"):
        out = refit.refit(form, form.law.data_from_table(table), [outside])
    assert set(out) == set(params)  # user names (E, A, B), not the internal logs
    assert out["phi"] == pytest.approx(params["phi"], abs=2e-4) and out["A"] == pytest.approx(params["A"], rel=1e-2)


def test_the_lr_grid_per_r_is_a_parabola_through_its_own_runs_and_the_grids_centre_run(fitted_grid):
    """Per r, lr multipliers 0.5 and 2 beside the grid's own run at the smallest budget and width 640 (a 3-point
    lr grid, `lr_grid.points=3`): the parabola through the three is exact, so the best multiplier is exp(x0_r),
    L_best = L_c - k x0_r^2, the penalty k x0_r^2, the step 2 (the grid's own 1 counts: it read 4) and each r's
    move (x0_r - x0_1) / ln 2 steps."""
    from loopscale.fit.runs_table import budgets

    table, form, params, starts = fitted_grid
    at_grid = (budgets(table) == budgets(table).min()) & (table["width"] == 640)
    centre = table[at_grid]
    x0 = {1.0: 0.1, 2.0: 0.25, 4.0: -0.6, 8.0: 0.0}  # r = 4's best lr 0.55x, r = 2's 1.28x
    k = 0.02
    rows = []
    for _, run in centre.iterrows():
        for s in (0.5, 2.0):
            x = math.log(s)
            L = run["L"] + k * ((x - x0[run["r"]]) ** 2 - x0[run["r"]] ** 2)
            rows.append(run.to_dict() | {"L": L, "lr_scale": s})
    lr_table = pd.DataFrame(rows)
    with np.errstate(all="ignore"):
        out = lr_confound.lr_section(lr_table, table, form, params, starts)
    assert out["step"] == pytest.approx(2.0, rel=1e-12) and out["phi_shared"] == params["phi"]
    by_r = {g["r"]: g for g in out["groups"]}
    for r, g in by_r.items():
        L_c = float(centre.loc[centre["r"] == r, "L"].iloc[0])
        assert g["multipliers"] == [0.5, 2.0, 1.0] and g["L_shared"] == pytest.approx(L_c, rel=1e-12)
        assert g["best"] == pytest.approx(math.exp(x0[r]), rel=1e-9)
        assert g["L_best"] == pytest.approx(L_c - k * x0[r] ** 2, rel=1e-12)
        assert g["penalty"] == pytest.approx(k * x0[r] ** 2, abs=1e-12)
    assert by_r[4.0]["steps_from_r1"] == pytest.approx((-0.6 - 0.1) / math.log(2), rel=1e-9)
    assert by_r[2.0]["steps_from_r1"] == pytest.approx(0.15 / math.log(2), rel=1e-9)
    assert len(out["flags"]) == 1 and out["flags"][0].startswith("the best lr at r = 4 is x0.50 r = 1's (-1.0 grid")
    assert out["phi_best_points"] is not None and out["phi_penalty_all"] is not None
