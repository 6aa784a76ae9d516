"""`loopscale validate`'s Markdown row by row (issue 58): loopscale/fit/validation/text.py, each table's cells
from the field they read, rounded as printed (the forms' mean held-out error per kind, dAICc against the fit's law,
the folds' x noise, Approach 2's interval or +- 1.96 se, the lr grid's multipliers and |dphi|, the conventions'
flags, which table was validated). Records built by hand: milliseconds."""

from __future__ import annotations

from loopscale.fit.validation.record import FoldResult, ValidationRecord
from loopscale.fit.validation.text import (
    approach2_lines,
    convention_lines,
    folds_table,
    forms_table,
    lr_lines,
    table_line,
)
from support.validation import held, held_out_fit

FORMS = [
    {"label": "looped", "law": "looped", "reason": None},
    {"label": "per-r multipliers", "law": "looped-free", "reason": None},
    {"label": "log r", "law": "looped-logr", "reason": "needs r > 1 at two sizes"},
]
FOLDS = [
    {"kind": "full", "label": "all rows", "n_test": 0, "reason": None},
    {"kind": "budget", "label": "C = 1e+18", "n_test": 4, "reason": None},
    {"kind": "budget", "label": "C = 1e+19", "n_test": 5, "reason": None},
    {"kind": "r", "label": "r = 2", "n_test": 3, "reason": None},
    {"kind": "r", "label": "r = 8", "n_test": 2, "reason": "dropping it leaves runs at r = 1 only"},
]


def record() -> ValidationRecord:
    results = [
        {"form": 0, "fold": 0, "ok": True, "params": {"phi": 0.45678},
         "information": {"k": 6, "aicc": -123.456, "bic": -110.04}},
        {"form": 1, "fold": 0, "ok": True, "params": {},
         "information": {"k": 8, "aicc": -127.5, "bic": -111.96}},
        held_out_fit(0, 1, {"phi": 0.4}, 0.004, held(0.0100, -0.00456, 0.0300, 0.0104)),
        held_out_fit(0, 2, {"phi": 0.5}, 0.005, held(0.0200, 0.0123, 0.0400, 0.0051)),
        held_out_fit(0, 3, {"phi": 0.61234}, 0.01, held(0.0050, 0.001, 0.0080, 0.006)),
        held_out_fit(1, 1, {}, 0.004, held(0.0400, 0.0, 0.0500, 0.01)),
        {"form": 1, "fold": 2, "ok": False, "reason": "the optimiser failed"},
    ]  # fmt: skip
    return ValidationRecord(
        fit={"law": "looped", "path": "runs.csv", "phi_interval": [0.4, 0.5]},
        n_rows=14,
        forms=FORMS,
        folds=FOLDS,
        results=[FoldResult(**r) for r in results],
    )


def test_the_forms_table_reads_each_forms_whole_table_row_and_its_mean_held_out_error_per_kind():
    assert forms_table(record()) == [
        "| form | k | phi | AICc | dAICc | BIC | unseen budgets | unseen r |",
        "|---|---|---|---|---|---|---|---|",
        # budgets: (1.00% + 2.00%) / 2; r: the one r fold done
        "| looped | 6 | 0.457 | -123.5 | +0.0 | -110.0 | 1.50% | 0.50% |",
        # its one budget fold done (the other failed: left out of the mean); no r fold
        "| per-r multipliers | 8 | - | -127.5 | -4.0 | -112.0 | 4.00% | - |",
        "| log r | cannot: needs r > 1 at two sizes | | | | | | |",
    ]


def test_the_folds_table_says_each_impossible_fold_once_then_each_fitted_fold_with_its_noise_ratio():
    assert folds_table(record()) == [
        "| form | held out | rows | mean abs error | worst | bias | x noise | phi |",
        "|---|---|---|---|---|---|---|---|",
        "| every form | r = 8 | cannot: dropping it leaves runs at r = 1 only | | | | | |",
        "| looped | C = 1e+18 | 4 | 1.00% | 3.00% | -0.46% | 2.6 | 0.400 |",  # 0.0104 / 0.004
        "| looped | C = 1e+19 | 5 | 2.00% | 4.00% | +1.23% | 1.0 | 0.500 |",  # the rms, not the mean |error|
        "| looped | r = 2 | 3 | 0.50% | 0.80% | +0.10% | 0.6 | 0.612 |",
        "| per-r multipliers | C = 1e+18 | 4 | 4.00% | 5.00% | +0.00% | 2.5 | - |",
        "| per-r multipliers | C = 1e+19 | cannot: the optimiser failed | | | | | |",
    ]


