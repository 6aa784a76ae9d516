"""`loopscale validate`'s folds and flags by hand (issue 58): loopscale/fit/validation/folds.py (which rows each fold
holds out, when a fold cannot be done and the sentence it says, at and past each boundary) and
loopscale/fit/validation/flags.py (each threshold at and past its boundary, which field each number reads, the
verdict line's rounding). Records are built by hand, no fitting: milliseconds."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from loopscale.fit.validation import flags as flags_mod
from loopscale.fit.validation import folds as folds_mod
from loopscale.fit.validation.record import FoldResult, ValidationRecord
from support.validation import held, held_out_fit

# -- folds.py ------------------------------------------------------------------------------------------------


def budget_table() -> pd.DataFrame:
    # spent C scatters about the asked budget (batch rounding): C_budget groups them; the last row has no
    # C_budget and falls back to its spent C (3e18, within 3 significant digits of the 3e18 budget)
    return pd.DataFrame(
        {
            "C": [1.02e18, 0.98e18, 1.01e18, 2.9e18, 3.1e18, 1.04e19, 3.0e18],
            "C_budget": [1e18, 1e18, 1e18, 3e18, 3e18, 1e19, np.nan],
        }
    )


def test_one_budget_fold_per_requested_budget_and_the_row_count_rule_at_its_boundary():
    table = budget_table()
    folds = folds_mod.budget_folds(table, n_params=2)
    assert [f.kind for f in folds] == ["budget"] * 3
    assert [f.label for f in folds] == ["C = 1e+18", "C = 3e+18", "C = 1e+19"]
    assert [f.test.tolist() for f in folds] == [
        [True, True, True, False, False, False, False],
        [False, False, False, True, True, False, True],
        [False, False, False, False, False, True, False],
    ]
    assert [f.train.tolist() for f in folds][0] == [False, False, False, True, True, True, True]
    # holding out 1e18 leaves 4 rows: exactly 2 x 2 parameters is enough
    assert [f.reason for f in folds] == [None, None, None]
    # 3 parameters need 6: the 1e18 fold (4 left) and the 3e18 fold (4 left) cannot, the 1e19 fold (6 left) can
    folds = folds_mod.budget_folds(table, n_params=3)
    assert [f.reason for f in folds] == [
        "the other budgets hold 4 rows, fewer than 6 (twice the law's parameters)",
        "the other budgets hold 4 rows, fewer than 6 (twice the law's parameters)",
        None,
    ]


def test_two_budgets_are_one_fold_said_impossible_three_are_folds():
    two = pd.DataFrame({"C": [1e18, 1e18, 1e19, 1e19, 1e19]})
    (fold,) = folds_mod.budget_folds(two, n_params=1)
    assert (fold.kind, fold.label) == ("budget", "every budget")
    assert fold.test.tolist() == [False] * 5
    assert fold.reason == (
        "the table has 2 compute budget(s): leaving one out needs at least 3 (a refit on one budget cannot "
        "separate N from D)"
    )
    three = pd.DataFrame({"C": [1e18, 1e18, 1e19, 1e19, 1e20]})
    assert [f.reason for f in folds_mod.budget_folds(three, n_params=1)] == [None, None, None]


def test_one_r_fold_per_r_above_one_with_each_reason_at_its_boundary():
    table = pd.DataFrame({"r": [4, 1, 2, 1, 8, 2, 1.5]})
    folds = folds_mod.r_folds(table, n_params=3)
    assert [f.label for f in folds] == ["r = 1.5", "r = 2", "r = 4", "r = 8"]
    assert [f.test.tolist() for f in folds] == [
        [False, False, False, False, False, False, True],
        [False, False, True, False, False, True, False],
        [True, False, False, False, False, False, False],
        [False, False, False, False, True, False, False],
    ]
    # 7 rows, 3 parameters: dropping r = 2 leaves 5 < 6, each other drop leaves 6 = 6
    assert [f.reason for f in folds] == [None, "the other r hold 5 rows, fewer than 6", None, None]
    # r = 1 plus one looped r: dropping it leaves r = 1 only
    (fold,) = folds_mod.r_folds(pd.DataFrame({"r": [1, 1, 3, 3]}), n_params=1)
    assert fold.reason == "dropping it leaves runs at r = 1 only: phi is not identified"
    # no r = 1 to anchor N_eff = N: said before the count of what is left
    folds = folds_mod.r_folds(pd.DataFrame({"r": [2, 2, 4, 4, 8]}), n_params=1)
    assert [f.reason for f in folds] == ["the table has no r = 1 runs to anchor N_eff = N"] * 3


def test_a_table_without_looped_runs_or_without_r_is_one_r_fold_said_impossible():
    (fold,) = folds_mod.r_folds(pd.DataFrame({"r": [1, 1, 1]}), n_params=1)
    assert (fold.label, fold.reason, fold.test.tolist()) == (
        "every r",
        "the table has runs at r = 1 only",
        [False] * 3,
    )
    (fold,) = folds_mod.r_folds(pd.DataFrame({"N": [1.0, 2.0]}), n_params=1)
    assert (fold.label, fold.reason) == ("every r", "the table has no r column (a dense law)")


def curve_table() -> pd.DataFrame:
    # 7 runs, each with 3 evaluations in shuffled row order; run "b"'s rows come before run "a"'s
    rows = []
    for name, steps in [("b", [20, 5, 10]), ("a", [10, 30, 20]), ("g", [1, 3, 2])] + [(n, [7, 8, 6]) for n in "cdef"]:
        rows += [{"run": name, "step": s} for s in steps]
    return pd.DataFrame(rows)


def test_curve_folds_hold_runs_out_in_five_strided_groups_and_each_runs_last_step():
    table = curve_table()
    folds = folds_mod.curve_folds(table, n_params=2)
    runs = table["run"].to_numpy()
    groups = [sorted(set(runs[f.test])) for f in folds[:-2]]
    # sorted names a..g taken every 5th: {a, f}, {b, g}, {c}, {d}, {e}
    assert groups == [["a", "f"], ["b", "g"], ["c"], ["d"], ["e"]]
    assert [f.label for f in folds[:-2]] == [
        "runs 1 of 5 (2)",
        "runs 2 of 5 (2)",
        "runs 3 of 5 (1)",
        "runs 4 of 5 (1)",
        "runs 5 of 5 (1)",
    ]
    assert [f.reason for f in folds[:-2]] == [None] * 5
    final = folds[-2]
    assert (final.kind, final.label, final.reason) == ("final", "every run's final evaluation", None)
    # the row of each run's largest step, wherever it sits
    expected = [s == {"b": 20, "a": 30, "g": 3}.get(r, 8) for r, s in zip(runs, table["step"])]
    assert final.test.tolist() == expected and final.test.sum() == 7


def test_curve_folds_row_rule_at_its_boundary_and_one_run():
    table = curve_table()  # 21 rows; group 1 holds 6, leaving 15
    at = folds_mod.curve_folds(table, n_params=7)  # 2 x 7 = 14 <= 15 (groups of 1 leave 18)
    assert [f.reason for f in at[:-2]] == [None] * 5
    past = folds_mod.curve_folds(table, n_params=8)  # 16 > 15 for the two-run groups, 16 <= 18 for the others
    assert [f.reason for f in past[:-2]] == ["too few rows left to refit"] * 2 + [None] * 3
    assert [f.reason for f in folds_mod.curve_folds(table, n_params=9)[:-2]] == [  # 18 = 18 for groups of one
        "too few rows left to refit"
    ] * 2 + [None] * 3
    assert [f.reason for f in folds_mod.curve_folds(table, n_params=10)[:-2]] == ["too few rows left to refit"] * 5
    one = pd.DataFrame({"run": ["x", "x"], "step": [2, 1]})
    folds = folds_mod.curve_folds(one, n_params=1)
    assert [(f.kind, f.label, f.reason) for f in folds] == [
        ("run", "whole runs", "the table has one run"),
        ("final", "every run's final evaluation", None),
        ("early", "each run's evaluations before 10% of its steps",
         "the table has no schedule terms (a curve law's canonical table has them)"),
    ]  # fmt: skip
    assert folds[1].test.tolist() == [True, False]


def test_three_runs_are_three_groups_of_one():
    table = pd.DataFrame({"run": ["z", "y", "x"], "step": [1, 1, 1]})
    folds = folds_mod.curve_folds(table, n_params=1)
    assert [f.label for f in folds[:-2]] == ["runs 1 of 3 (1)", "runs 2 of 3 (1)", "runs 3 of 3 (1)"]
    assert [f.test.tolist() for f in folds[:-2]] == [[False, False, True], [False, True, False], [True, False, False]]


def test_folds_for_orders_full_budget_r_then_curves_and_drops_r_for_a_dense_law():
    table = pd.DataFrame(
        {
            "C": [1e18, 1e18, 1e19, 1e19, 1e20, 1e20],
            "r": [1, 2, 1, 4, 1, 2],
            "run": ["a", "b", "c", "d", "e", "f"],
            "step": [1] * 6,
        }
    )
    kinds = [f.kind for f in folds_mod.folds_for(table, 1, dense=False, curves=False)]
    assert kinds == ["full", "budget", "budget", "budget", "r", "r"]
    assert [f.kind for f in folds_mod.folds_for(table, 1, dense=True, curves=False)] == ["full"] + ["budget"] * 3
    kinds = [f.kind for f in folds_mod.folds_for(table, 1, dense=False, curves=True)]
    assert kinds == ["full"] + ["budget"] * 3 + ["r"] * 2 + ["run"] * 5 + ["final", "early"]
    full = folds_mod.folds_for(table, 1, dense=True, curves=False)[0]
    assert (full.label, full.test.tolist(), full.reason) == ("all rows", [False] * 6, None)


# -- flags.py ------------------------------------------------------------------------------------------------


def record(results, folds, forms=None, phi_interval=(0.40, 0.50), approach2=None, lr=None, conventions=None):
    return ValidationRecord(
        fit={"law": "looped", "phi_interval": list(phi_interval) if phi_interval else None},
        folds=folds,
        forms=forms or [{"label": "the fit's law", "law": "looped"}],
        results=[FoldResult(**r) for r in results],
        approach2=approach2,
        lr_confound=lr,
        conventions=conventions,
    )


FOLDS = [
    {"kind": "full", "label": "all rows"},
    {"kind": "budget", "label": "C = 1e+18"},
    {"kind": "budget", "label": "C = 1e+19"},
    {"kind": "r", "label": "r = 2"},
    {"kind": "r", "label": "r = 4"},
]


def base_results():
    return [
        {"form": 0, "fold": 0, "ok": True, "params": {"phi": 0.45}, "information": {"aicc": -10.0}},
        # ratio 0.030 / 0.015 = 2.0 exactly: at the threshold, not flagged
        held_out_fit(0, 1, {"phi": 0.5}, 0.015, held(0.010, -0.004, 0.020, 0.030)),
        # ratio 0.0302 / 0.015 = 2.01: past it, flagged
        held_out_fit(0, 2, {"phi": 0.5}, 0.015, held(0.030, 0.0125, 0.050, 0.0302)),
        # phi moves up by 0.05 = the half-width exactly: not flagged
        held_out_fit(0, 3, {"phi": 0.50}, 0.02, held(0.002, 0.001, 0.004, 0.001)),
        # phi moves down by 0.0501: flagged, and the largest move
        held_out_fit(0, 4, {"phi": 0.3999}, 0.02, held(0.006, -0.002, 0.012, 0.002)),
    ]  # fmt: skip


def test_a_fold_is_flagged_past_twice_its_training_noise_not_at_it_and_the_summary_means_and_maxes():
    rec = record(base_results(), FOLDS)
    flags: list[str] = []
    budget = flags_mod.held_out_summary(rec, "budget", flags)
    # mean over the folds of each fold's mean |error|; the worst single |error| over the folds
    assert budget == pytest.approx((0.020, 0.050), abs=1e-15)
    assert flags == ["held out C = 1e+19: error 3.00% (bias +1.25%) is 2.0x the refit's own residuals"]
    assert [r.noise_ratio for r in rec.results[1:3]] == pytest.approx([2.0, 0.0302 / 0.015])
    r_flags: list[str] = []
    assert flags_mod.held_out_summary(rec, "r", r_flags) == pytest.approx((0.004, 0.012))
    assert r_flags == []
    assert [r.noise_ratio for r in rec.results[3:5]] == pytest.approx([0.05, 0.1])
    assert flags_mod.held_out_summary(rec, "run", []) is None


def test_a_failed_fold_is_left_out_and_a_zero_training_rms_is_floored_not_divided_by():
    results = base_results()
    results[2] = {"form": 0, "fold": 2, "ok": False, "reason": "too few rows"}
    results[1]["train_rms_log"] = 0.0
    rec = record(results, FOLDS)
    flags: list[str] = []
    assert flags_mod.held_out_summary(rec, "budget", flags) == pytest.approx((0.010, 0.020))
    assert rec.results[1].noise_ratio == pytest.approx(0.030 / 1e-12)
    assert flags == ["held out C = 1e+18: error 1.00% (bias -0.40%) is 30000000000.0x the refit's own residuals"]


def test_phi_is_flagged_past_the_half_width_not_at_it_and_the_largest_move_is_reported():
    rec = record(base_results(), FOLDS)
    flags: list[str] = []
    shift = flags_mod.phi_shifts(rec, flags)
    assert shift[1] == "r = 4" and shift[0] == pytest.approx(0.0501)
    assert flags == ["phi moves by 0.050 when r = 4 is dropped (the interval's half-width is 0.050)"]
    # an asymmetric interval's half-width is half its length, not a distance from phi
    rec = record(base_results(), FOLDS, phi_interval=(0.44, 0.60))
    assert flags_mod.half_width(rec) == pytest.approx(0.08)
    flags = []
    flags_mod.phi_shifts(rec, flags)
    assert flags == []
    # no interval: nothing flagged, the move still reported
    rec = record(base_results(), FOLDS, phi_interval=None)
    flags = []
    assert flags_mod.phi_shifts(rec, flags)[0] == pytest.approx(0.0501) and flags == []


def test_a_per_r_form_or_a_departure_is_flagged_below_minus_four_aicc_only_and_never_the_fits_own_law():
    forms = [
        {"label": "the fit's law", "law": "looped"},
        {"label": "per-r multipliers", "law": "looped-free"},
        {"label": "log r", "law": "looped-logr"},
    ]
    logr_flag = "log r: AICc -9.0 against the fit's law: phi runs with r (psi = 0.312)"

    def with_aicc(free, logr, own="looped"):
        results = base_results() + [
            {"form": 1, "fold": 0, "ok": True, "params": {}, "information": {"aicc": -10.0 + free}},
            {
                "form": 2,
                "fold": 0,
                "ok": True,
                "params": {"phi": 0.4, "psi": 0.312},
                "information": {"aicc": -10.0 + logr},
            },
        ]
        return record(results, FOLDS, forms=[{**forms[0], "law": own}, *forms[1:]])

    assert flags_mod.delta_aicc(with_aicc(-4.5, -9.0), 1) == pytest.approx(-4.5)
    assert flags_mod.form_flags(with_aicc(-4.0, -4.0)) == []  # at -4: not flagged
    assert flags_mod.form_flags(with_aicc(-4.0, -9.0)) == [logr_flag]  # only the parameter the fit's law has not
    assert flags_mod.form_flags(with_aicc(-4.01, -9.0)) == [
        "per-r multipliers: AICc -4.0 against the fit's law: the r effect is not a power of r",
        logr_flag,
    ]
    assert flags_mod.form_flags(with_aicc(4.5, 0.0)) == []  # the rivals worse: nothing
    assert flags_mod.form_flags(with_aicc(4.5, -9.0, own="looped-logr")) == []  # the fit's own law is no rival


def test_approach2_is_flagged_past_1_96_standard_errors_only():
    se = 0.01
    at = {"a": 0.5 + 1.959 * se, "a_law": 0.5, "a_se": se}
    past = {"a": 0.5 - 1.961 * se, "a_law": 0.5, "a_se": se}
    assert flags_mod.form_flags(record(base_results(), FOLDS, approach2=at)) == []
    assert flags_mod.form_flags(record(base_results(), FOLDS, approach2=past)) == [
        "Approach 2 gives N* ~ C^0.480 +- 0.020, the law beta/(alpha+beta) = 0.500"
    ]


def test_the_verdict_line_and_flags_in_order():
    lr = {"flags": ["lr moves"]}
    conventions = {"flags": ["a convention moves phi"]}
    rec = record(base_results(), FOLDS, lr=lr, conventions=conventions)
    v = flags_mod.verdict(rec)
    assert v.line == (
        "the law predicts unseen budgets to 2.00% (worst 5.00%); unseen r to 0.40% (worst 1.20%); "
        "phi moves by at most 0.050 when one r is dropped (r = 4), against an interval half-width of 0.050"
    )
    assert v.flags == [
        "held out C = 1e+19: error 3.00% (bias +1.25%) is 2.0x the refit's own residuals",
        "phi moves by 0.050 when r = 4 is dropped (the interval's half-width is 0.050)",
        "lr moves",
        "a convention moves phi",
    ]
    assert v.holds is False
    assert v.budget_error == pytest.approx((0.02, 0.05)) and v.r_error == pytest.approx((0.004, 0.012))
    assert v.phi_shift == pytest.approx(0.0501) and v.half_width == pytest.approx(0.05)


def test_the_verdict_without_budget_or_r_folds_says_so_and_holds_when_nothing_is_flagged():
    folds = [{"kind": "full", "label": "all rows"}, {"kind": "run", "label": "runs 1 of 2 (1)"}]
    results = [
        {"form": 0, "fold": 0, "ok": True, "params": {"phi": 0.45}, "information": {"aicc": 1.0}},
        held_out_fit(0, 1, {"phi": 0.45}, 0.01, held(0.0123, 0.0, 0.0456, 0.01)),
    ]  # fmt: skip
    v = flags_mod.verdict(record(results, folds))
    assert v.line == ("no budget could be held out; no r could be held out; unseen runs to 1.23% (worst 4.56%)")
    assert v.holds is True and v.flags == [] and v.phi_shift is None


# -- the early fold and the loss check (a curve fit's phi resting on its first evaluations) ---------------------


def schedule_table(runs: dict[str, list[int]]) -> pd.DataFrame:
    # the schedule terms' values do not matter to the fold, only that the canonical table carries them
    rows = [
        {"run": name, "step": s, "S1_tokens": 0.0, "S2_anneal": 0.0, "S2_lambda": 0.0}
        for name, steps in runs.items()
        for s in steps
    ]
    return pd.DataFrame(rows)


def test_the_early_fold_holds_out_each_runs_evaluations_before_its_share_from_the_fits_curve_start():
    table = schedule_table({"a": [1, 5, 10, 20, 100], "b": [2, 40, 3, 20]})
    fold = folds_mod.early_fold(table, n_params=1, curve_start=0.0)
    # a: step < 0.1 x 100 = 10 -> 1, 5; b: < 0.1 x 40 = 4 -> 2, 3 (wherever the rows sit)
    assert (fold.kind, fold.label, fold.reason) == ("early", "each run's evaluations before 10% of its steps", None)
    assert fold.test.tolist() == [True, True, False, False, False, True, False, True, False]
    later = folds_mod.early_fold(table, n_params=1, curve_start=0.2)  # the fit's rows start at 20%: 30% here
    assert later.label == "each run's evaluations before 30% of its steps"
    assert later.test.tolist() == [True, True, True, True, False, True, False, True, False]
    # the rows left (3 at 30%) against twice the law's parameters: 2 x 1 = 2 <= 3, 2 x 2 = 4 > 3
    assert later.reason is None
    assert folds_mod.early_fold(table, n_params=2, curve_start=0.2).reason == "the rest holds 3 rows, fewer than 4"
    late = folds_mod.early_fold(table, n_params=1, curve_start=0.9)
    assert late.reason == "the fit starts each curve at 90%" and not late.test.any()
    none = folds_mod.early_fold(schedule_table({"c": [50, 100]}), n_params=1, curve_start=0.0)
    assert none.reason == "no run has evaluations there"


EARLY_FOLDS = [{"kind": "full", "label": "all rows"}, {"kind": "early", "label": "each run's first evaluations"}]


def test_a_curve_fits_phi_is_flagged_when_it_moves_past_the_half_width_without_the_early_evaluations():
    full = {"form": 0, "fold": 0, "ok": True, "params": {"phi": 0.45}, "information": {"aicc": 1.0}}
    at = held_out_fit(0, 1, {"phi": 0.50}, 0.01, held(0.07, 0.03, 0.27, 0.09))  # +0.05 = the half-width
    flags: list[str] = []
    assert flags_mod.early_shift(record([full, at], EARLY_FOLDS), flags) == pytest.approx(0.05) and flags == []
    past = held_out_fit(0, 1, {"phi": 0.3999}, 0.01, held(0.07, 0.03, 0.27, 0.09))
    v = flags_mod.verdict(record([full, past], EARLY_FOLDS))
    assert v.flags == [
        "phi moves by -0.050 when each run's first evaluations are left out (the interval's half-width is 0.050): "
        "phi rests on the curves' early transient; refit with a later --curve-start"
    ]
    # its held-out error (the transient, 9x the noise) is no flag of its own: the law is not asked to describe it
    assert (
        v.line
        == "no budget could be held out; no r could be held out; without each run's early evaluations phi moves by "
        "-0.050"
    )
    assert flags_mod.early_shift(record([full], [EARLY_FOLDS[0]]), []) is None


def test_phi_under_mse_is_flagged_past_the_half_width_from_the_fits_loss_and_only_against_the_same_law():
    from loopscale.fit.validation.forms import MSE

    assert flags_mod.MSE_KIND == MSE.kind  # the form validate fits under MSE is the one the flag reads
    forms = [
        {"label": "the fit's law", "law": "looped-curve", "loss": "huber"},
        {"label": "a rival under MSE", "law": "looped", "loss": "l2"},
        {"label": "the fit's law under MSE", "law": "looped-curve", "loss": "l2"},
    ]

    def results(phi_mse, phi_rival=0.9):
        return [
            {"form": 0, "fold": 0, "ok": True, "params": {"phi": 0.45}, "information": {"aicc": 1.0}},
            {"form": 1, "fold": 0, "ok": True, "params": {"phi": phi_rival}, "information": {"aicc": 1.0}},
            {"form": 2, "fold": 0, "ok": True, "params": {"phi": phi_mse}, "information": {"aicc": 1.0}},
        ]

    def rec(phi_mse):
        return record(results(phi_mse), [{"kind": "full", "label": "all rows"}], forms=forms)

    assert flags_mod.loss_flags(rec(0.50)) == []  # 0.05 apart: at the half-width, and the rival law never counts
    assert flags_mod.loss_flags(rec(0.3999)) == [
        "phi is 0.450 under the fit's loss and 0.400 under MSE (the interval's half-width is 0.050): it rests on how "
        "the points the law misses are weighed"
    ]
    assert (
        flags_mod.loss_flags(record(results(0.1)[:2], [{"kind": "full", "label": "all rows"}], forms=forms[:2])) == []
    )
