"""What the power and validation figures plot, array by array (issue 58): loopscale/plots/power.py (each design's
FLOPs with the candidate against its MDE, the curves' MDE, the target line, the recommended star at the curves'
MDE where it has one, the labels) and loopscale/plots/validation.py (each held-out fold of the fit's law only, its
measured losses on x and predictions on y, the legend's mean |error|, the diagonal over both, the reason of an empty
panel). Records built by hand; no file written."""

from __future__ import annotations

import numpy as np

from loopscale.fit.validation.record import FoldResult, ValidationRecord
from loopscale.plots.power import power_figure
from loopscale.plots.validation import held_out_figure


def design(name, flops, flops_alone, mde, curves_mde=None):
    d = {"name": name, "cost": {"flops_with_candidate": flops, "flops": flops_alone}, "delta_phi": {"mde": mde}}
    if curves_mde is not None:
        d["curves"] = {"delta_phi": {"mde": curves_mde}}
    return d


def test_the_power_figure_plots_each_designs_comparison_flops_against_its_mde():
    designs = [
        design("as given", 3e17, 1e17, 0.12),
        design("+1 seed", 6e17, 2e17, 0.085),
        design("+budget", 1.2e18, 5e17, 0.07),
    ]
    record = {"designs": designs, "settings": {"n_sims": 200}, "target": None}
    ax = power_figure(record).axes[0]
    (points,) = ax.collections
    np.testing.assert_array_equal(points.get_offsets(), [[3e17, 0.12], [6e17, 0.085], [1.2e18, 0.07]])
    assert [t.get_text() for t in ax.texts] == ["as given", "+1 seed", "+budget"]
    assert [t.xy for t in ax.texts] == [(3e17, 0.12), (6e17, 0.085), (1.2e18, 0.07)]
    assert ax.get_xscale() == "log" and len(ax.get_lines()) == 0
    assert ax.get_title() == "loopscale power: 200 simulated sweeps per design"


def test_the_power_figure_adds_the_curves_the_target_and_the_recommended_design_at_its_curves_mde():
    designs = [design("as given", 3e17, 1e17, 0.12, 0.09), design("+1 seed", 6e17, 2e17, 0.085, 0.06)]
    target = {"detect": 0.1, "recommended": designs[1]}
    ax = power_figure({"designs": designs, "settings": {"n_sims": 50}, "target": target}).axes[0]
    finals, curves, star = ax.collections
    np.testing.assert_array_equal(finals.get_offsets(), [[3e17, 0.12], [6e17, 0.085]])
    np.testing.assert_array_equal(curves.get_offsets(), [[3e17, 0.09], [6e17, 0.06]])
    np.testing.assert_array_equal(star.get_offsets(), [[6e17, 0.06]])
    (line,) = ax.get_lines()
    assert list(line.get_ydata()) == [0.1, 0.1]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "fitted from final points",
        "fitted from curves",
        "target |Δφ| = 0.1",
        "recommended: +1 seed",
    ]
    # a final-point pilot: the star at the design's own MDE; no curves, so no curves' points
    plain = [design("as given", 3e17, 1e17, 0.12), design("+1 seed", 6e17, 2e17, 0.085)]
    target = {"detect": 0.1, "recommended": plain[1]}
    ax = power_figure({"designs": plain, "settings": {"n_sims": 50}, "target": target}).axes[0]
    finals, star = ax.collections
    np.testing.assert_array_equal(star.get_offsets(), [[6e17, 0.085]])
    # curves for some designs only (a menu mixing pilots cannot be drawn as curves): final points alone
    mixed = [design("as given", 3e17, 1e17, 0.12, 0.09), design("+1 seed", 6e17, 2e17, 0.085)]
    ax = power_figure({"designs": mixed, "settings": {"n_sims": 50}, "target": None}).axes[0]
    assert len(ax.collections) == 1 and ax.get_legend() is None


def _record(results, folds):
    return ValidationRecord(
        fit={"law": "looped"},
        folds=folds,
        forms=[{"label": "looped"}, {"label": "per-r"}],
        results=[FoldResult(**r) for r in results],
    )


FOLDS = [
    {"kind": "full", "label": "all rows", "reason": None},
    {"kind": "budget", "label": "C = 1e+18", "reason": None},
    {"kind": "budget", "label": "C = 1e+19", "reason": None},
    {"kind": "r", "label": "r = 2", "reason": "dropping it leaves runs at r = 1 only"},
]


def test_the_held_out_figure_plots_measured_against_predicted_of_the_fits_law_per_fold():
    results = [
        {"form": 0, "fold": 0, "ok": True},
        {"form": 0, "fold": 1, "ok": True, "observed": [3.1, 3.3], "predicted": [3.12, 3.25],
         "held_out": {"mean_abs_rel_error": 0.01234}},
        {"form": 0, "fold": 2, "ok": True, "observed": [2.8, 2.9, 3.0], "predicted": [2.95, 2.7, 3.02],
         "held_out": {"mean_abs_rel_error": 0.0456}},
        # another form's fold and a failed fold are not drawn
        {"form": 1, "fold": 1, "ok": True, "observed": [9.0], "predicted": [9.0],
         "held_out": {"mean_abs_rel_error": 0}},
        {"form": 0, "fold": 3, "ok": False, "reason": "x"},
    ]  # fmt: skip
    fig = held_out_figure(_record(results, FOLDS))
    budget, r = fig.axes
    first, second = budget.collections
    np.testing.assert_array_equal(first.get_offsets(), [[3.1, 3.12], [3.3, 3.25]])
    np.testing.assert_array_equal(second.get_offsets(), [[2.8, 2.95], [2.9, 2.7], [3.0, 3.02]])
    (diagonal,) = budget.get_lines()
    np.testing.assert_array_equal(diagonal.get_xydata(), [[2.7, 2.7], [3.3, 3.3]])  # min and max of x and y
    assert [t.get_text() for t in budget.get_legend().get_texts()] == ["C = 1e+18: 1.23%", "C = 1e+19: 4.56%"]
    assert budget.get_title() == "leave one budget out" and r.get_title() == "leave one r out"
    assert len(r.collections) == 0 and len(r.get_lines()) == 0
    assert [t.get_text() for t in r.texts] == ["cannot: dropping it leaves runs at r = 1 only"]
    assert fig._suptitle.get_text() == "looped fit: held-out predictions"


def test_a_panel_of_many_folds_names_one_colour_scale_not_each_fold():
    folds = [{"kind": "full", "label": "all rows", "reason": None}] + [
        {"kind": "budget", "label": f"C = {i}e+18", "reason": None} for i in range(1, 14)
    ]
    results = [{"form": 0, "fold": 0, "ok": True}] + [
        {"form": 0, "fold": i, "ok": True, "observed": [3.0 + i / 100], "predicted": [3.0],
         "held_out": {"mean_abs_rel_error": 0.01}}
        for i in range(1, 14)
    ]  # fmt: skip
    budget, r = held_out_figure(_record(results, folds)).axes
    assert len(budget.collections) == 13
    assert [t.get_text() for t in budget.get_legend().get_texts()] == ["13 folds, C = 1e+18 first"]
    assert [t.get_text() for t in r.texts] == ["cannot: no fold"]
    # twelve are still each named
    budget, _ = held_out_figure(_record(results[:13], folds[:13])).axes
    legend = [t.get_text() for t in budget.get_legend().get_texts()]
    assert len(legend) == 12 and legend[0] == "C = 1e+18: 1.00%" and legend[-1] == "C = 12e+18: 1.00%"