def test_approach2_prints_its_interval_or_else_1_96_se_and_the_budgets_window_and_n_star():
    a2 = {
        "method": "a parabola in ln N about the lowest",
        "sigma_log": 0.0123456,
        "sigma_source": "seed repeats",
        "budgets": [
            {"C": 1.234e18, "n_sizes": 5, "window": [1.1e7, 4.56e7], "n_window": 4, "N_star": 2.3456e7,
             "interval": [1.9e7, 2.81e7], "reason": None},
            {"C": 1e19, "n_sizes": 3, "window": None, "n_window": 0, "N_star": None, "interval": None,
             "reason": "its lowest loss is at the edge"},
        ],
        "a": 0.51234, "a_se": 0.0211, "a_interval": None, "a_law": 0.48765, "reason": None,
    }  # fmt: skip
    lines = approach2_lines(a2)
    assert lines[:6] == [
        "Per budget: a parabola in ln N about the lowest; 95% intervals from a parametric bootstrap (sigma of log L "
        "0.0123, from seed repeats).",
        "",
        "| budget C | sizes | window (N) | N* | 95% interval |",
        "|---|---|---|---|---|",
        "| 1.23e+18 | 5 | 1.1e+07-4.56e+07 (4) | 2.35e+07 | [1.9e+07, 2.81e+07] |",
        "| 1e+19 | 3 | - | none: its lowest loss is at the edge | - |",
    ]
    # no interval: +- 1.96 se (0.041356); no tau: the plain weighting
    assert lines[6] == (
        "\nApproach 2: N* ~ C^0.512 +- 0.041 (95%, weighted by each budget's se); the law's beta / (alpha + beta) "
        "= 0.488."
    )
    both = {**a2, "a_interval": [0.47, 0.555], "tau_log": 0.1234, "a_interp": 0.5049}
    assert approach2_lines(both)[6:] == [
        "\nApproach 2: N* ~ C^0.512 [0.470, 0.555] (95%, weighted by each budget's se and the budgets' scatter "
        "about the line, tau = 0.123 in ln N*); the law's beta / (alpha + beta) = 0.488.",
        "The interpolation rule (per budget the argmin of an Akima spline through every size, as in Porian et al. "
        "2024's released analysis; an unweighted line) gives C^0.505.",
    ]
    none = {**a2, "a": None, "reason": "one budget has an N*"}
    assert approach2_lines(none)[6] == "\nApproach 2: no exponent (one budget has an N*)."


def test_the_lr_grid_rows_sort_the_multipliers_and_mark_an_edge_and_phi_moves_are_absolute():
    lr = {
        "step": 2.0,
        "groups": [
            {"r": 1.0, "multipliers": [2.0, 0.5, 1.0, 1.0], "best": 1.0, "interval": [0.8123, 1.25],
             "steps_from_r1": 0.0, "L_shared": 3.21, "L_best": 3.21},
            {"r": 4.0, "recipe": "tb", "multipliers": [0.5, 1.0, 2.0], "best": 0.5, "at_edge": True,
             "steps_from_r1": -1.0, "L_shared": 3.456789, "L_best": 3.41},
        ],
        "phi_shared": 0.45,
        "phi_best_points": 0.4123,
        "phi_penalty_all": None,
    }  # fmt: skip
    assert lr_lines(lr) == [
        "Grid step x2.",
        "",
        "| r | multipliers | best lr multiplier | 95% interval | steps from r = 1 | L shared lr | L best lr |",
        "|---|---|---|---|---|---|---|",
        "| 1 | 0.5, 1, 2 | 1 | [0.812, 1.25] | +0.00 | 3.2100 | 3.2100 |",
        "| 4 (tb) | 0.5, 1, 2 | 0.5 (edge) | - | -1.00 | 3.4568 | 3.4100 |",
        "\nphi with each r's grid point at its best lr: 0.412 (shared lr 0.450, |dphi| = 0.038)",
    ]
    assert lr_lines({"reason": "the table has one lr per r"}) == ["No lr grid: the table has one lr per r."]


def test_the_conventions_table_flags_and_says_the_half_width():
    conv = {
        "rows": [
            {"convention": "as recorded", "phi": 0.45, "delta_phi": 0.0, "a": 0.5, "delta_a": 0.0, "flagged": False},
            {"convention": "embeddings in N", "phi": 0.3876, "delta_phi": -0.0624, "a": 0.52345, "delta_a": 0.02345,
             "flagged": True},
            {"convention": "loop index in N_once", "phi": 0.461, "delta_phi": 0.011, "a": 0.5012, "delta_a": 0.0012,
             "flagged": False},
            {"convention": "6N FLOPs", "reason": "the table has no FLOPs column"},
        ],
        "phi_half_width": 0.05,
    }  # fmt: skip
    assert convention_lines(conv) == [
        "| convention | phi | dphi | N*(C) exponent | d exponent | flagged |",
        "|---|---|---|---|---|---|",
        "| as recorded | 0.450 | +0.000 | 0.500 | +0.000 |  |",
        "| embeddings in N | 0.388 | -0.062 | 0.523 | +0.023 | yes |",
        "| loop index in N_once | 0.461 | +0.011 | 0.501 | +0.001 |  |",
        "| 6N FLOPs | cannot: the table has no FLOPs column | | | | |",
        "\nFlagged: a change beyond phi's interval half-width (0.050) or the exponent's.",
    ]
    assert convention_lines({**conv, "phi_half_width": None})[-1].startswith("| 6N FLOPs")


def test_the_table_line_names_the_table_validated_and_the_one_the_fit_was_made_from():
    rec = record()
    assert table_line(rec) == "Fit of the looped law, validated on runs.csv: 14 rows."
    other = rec.replace(fit={**rec.fit, "json": "fit.json"}, tables=["new.csv", "more.csv"])
    assert table_line(other) == "Fit fit.json (made from runs.csv), validated on new.csv, more.csv: 14 rows."
    bare = rec.replace(fit={"law": "chinchilla"})
    assert table_line(bare) == "Fit of the chinchilla law, validated: 14 rows."
