"""`loopscale advise`'s rules written out by hand (issue 58): the break-even's record and capped loss
(loopscale/analysis/advise/break_even.py), the sentences and table it prints (loopscale/analysis/advise/text.py),
what a fit record must hold (loopscale/analysis/advise/record_checks.py), the figure's curves
(loopscale/analysis/advise/curves.py) and which family matches a fit (loopscale/analysis/advise/matching.py).

The power-law family (loopscale.analysis.advise.family.power_law_family) has closed-form accounting: N_unique =
240 d^2, N_once = f N_unique, F = 6 (f + r (1 - f)) N_unique, so every expected loss below is eq. 1 by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

import loopscale.analysis.advise.break_even as break_even
import loopscale.analysis.advise.curves as curves
import loopscale.analysis.advise.matching as matching
import loopscale.analysis.advise.record_checks as record_checks
import loopscale.analysis.advise.text as text
from loopscale.analysis.advise.advice import Advice, advise
from loopscale.analysis.advise.family import power_law_family
from loopscale.analysis.advise.law_sets import looped_sets
from loopscale.analysis.advise.optimum import Constraints
from loopscale.errors import InputError
from loopscale.fit.result import FitResult
from support.fit_records import fit_record

TRUTH = {"E": 1.57, "A": 28.0, "alpha": 0.20, "B": 916.0, "beta": 0.37, "phi": 0.46}
F_ONCE = 0.2


def make_fit(params, replicates=None, shapes=None, data=None) -> FitResult:
    return fit_record(params, "looped", replicates, shapes, data)


def law_by_hand(p, r, n_unique, C):
    """Eq. 1 on the power-law family: N_eff = f N + r^phi (1 - f) N, D = C / (6 (f + r (1 - f)) N)."""
    n_eff = F_ONCE * n_unique + r ** p["phi"] * (1 - F_ONCE) * n_unique
    D = C / (6 * (F_ONCE + r * (1 - F_ONCE)) * n_unique)
    return p["E"] + p["A"] * n_eff ** -p["alpha"] + p["B"] * D ** -p["beta"]


# ----------------------------------------------------------------------------------------------------
# break_even.py


def test_capped_loss_is_the_law_at_the_smaller_of_the_free_and_the_capped_width_and_inf_below_one_step():
    family = power_law_family([1, 4], F_ONCE, width_step=8)
    sets = looped_sets({k: [v, v] for k, v in TRUTH.items()}, [1, 4])
    C = 1e19
    d_free = np.array([300.0, 40.0])
    cap = np.array([240 * 100.0**2, 240 * 100.0**2])  # d(M) = 100: binds the first set, not the second
    out = break_even.capped_loss(sets, family, 4, Constraints(C), d_free, cap)
    assert out[0] == pytest.approx(law_by_hand(TRUTH, 4, 240 * 100.0**2, C), rel=1e-12)
    assert out[1] == pytest.approx(law_by_hand(TRUTH, 4, 240 * 40.0**2, C), rel=1e-12)
    tiny = np.array([240 * 7.9**2, 240 * 8.0**2])  # d(M) just below / at the width step
    below_step = break_even.capped_loss(sets, family, 4, Constraints(C), np.array([300.0, 300.0]), tiny)
    assert below_step[0] == np.inf and below_step[1] == pytest.approx(law_by_hand(TRUTH, 4, 240 * 64.0, C))


def test_the_break_even_entry_reads_never_as_zero_and_takes_the_nearest_percentiles():
    reps = np.array([np.nan, 5.0, 1.0, np.inf, 3.0, 2.0, 4.0, 6.0, 7.0, 8.0])  # as 0..8 and inf, sorted
    e80 = break_even._break_even_entry(2.5, reps, 0.8)  # tails 10% / 90%: ranks 0.9 -> 1 and 8.1 -> 8
    assert e80 == {
        "M": 2.5,
        "looping_always_wins": False,
        "looping_never_wins": False,
        "interval": [1.0, 8.0],
        "share_always": 0.1,
        "share_never": 0.1,
    }
    e95 = break_even._break_even_entry(np.inf, reps, 0.95)  # tails 2.5% / 97.5%: ranks 0 and 9 (inf)
    assert e95["interval"] == [0.0, None] and e95["M"] is None and e95["looping_always_wins"]
    assert not e95["looping_never_wins"]
    shares = break_even._break_even_entry(1.0, np.array([np.inf, np.inf, np.nan, 1.0]), 0.5)
    assert shares["share_always"] == 0.5 and shares["share_never"] == 0.25
    never = break_even._break_even_entry(np.nan, None, 0.95)
    assert never == {"M": None, "looping_always_wins": False, "looping_never_wins": True}


@pytest.mark.parametrize(("phi", "always", "never"), [(0.0, False, True), (1.5, True, False)])
def test_looping_that_never_or_always_wins_is_said_so(phi, always, never):
    """phi = 0: a loop adds compute and no capacity, r = 1 wins at every cap; phi = 1.5: r^phi > r, the loop
    is worth more than the dense model it costs, r = 4 wins at every cap (also without one)."""
    params = {**TRUTH, "phi": phi}
    record = advise(
        make_fit(params), compute_flops=1e19, family=power_law_family([1, 4], F_ONCE), r_values=[1, 4]
    ).record
    entry = record["break_even"]["overall"]
    assert entry["looping_always_wins"] is always and entry["looping_never_wins"] is never and entry["M"] is None
    assert record["break_even"]["r=4"] == entry and record["break_even"]["looped"] == [4]


def test_break_even_needs_r1_and_a_looped_r():
    family = power_law_family([1, 2, 4], F_ONCE)
    assert break_even.break_even_record(None, None, family, Constraints(1e19), [2, 4], 0.95) is None
    assert break_even.break_even_record(None, None, family, Constraints(1e19), [1], 0.95) is None


# ----------------------------------------------------------------------------------------------------
# text.py


def _be(entry: dict, level=0.9) -> dict:
    return {"compute_flops": 2.5e20, "looped": [2, 4], "level": level, "overall": entry}


@pytest.mark.parametrize(
    ("entry", "tail"),
    [
        (
            {"M": 3.21e8, "looping_always_wins": False, "looping_never_wins": False},
            "below 3.21e+08 unique parameters r in [2, 4] beats r = 1",
        ),
        (
            {"M": None, "looping_always_wins": True, "looping_never_wins": False},
            "r in [2, 4] beats r = 1 at every unique-parameter cap (also without one)",
        ),
        (
            {"M": None, "looping_always_wins": False, "looping_never_wins": True},
            "r = 1 is never beaten by r in [2, 4], whatever the cap",
        ),
        (
            {"M": 1e8, "looping_always_wins": False, "looping_never_wins": False, "interval": [0.0, 0.0]}
            | {"share_never": 0.4, "share_always": 0.0},
            "below 1e+08 unique parameters r in [2, 4] beats r = 1 (r = 1 is never beaten in 40% of the replicates)",
        ),
        (
            {"M": 1e8, "looping_always_wins": False, "looping_never_wins": False, "interval": [None, None]}
            | {"share_never": 0.0, "share_always": 0.3},
            "below 1e+08 unique parameters r in [2, 4] beats r = 1 (r in [2, 4] beats r = 1 at every cap in 30% "
            "of the replicates)",
        ),
        (
            {"M": 1e8, "looping_always_wins": False, "looping_never_wins": False, "interval": [0.0, 2.46e8]}
            | {"share_never": 0.1, "share_always": 0.0},
            "below 1e+08 unique parameters r in [2, 4] beats r = 1 (90% interval over the replicates: never beaten "
            "to 2.46e+08)",
        ),
        (
            {"M": 1e8, "looping_always_wins": False, "looping_never_wins": False, "interval": [5.5e7, None]}
            | {"share_never": 0.0, "share_always": 0.2},
            "below 1e+08 unique parameters r in [2, 4] beats r = 1 (90% interval over the replicates: 5.5e+07 to "
            "unbounded)",
        ),
    ],
)
def test_the_break_even_sentence_per_case(entry, tail):
    assert text._break_even_line(_be(entry), "overall", "r in [2, 4]") == f"break-even at C = 2.5e+20: {tail}"


def _record(**over) -> dict:
    rec = {
        "constraints": {
            "compute_flops": 1e20,
            "max_unique_params": None,
            "max_inference_flops": None,
            "inference_tokens": None,
        },
        "family": {"name": "paper", "recipe": "baseline", "width_step": 128},
        "fit": {"law": "looped", "verdict": None},
        "per_r": [
            {
                "r": 1,
                "feasible": True,
                "binding": None,
                "advised": {
                    "d_model": 1024,
                    "N_unique": 2.5e8,
                    "N_eff": 2.5e8,
                    "D_tokens": 6.1e9,
                    "tokens_per_unique_param": 24.4,
                    "L": 2.91234,
                    "L_interval": [2.9, 2.95],
                },
                "replicates": {"L_opt": [2.8, 2.99], "N_unique": [1e8, 4e8], "D_tokens": [3e9, 9e9]},
            },
            {
                "r": 2,
                "feasible": True,
                "binding": "max_unique_params",
                "advised": {
                    "d_model": 896,
                    "N_unique": 1.2e8,
                    "N_eff": 1.9e8,
                    "D_tokens": 5.0e9,
                    "tokens_per_unique_param": 41.7,
                    "L": 2.93,
                    "L_interval": None,
                },
            },
            {"r": 8, "feasible": False, "reason": "r = 8: no width meets max_unique_params"},
        ],
        "best": {"r": 2, "share": {"1": 0.25, "2": 0.75}, "verdict": "r = 2: best in 75%"},
        "warnings": ["extrapolates beyond the fitted budgets"],
        "break_even": None,
    }
    rec.update(over)
    return rec


def test_the_advice_table_has_one_row_per_r_with_its_share_and_the_best_marked():
    table = text.advice_table(Advice(_record(), {}))
    assert table["r"].tolist() == [1, 2, 8]
    assert table["share_best"].tolist()[:2] == [0.25, 0.75] and table["note"].tolist() == ["", "best", text_reason()]
    assert table["L_opt_interval"].tolist()[0] == [2.8, 2.99] and table["D_interval"].tolist()[0] == [3e9, 9e9]
    assert (
        table["tokens_per_param"].tolist()[:2] == [24.4, 41.7] and table["binding"].tolist()[1] == "max_unique_params"
    )


def text_reason():
    return "r = 8: no width meets max_unique_params"


def test_render_prints_the_constraints_the_rows_and_the_sentences():
    lines = text.render(Advice(_record(), {}))
    assert lines[0] == (
        "advice for C = 1e+20 FLOPs, unique-parameter cap none; family paper (baseline, widths in steps of 128); "
        "fit looped"
    )
    assert lines[2].split() == ["1", "1024", "2.5e+08", "2.5e+08", "6.1e+09", "24.4", "2.9123", "[2.9,", "2.95]"] + [
        "[1e+08,",
        "4e+08]",
        "[3e+09,",
        "9e+09]",
        "25%",
        "-",
    ]
    assert lines[3].startswith("*  2     896   1.2e+08") and lines[3].split()[-2:] == ["75%", "max_unique_params"]
    assert lines[3].split()[8] == "-"  # no L interval
    assert lines[4] == "   8 r = 8: no width meets max_unique_params"
    assert lines[5:] == [
        "fit: no verdict recorded",
        "best: r = 2: best in 75%",
        "note: extrapolates beyond the fitted budgets",
    ]
    capped = _record(
        constraints={
            "compute_flops": 3e21,
            "max_unique_params": 1.5e8,
            "max_inference_flops": 2e9,
            "inference_tokens": 1e12,
        },
        best={"r": 2, "share": None, "verdict": "r = 2"},
    )
    head = text.render(Advice(capped, {}))
    assert head[0].startswith(
        "advice for C = 3e+21 FLOPs, unique-parameter cap 1.5e+08, inference <= 2e+09 FLOPs/token, lifetime cost "
        "with 1e+12 tokens served; family paper"
    )
    assert head[2].split()[-2:] == ["-", "-"] and head[3].split()[-2:] == ["-", "max_unique_params"]


def test_an_infeasible_r_beside_point_estimates_only_prints_dashes_not_a_traceback():
    """Without replicates every interval is None and the infeasible r's row has none at all: the table's
    column is NaN there (it crashed render with "'float' object is not subscriptable"; beside such a row a free
    width printed binding "nan": test_render_prints_the_constraints_the_rows_and_the_sentences)."""
    from loopscale.analysis.advise.family import named_family

    family = named_family("paper", (1, 8))
    advice = advise(make_fit(TRUTH), compute_flops=1e15, max_unique_params=2e6, family=family, r_values=(1, 8))
    lines = text.render(advice)
    assert lines[2].startswith("   1 r = 1: no width meets max_unique_params: the smallest model (d = 128) has")
    assert lines[3].split()[:2] == ["*", "8"] and lines[3].split()[-5:] == ["-", "-", "-", "-", "min_width"]


def test_summary_lines_add_the_overall_break_even():
    be = _be({"M": 4e8, "looping_always_wins": False, "looping_never_wins": False}) | {"r=2": {}}
    lines = text.summary_lines(
        Advice(_record(fit={"law": "looped", "verdict": "looped beats r = 1"}, break_even=be), {})
    )
    assert lines == [
        "fit: looped beats r = 1",
        "best: r = 2: best in 75%",
        "break-even at C = 2.5e+20: below 4e+08 unique parameters r in [2, 4] beats r = 1",
        "note: extrapolates beyond the fitted budgets",
    ]


# ----------------------------------------------------------------------------------------------------
# record_checks.py


def test_a_parameter_on_its_bound_within_the_relative_tolerance_is_read_and_beyond_it_refused():
    record_checks.check_record(make_fit({**TRUTH, "alpha": 5.0 * (1 + 0.5e-6), "phi": -1.0 * (1 + 0.5e-6)}))
    with pytest.raises(InputError, match=r"parameter alpha = 5.00001 is outside the fitter's bounds \[0, 5\]"):
        record_checks.check_record(make_fit({**TRUTH, "alpha": 5.0 * (1 + 2e-6)}))
    with pytest.raises(InputError, match="parameter phi"):
        record_checks.check_record(make_fit({**TRUTH, "phi": -1.0 * (1 + 2e-6)}))
    with pytest.raises(InputError, match="parameter beta"):
        record_checks.check_record(make_fit({**TRUTH, "beta": -1e-12}))  # a bound at 0 has no slack
    for bad, message in [(True, "must be a number"), (math.inf, "is not finite"), ("0.3", "must be a number")]:
        with pytest.raises(InputError, match=f"parameter beta.*{message}|parameter beta {message}"):
            record_checks.check_record(make_fit({**TRUTH, "beta": bad}))
    params = dict(TRUTH)
    del params["phi"]
    with pytest.raises(InputError, match="the looped fit has no parameter 'phi'"):
        record_checks.check_record(make_fit(params))


def test_replicates_may_hold_nulls_but_one_length_and_the_box():
    reps = {k: [v, None, v] for k, v in TRUTH.items()}
    record_checks.check_record(make_fit(TRUTH, reps))
    uneven = {**reps, "A": [28.0, 28.0]}
    with pytest.raises(InputError, match=r"unequal lengths \[2, 3\]"):
        record_checks.check_record(make_fit(TRUTH, uneven))
    with pytest.raises(InputError, match="a bootstrap replicate of beta = 6 is outside"):
        record_checks.check_record(make_fit(TRUTH, {**reps, "beta": [0.3, 6.0, 0.3]}))
    with pytest.raises(InputError, match="replicates of E must be numbers or null; got 'x'"):
        record_checks.check_record(make_fit(TRUTH, {**reps, "E": [1.5, "x", 1.5]}))
    at_limit = {k: [v] * record_checks.MAX_REPLICATES for k, v in TRUTH.items()}
    record_checks.check_record(make_fit(TRUTH, at_limit))
    over = {**at_limit, "E": at_limit["E"] + [1.5]}
    with pytest.raises(InputError, match="100,001 bootstrap replicates; advise reads at most 100,000"):
        record_checks.check_record(make_fit(TRUTH, over))


def test_a_shape_is_a_whole_r_at_least_1_with_positive_n_once_and_nonnegative_n_rec():
    record_checks.check_record(make_fit(TRUTH, shapes=[[1, 1e6, 0.0], [4.0, 2e5, 8e5]], data={"N": [1e6, 1e6]}))
    for shape, message in [
        ([1.5, 1e6, 0.0], "r a whole number >= 1"),
        ([0, 1e6, 0.0], "r a whole number >= 1"),
        ([2, 0.0, 1e6], "N_once > 0, N_rec >= 0"),
        ([2, 1e6, -1.0], "N_once > 0, N_rec >= 0"),
        ([2, 1e6], r"must be \[r, N_once, N_rec\]"),
        ([2, True, 1e6], r"must be \[r, N_once, N_rec\]"),
    ]:
        with pytest.raises(InputError, match=message):
            record_checks.check_record(make_fit(TRUTH, shapes=[shape]))
    record_checks.check_record(make_fit(TRUTH, shapes=[[1, 1e6, 0.0]] * record_checks.MAX_SHAPES))
    with pytest.raises(InputError, match="10,001 model shapes; advise reads at most 10,000"):
        record_checks.check_record(make_fit(TRUTH, shapes=[[1, 1e6, 0.0]] * (record_checks.MAX_SHAPES + 1)))


def test_a_range_is_low_high_positive_and_ordered():
    for span in ([1e6, 1e6], [2.0, 3.0]):
        record_checks.check_record(make_fit(TRUTH, data={"D": span}))
    for span, message in [
        ([0.0, 1e6], "0 < low <= high"),
        ([2e6, 1e6], "0 < low <= high"),
        ([1e6, math.inf], "0 < low <= high"),
        ([1e6], r"must be \[low, high\]"),
    ]:
        with pytest.raises(InputError, match=f"range of C {message}|range of C must be"):
            record_checks.check_record(make_fit(TRUTH, data={"C": span}))


# ----------------------------------------------------------------------------------------------------
# curves.py


def test_the_curves_span_a_thirtieth_to_thirty_times_the_advised_sizes_with_the_replicates_band():
    family = power_law_family([1, 4], F_ONCE)
    C = 1e19
    reps = {k: [v] * 9 for k, v in TRUTH.items()}
    reps["phi"] = [0.1 * i for i in range(9)]
    advice = advise(make_fit(TRUTH, reps), compute_flops=C, family=family, r_values=[1, 4], level=0.8)
    sizes = [rec["advised"]["N_unique"] for rec in advice.record["per_r"]]
    for r, curve in advice.curves.items():
        assert len(curve["N_unique"]) == curves.N_WIDTHS
        assert curve["N_unique"][0] == pytest.approx(min(sizes) / 30, rel=1e-9)
        assert curve["N_unique"][-1] == pytest.approx(max(sizes) * 30, rel=1e-9)
        assert curve["L"] == pytest.approx([law_by_hand(TRUTH, r, n, C) for n in curve["N_unique"]], rel=1e-12)
        per_rep = np.array(
            [[law_by_hand({**TRUTH, "phi": p}, r, n, C) for n in curve["N_unique"]] for p in reps["phi"]]
        )
        assert curve["L_lo"] == pytest.approx(np.percentile(per_rep, 10, axis=0), rel=1e-12)
        assert curve["L_hi"] == pytest.approx(np.percentile(per_rep, 90, axis=0), rel=1e-12)
        assert curve["feasible"].all()  # no cap, no serving: every width is allowed


def test_a_curves_feasible_part_ends_at_the_inference_limit_not_at_the_cap():
    family = power_law_family([1, 2], F_ONCE)
    C, cap, infer = (
        1e19,
        5e6,
        2 * 240 * 1.8 * 300.0**2,
    )  # F_infer = 2 kappa N, kappa = 1.8 at r = 2: width 300 is the limit
    cons = Constraints(C, max_unique_params=cap, max_inference_flops=infer)
    per_r = [{"r": 2, "feasible": True, "advised": {"N_unique": 240 * 150.0**2}}]
    out = curves.advice_curves(looped_sets(TRUTH, [2]), None, family, per_r, cons, 0.95)[2]
    widths = np.sqrt(out["N_unique"] / 240)
    assert out["feasible"].tolist() == (widths <= 300.0 * (1 + 1e-9)).tolist()
    assert out["feasible"].any() and not out["feasible"].all() and "L_lo" not in out


# ----------------------------------------------------------------------------------------------------
# matching.py


def test_a_family_matches_a_shape_by_unique_and_at_r_above_1_recurrent_counts_within_its_tolerance():
    family = power_law_family([1, 4], F_ONCE, width_step=16)
    n = 240 * 64.0**2  # width 64: N_once 0.2 n, N_rec 0.8 n
    assert matching.mismatches(family, [[1, n, 0.0], [4, 0.2 * n, 0.8 * n]]) == []
    assert matching.mismatches(family, [[1, 0.5 * n, 0.5 * n]]) == []  # r = 1: the split does not enter the law
    assert matching.mismatches(family, [[4, n * (0.2 - 5e-5), n * (0.8 + 5e-5)]]) == []  # N_rec within 1e-4
    off = matching.mismatches(family, [[4, 0.3 * n, 0.7 * n]])
    assert off == [f"r = 4, N_once + N_rec = {n:.4g} (nearest width d = 64 has {n:.4g})"]
    assert matching.mismatches(family, [[1, n * (1 + 2e-4), 0.0]]) != []
    assert matching.mismatches(family, [[1, n * (1 + 0.5e-4), 0.0]]) == []
    assert matching.mismatches(family, [[1, n * (1 - 0.5e-4), 0.0]]) == []  # width 63.998 is 64, not 48
    between = 240 * 72.0**2  # width 72 is not a multiple of 16: the nearest (64 or 80) is off by > 20%
    assert matching.mismatches(family, [[1, between, 0.0]])[0].startswith("r = 1, N_once + N_rec = 1.244e+06")
    assert matching.mismatches(family, [[8, n, 0.0]]) == ["r = 8 (the family has r in [1, 4])"]


# ----------------------------------------------------------------------------------------------------
# advice.py and optimum.py: the advised model's accounting, the warnings, the domain


def test_the_advised_model_counts_its_steps_tokens_per_parameter_and_effective_size():
    from loopscale.analysis.advise.family import Family

    base = power_law_family([1, 4], F_ONCE, width_step=16)
    family = Family("power-law", base.polys, 16, batch_tokens=4096, width_ceiling=1e9)
    C = 7e18  # r = 1's D is 0.93 of a batch past a whole step: the steps are rounded, not cut
    record = advise(make_fit(TRUTH), compute_flops=C, family=family, r_values=[1, 4]).record
    for rec in record["per_r"]:
        r, m = rec["r"], rec["advised"]
        d = m["d_model"]
        assert d % 16 == 0
        n = 240 * d**2
        D = C / (6 * (F_ONCE + r * (1 - F_ONCE)) * n)
        assert m["N_unique"] == pytest.approx(n) and m["D_tokens"] == pytest.approx(D, rel=1e-12)
        assert m["N_eff"] == pytest.approx(F_ONCE * n + r ** TRUTH["phi"] * (1 - F_ONCE) * n, rel=1e-12)
        assert m["steps"] == max(1, round(D / 4096)) and m["tokens_per_unique_param"] == pytest.approx(D / n)
        assert m["infer_flops_per_token"] == pytest.approx(2 * (F_ONCE + r * (1 - F_ONCE)) * n, rel=1e-12)
        assert m["L"] == pytest.approx(law_by_hand(TRUTH, r, n, C), rel=1e-12)
        assert rec["binding"] is None and rec["continuous"]["L"] <= m["L"]
    T = 1e9  # tokens served: eq. 2', D = (C - T F_infer) / F
    served = advise(make_fit(TRUTH), compute_flops=C, inference_tokens=T, family=family, r_values=[1, 4]).record
    for rec in served["per_r"]:
        kappa, n = F_ONCE + rec["r"] * (1 - F_ONCE), rec["advised"]["N_unique"]
        expected = (C - T * 2 * kappa * n) / (6 * kappa * n)
        assert rec["advised"]["D_tokens"] == pytest.approx(expected, rel=1e-12)


def test_the_warnings_say_where_the_advice_leaves_the_fitted_range_with_one_percent_slack():
    family = power_law_family([1, 4], F_ONCE)
    C = 1e19

    def warnings(data):
        return advise(make_fit(TRUTH, data=data), compute_flops=C, family=family, r_values=[1, 4]).record["warnings"]

    inside = warnings({"C": [C * 1.0099, 2e19]})
    assert not any("outside the fitted budgets" in w for w in inside)
    outside = warnings({"C": [C * 1.0101, 2e19]})
    assert any(w.startswith("C = 1e+19 FLOPs is outside the fitted budgets (1.01e+19 to 2e+19)") for w in outside)
    assert any("outside the fitted budgets" in w for w in warnings({"C": [1e17, C / 1.0102]}))
    narrow = warnings({"N": [1.0, 2.0], "D": [1.0, 1e30]})
    assert any(w.startswith("the advised N_unique = ") and "outside the fitted N range (1 to 2)" in w for w in narrow)
    assert not any("fitted D range" in w for w in narrow)


def test_a_fit_not_measured_makes_the_best_r_tentative_and_repeats_its_warnings():
    from loopscale.fit.verdict_record import Conditioning

    fit = make_fit(TRUTH)
    fit.conditioning = Conditioning([], ["N* extrapolated 10x"], "not measured: phi on its bound", False)
    record = advise(fit, compute_flops=1e19, family=power_law_family([1, 4], F_ONCE), r_values=[1, 4]).record
    assert record["best"]["verdict"].startswith("tentative (the fit is not measured): r = ")
    assert record["warnings"][:2] == [
        "the fit's verdict is 'not measured: phi on its bound': its phi is not a measurement, so neither is the "
        "choice of r",
        "the fit's verdict warns: N* extrapolated 10x",
    ]
    fit.conditioning = Conditioning([], [], "phi measured", True)
    measured = advise(fit, compute_flops=1e19, family=power_law_family([1, 4], F_ONCE), r_values=[1, 4]).record
    assert not measured["best"]["verdict"].startswith("tentative") and measured["fit"]["measured"] is True


def test_the_domain_names_its_binding_limit_and_one_optimizer_step_is_the_least_training():
    from loopscale.analysis.advise.family import Family
    from loopscale.analysis.advise.optimum import width_domain

    base = power_law_family([2], F_ONCE)
    family = Family("power-law", base.polys, 1, batch_tokens=1000, width_ceiling=1e9)
    C = 6 * 1.8 * 240 * 1000 * 50.0**2  # one step of 1000 tokens at width 50 spends C
    dom = width_domain(family, 2, Constraints(C))
    assert dom.binding == "one_step" and dom.hi == pytest.approx(50.0, rel=1e-9) and dom.lo == 1.0
    served = width_domain(family, 2, Constraints(C, inference_tokens=1000.0))  # serving 1000 tokens costs F / 3
    assert served.hi == pytest.approx(50.0 * math.sqrt(3 / 4), rel=1e-9)
    capped = width_domain(family, 2, Constraints(C, max_unique_params=240 * 30.0**2, max_inference_flops=1e12))
    assert capped.binding == "max_unique_params" and capped.hi == pytest.approx(30.0, rel=1e-9)
    infer = width_domain(family, 2, Constraints(C, max_inference_flops=2 * 1.8 * 240 * 20.0**2))
    assert infer.binding == "max_inference_flops" and infer.hi == pytest.approx(20.0, rel=1e-9)
    tiny = width_domain(family, 2, Constraints(C, max_unique_params=100.0))
    assert tiny == "r = 2: no width meets max_unique_params: the smallest model (d = 1) has 240 unique parameters"
    for bad in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(InputError, match="compute_flops must be a positive number"):
            Constraints(bad)
    with pytest.raises(InputError, match="max_unique_params must be a positive number"):
        Constraints(1e19, max_unique_params=0.0)


# ----------------------------------------------------------------------------------------------------
# law_sets.py: what advise reads from the record


def test_a_replicate_with_any_missing_value_is_dropped_whole_and_fewer_than_two_leave_none():
    from loopscale.analysis.advise.law_sets import fit_law_sets

    reps = {k: [v, v, v, v] for k, v in TRUTH.items()}
    reps["phi"] = [0.3, None, 0.5, 0.7]
    reps["beta"] = [0.37, 0.37, float("nan"), 0.37]
    point, sets, recipe = fit_law_sets(make_fit(TRUTH, reps), [1, 2, 4])
    assert recipe is None and len(sets) == 2
    assert sets.multiplier[4].tolist() == pytest.approx([4**0.3, 4**0.7], rel=1e-12)
    assert sets.multiplier[1].tolist() == [1.0, 1.0]
    assert point.multiplier[2].tolist() == pytest.approx([2 ** TRUTH["phi"]], rel=1e-12)
    reps["phi"] = [0.3, None, None, None]
    assert fit_law_sets(make_fit(TRUTH, reps), [1, 2])[1] is None  # one replicate left: no interval
    partial = {k: v for k, v in reps.items() if k != "A"}
    assert fit_law_sets(make_fit(TRUTH, partial), [1, 2])[1] is None  # a parameter without replicates


def test_the_advised_recipe_the_default_r_and_a_dense_fits_refusal():
    from loopscale.analysis.advise import law_sets

    fit = make_fit(TRUTH)
    assert law_sets.advised_recipe(fit, "hyper") == "hyper" and law_sets.advised_recipe(fit, None) == "baseline"
    fit.group = {"column": "recipe", "value": "truncated"}
    assert law_sets.advised_recipe(fit, None) == "truncated"
    fit.group = {"column": "width", "value": "256"}
    assert law_sets.advised_recipe(fit, None) == "baseline"
    assert law_sets.default_r_values(fit, [[4, 1, 1], [1, 2, 0], [2, 1, 1], [4, 3, 3]]) == [1, 2, 4]
    assert law_sets.default_r_values(fit, [[4, 1, 1], [2, 1, 1]]) == [2, 4]  # the r it saw, no more
    assert law_sets.default_r_values(fit, None) == [1, 2, 4, 8]
    dense = FitResult("chinchilla", {k: TRUTH[k] for k in ("E", "A", "alpha", "B", "beta")}, 0, 0, 1, 1, 1, {})
    assert law_sets.default_r_values(dense, [[4, 1, 1]]) == [1]
    with pytest.raises(InputError, match="a chinchilla fit has no phi.*only r = 1 can be advised"):
        law_sets.check_law(dense, [1, 2], None)
    assert law_sets.check_law(dense, [1], None) is None


# ----------------------------------------------------------------------------------------------------
# family.py: the quadratics in the width


def test_a_family_is_quadratics_in_the_width_with_their_root_slope_and_size():
    from loopscale.analysis.advise import family as fam

    polys = {2: {"N_once": (100.0, 3.0, 2.0), "N_rec": (0.0, 1.0, 4.0), "F": (0.0, 0.0, 6.0), "F_infer": (1, 2, 3)}}
    f = fam.Family("t", polys, 64, batch_tokens=512, size_unit=64)
    assert f.value("N_unique", 2, 10.0) == pytest.approx(100 + 4 * 10 + 6 * 100)  # N_once + N_rec
    assert f.slope("N_rec", 2, 10.0) == pytest.approx(1 + 2 * 4 * 10)
    assert f.width_for("N_unique", 2, 740.0) == pytest.approx(10.0, rel=1e-12)
    assert f.width_for("F", 2, 600.0) == pytest.approx(10.0, rel=1e-12)
    assert fam.positive_root((1.0, 2.0, 0.0), 21.0) == pytest.approx(10.0)  # linear
    assert f.size_of(320) == 5.0 and fam.Family("u", polys, 64, 512).size_of(320) is None
    assert (
        f.max_width == 64 * fam.MAX_WIDTH_STEPS and fam.Family("v", polys, 64, 512, width_ceiling=1e4).max_width == 1e4
    )
    with pytest.raises(InputError, match=r"family 't' has no r = 4 \(built for r in \[2\]\)"):
        f.value("F", 4, 10.0)
    assert f.describe() == {
        "name": "t", "width_step": 64, "batch_tokens": 512, "experiment": None, "recipe": "baseline", "r_values": [2]
    }  # fmt: skip


def test_interpolation_is_exact_on_a_quadratic_and_refuses_what_is_not_one():
    from loopscale.analysis.advise import family as fam

    def quad(d):
        return {q: 5.0 + 2.0 * d + 0.5 * d * d for q in fam.QUANTITIES}

    assert fam.interpolate(quad, 16)["F"] == pytest.approx((5.0, 2.0, 0.5), rel=1e-9)

    def rounded(d):  # a rounded hidden width: off the quadratic at 8 steps
        return {q: 5.0 + 2.0 * d + 0.5 * d * d + (1.0 if d == 128 else 0.0) for q in fam.QUANTITIES}

    with pytest.raises(InputError, match="is not a quadratic in the width"):
        fam.interpolate(rounded, 16)
    with pytest.raises(InputError, match="--family custom needs --experiment NAME"):
        fam.named_family("custom", [1])
    with pytest.raises(InputError, match="unknown family 'tiny'; choose from paper, demo, cpu, custom"):
        fam.named_family("tiny", [1])
    with pytest.raises(InputError, match="--experiment and --override go with --family custom, not --family demo"):
        fam.named_family("demo", [1], experiment="x")
