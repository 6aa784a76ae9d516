"""What the power, validation and advice figures plot, array by array (issue 58): loopscale/plots/power.py (each
design's FLOPs with the candidate against its MDE, the curves' MDE, the target line, the recommended star at the
curves' MDE where it has one, the labels), loopscale/plots/validation.py (each held-out fold of the fit's law only,
its measured losses on x and predictions on y, the legend's mean |error|, the diagonal over both, the reason of an
empty panel) and loopscale/plots/advice.py (each r's feasible curve solid and the rest dotted, the band over the
feasible sizes, the advised points and the star, the constraint lines, the y limits); also
loopscale/plots/loss_curves.py's panels, loopscale/plots/testtime.py's law lines written out by hand and
loopscale/plots/recipes.py's joint figure (each recipe's phi, each delta three ways) and
loopscale/plots/single_fit.py's fit plot (each run's L against the law written out). Records
built by hand; no file written."""

from __future__ import annotations

import numpy as np
import pytest

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


# -- plots/advice.py ------------------------------------------------------------------------------------------


def _advice(cap=None, break_even=None, inference=None):
    from types import SimpleNamespace

    curves = {
        4: {"N_unique": [1e7, 2e7, 4e7], "L": [3.3, 3.1, 3.2], "feasible": [True, True, False],
            "L_lo": [3.25, 3.05, 3.1], "L_hi": [3.35, 3.15, 3.3]},
        1: {"N_unique": [1e7, 2e7, 4e7], "L": [3.4, 3.2, 3.15], "feasible": [True, True, True]},
    }  # fmt: skip
    record = {
        "per_r": [
            {"r": 1, "feasible": True, "advised": {"N_unique": 4e7, "L": 3.15, "d_model": 256, "D_tokens": 1.5e9}},
            {"r": 4, "feasible": True, "advised": {"N_unique": 2e7, "L": 3.1, "d_model": 192, "D_tokens": 2.25e9}},
            {"r": 8, "feasible": False, "advised": {"N_unique": 1e7, "L": 9.0}},
        ],
        "best": {"r": 4, "n_replicates": 100},
        "constraints": {"compute_flops": 1e18, "max_unique_params": cap, "max_inference_flops": inference},
        "break_even": break_even,
        "family": {"name": "paper", "recipe": "baseline"},
        "level": 0.95,
    }
    return SimpleNamespace(record=record, curves=curves)


def test_the_advice_figure_plots_each_rs_feasible_curve_solid_the_rest_dotted_and_the_advised_models():
    from loopscale.plots.advice import advice_figure

    ax = advice_figure(_advice()).axes[0]
    lines = ax.get_lines()
    # r in increasing order: r = 1 all feasible; r = 4 solid on its first two sizes, dotted on the third
    assert [(list(line.get_xdata()), list(line.get_ydata()), line.get_linestyle()) for line in lines] == [
        ([1e7, 2e7, 4e7], [3.4, 3.2, 3.15], "-"),
        ([1e7, 2e7], [3.3, 3.1], "-"),
        ([4e7], [3.2], ":"),
    ]
    band, *points, star = ax.collections
    np.testing.assert_allclose(band.get_paths()[0].vertices[:, 0].min(), 1e7)
    np.testing.assert_allclose(band.get_paths()[0].vertices[:, 0].max(), 2e7)  # the band over feasible sizes only
    assert [tuple(p.get_offsets()[0]) for p in points] == [(4e7, 3.15), (2e7, 3.1)]  # not the infeasible r = 8
    np.testing.assert_array_equal(star.get_offsets(), [[2e7, 3.1]])
    assert star.get_label() == "advised: $r = 4$, $d = 192$, $D$ = $2.25\\times10^{9}$ tokens"
    # y from just below the lowest band to 2.5 spreads above the advised losses
    spread = max(3.15 - 3.1, 0.02 * 3.1)  # at least 2% of the lowest advised loss
    top = 3.15 + 2.5 * spread
    assert ax.get_ylim() == pytest.approx((3.05 - 0.1 * (top - 3.05), top))
    assert "bands: 95% of 100 bootstrap replicates" in ax.figure._suptitle.get_text()


def test_the_advice_figure_draws_the_cap_the_break_even_and_the_inference_note():
    from loopscale.plots.advice import advice_figure

    be = {"overall": {"M": 3e7, "interval": [2e7, 5e7]}}
    ax = advice_figure(_advice(cap=3.5e7, break_even=be, inference=1e9)).axes[0]
    vertical = [line for line in ax.get_lines() if line.get_linestyle() in ("--", "-.")]
    assert [(line.get_xdata()[0], line.get_linestyle()) for line in vertical] == [(3.5e7, "--"), (3e7, "-.")]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "unique-parameter cap $3.5\\times10^{7}$" in labels
    assert "break-even $3\\times10^{7}$: looping wins left of it" in labels
    assert "dotted: beyond the inference limit" in labels
    (span,) = [p for p in ax.patches]
    xs = span.get_transform().transform(span.get_path().vertices)  # display coordinates of its corners
    data_xs = ax.transData.inverted().transform(xs)[:, 0]
    assert (min(data_xs), max(data_xs)) == pytest.approx((2e7, 5e7))
    plain = advice_figure(_advice()).axes[0]
    assert len(plain.patches) == 0 and "dotted: beyond the inference limit" not in [
        t.get_text() for t in plain.get_legend().get_texts()
    ]


# -- plots/loss_curves.py ----------------------------------------------------------------------------------------


def test_the_curve_figure_draws_the_held_out_runs_first_at_most_12_with_each_runs_errors():
    from loopscale.fit.curves.table import Curve
    from loopscale.plots.loss_curves import curve_law_figure

    steps = np.array([100, 200, 400])
    curves = [Curve(f"run{i:02d}", np.ones(401), 0, steps, np.array([3.0, 2.8, 2.5]) + i / 100) for i in range(14)]
    predictions = {c.run: c.loss * np.array([1.01, 0.98, 1.0]) for c in curves}
    predictions["run05"] = curves[5].loss * np.array([1.0, 1.0, 1.04])
    fig = curve_law_figure(curves, predictions, holdout=["run13", "run05"], law="multipower")
    titles = [ax.get_title().split("\n") for ax in fig.axes]
    # the held-out runs first (in the table's order), then the fitted ones, 12 in all
    assert [t[0] for t in titles] == ["run05 (held out)", "run13 (held out)"] + [
        f"run{i:02d} (fitted)" for i in (0, 1, 2, 3, 4, 6, 7, 8, 9, 10)
    ]
    assert titles[0][1] == "mean error 1.333%, max 4.000%"  # (0 + 0 + 4) / 3
    assert titles[2][1] == "mean error 1.000%, max 2.000%"  # (1 + 2 + 0) / 3
    first = fig.axes[0]
    np.testing.assert_array_equal(first.collections[0].get_offsets(), np.c_[steps, curves[5].loss])
    (line,) = first.get_lines()
    np.testing.assert_allclose(line.get_ydata(), predictions["run05"])
    assert line.get_linestyle() == "--" and fig.axes[2].get_lines()[0].get_linestyle() == "-"
    assert fig._suptitle.get_text() == "multipower law: measured and fitted loss curves (2 more runs not drawn)"
    few = curve_law_figure(curves[:3], predictions, law="multipower")
    assert len(few.axes) == 3 and few._suptitle.get_text() == "multipower law: measured and fitted loss curves"


# -- plots/testtime.py -------------------------------------------------------------------------------------------


def test_the_testtime_figure_draws_each_models_rows_and_its_law_written_out():
    import pandas as pd

    from loopscale.fit.testtime import testtime_table
    from loopscale.plots.testtime import testtime_figure

    raw = pd.DataFrame(
        {
            "model": ["sampled"] * 4 + ["fixed4"] * 5,
            "r_train": ["sampled"] * 4 + [4] * 5,
            "r_eval": [1, 2, 4, 8, 1, 2, 4, 8, 16],
            "L": [3.6, 3.3, 3.1, 3.05, 3.9, 3.5, 3.2, 3.22, 3.25],
        }
    )
    fixed = {"tau": 0.73, "L_inf[fixed4]": 3.08, "A[fixed4]": 0.27, "delta[fixed4]": 0.09}
    sampled = {"tau": 0.69, "L_inf[sampled]": 3.04, "A[sampled]": 0.41}
    record = {"shape": "exp", "per_model": {"sampled": {"params": sampled}, "fixed4": {"params": fixed}}}
    ax = testtime_figure(testtime_table(raw), record).axes[0]
    # models in name order: fixed4 first
    first, second = ax.collections
    np.testing.assert_array_equal(first.get_offsets(), [[1, 3.9], [2, 3.5], [4, 3.2], [8, 3.22], [16, 3.25]])
    np.testing.assert_array_equal(second.get_offsets(), [[1, 3.6], [2, 3.3], [4, 3.1], [8, 3.05]])
    fixed_line, r_train_mark, sampled_line = ax.get_lines()
    r = np.geomspace(1, 16, 200)
    x = r / 4  # a fixed-r model's depth scale is its r_train: no gain past it, a drift delta (1 - 1/x) beyond
    want = 3.08 + 0.27 * np.exp(-(np.minimum(x, 1) - 1) / 0.73) + 0.09 * np.maximum(0, 1 - 1 / x)
    np.testing.assert_allclose(fixed_line.get_xdata(), r, rtol=1e-12)
    np.testing.assert_allclose(fixed_line.get_ydata(), want, rtol=1e-9)
    assert fixed_line.get_linestyle() == "-" and list(r_train_mark.get_xdata()) == [4, 4]
    r = np.geomspace(1, 8, 200)  # a sampled-r model: r_scale 1, pure saturation
    np.testing.assert_allclose(sampled_line.get_ydata(), 3.04 + 0.41 * np.exp(-(r - 1) / 0.69), rtol=1e-9)
    assert sampled_line.get_linestyle() == "--"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["fixed4 (fixed r = 4)", "sampled (sampled r)"]
    assert ax.get_xscale() == "log" and ax.xaxis.get_transform().base == 2


# -- plots/recipes.py --------------------------------------------------------------------------------------------


def _bars(ax):
    """(x, y, [lo, hi]) of each error bar of a panel, in drawing order."""
    out = []
    for c in ax.containers:
        (x,), (y,) = c.lines[0].get_xdata(), c.lines[0].get_ydata()
        segments = c.lines[2][0].get_segments() if c.lines[2] else []
        out.append((x, y, sorted(segments[0][:, 1]) if segments else None))
    return out


def test_the_joint_figure_plots_each_recipes_phi_and_each_delta_three_ways_side_by_side():
    import json
    from pathlib import Path

    from loopscale.plots.recipes import joint_delta_phi

    path = Path(__file__).resolve().parents[1] / "fixtures" / "plots" / "fit.joint.json"
    record = json.loads(path.read_text())
    params, ci, j = record["params"], record["ci95"], record["joint"]
    fig = joint_delta_phi(path)
    ax_v, ax_d = fig.axes
    want = [(x, params[f"phi[{g}]"], ci[f"phi[{g}]"]) for x, g in enumerate(["baseline", "tbptt", "hyper"])]
    for (x, y, iv), (wx, wy, wiv) in zip(_bars(ax_v), want, strict=True):
        assert (x, y) == (wx, pytest.approx(wy)) and iv == pytest.approx(wiv)
    want = []
    for x, g in enumerate(["tbptt", "hyper"]):  # the reference has no delta
        d = j["delta_phi"][g]
        want += [
            (x - 0.15, d["estimate"], d["bootstrap_ci"]),
            (x, d["estimate"], d["profile_interval"]),
            (x + 0.15, d["separate"]["delta"], d["separate"]["ci"]),
        ]
    for (x, y, iv), (wx, wy, wiv) in zip(_bars(ax_d), want, strict=True):
        assert (x, y) == (pytest.approx(wx), pytest.approx(wy)) and iv == pytest.approx(wiv)
    assert [t.get_text() for t in ax_d.get_xticklabels()] == ["tbptt", "hyper"]
    assert [t.get_text() for t in ax_d.get_legend().get_texts()] == [
        "joint: bootstrap",
        "joint: profile",
        "separate fits",
    ]
    assert fig._suptitle.get_text() == "joint fit across recipes; shared dense parameters: LR p = 0.527"


# -- plots/single_fit.py -----------------------------------------------------------------------------------------


def test_fit_plot_is_each_runs_measured_loss_against_the_law_written_out():
    import json
    from pathlib import Path

    import pandas as pd

    from loopscale.plots.single_fit import predicted_vs_observed

    here = Path(__file__).resolve().parents[1] / "fixtures" / "plots"
    table = pd.read_csv(here / "runs.csv")
    record = json.loads((here / "fit.baseline.json").read_text())
    p = record["params"]
    fig = predicted_vs_observed(table, here / "fit.baseline.json")
    ax = fig.axes[0]
    rows = table[table["recipe"] == "baseline"]  # the fit's group only
    n_eff = rows["N_once"] + rows["r"] ** p["phi"] * rows["N_rec"]
    L_hat = p["E"] + p["A"] * n_eff ** -p["alpha"] + p["B"] * rows["D"] ** -p["beta"]
    want = np.c_[rows["L"], L_hat]
    got = np.concatenate([c.get_offsets() for c in ax.collections])
    order = lambda a: a[np.lexsort(a.T[::-1])]  # noqa: E731
    np.testing.assert_allclose(order(got), order(want), rtol=1e-10)
    # one series per r, in increasing r, each its r's rows
    assert [len(c.get_offsets()) for c in ax.collections] == [int((rows["r"] == r).sum()) for r in (1, 2, 4, 8)]
    (diagonal,) = ax.get_lines()
    lo, hi = min(want.min(0)), max(want.max(0))
    np.testing.assert_allclose(diagonal.get_xydata(), [[lo, lo], [hi, hi]])
    assert ax.get_title() == f"looped fit: objective {record['objective']:.3g}, 72 runs"


def test_the_joint_delta_phi_profile_plots_the_objective_above_its_minimum_and_the_replicates():
    import json
    from pathlib import Path

    from loopscale.plots.recipes import delta_phi_profile

    path = Path(__file__).resolve().parents[1] / "fixtures" / "plots" / "fit.joint.json"
    record = json.loads(path.read_text())
    record["bootstrap"]["params"]["delta_phi[tbptt]"][0] = None  # a replicate that failed: left out
    d = record["joint"]["delta_phi"]
    fig = delta_phi_profile(record)
    ax_p, ax_b = fig.axes
    curves = [line for line in ax_p.get_lines() if len(line.get_xdata()) > 2]
    for line, g in zip(curves, ["tbptt", "hyper"], strict=True):
        obj = np.array(d[g]["profile"]["objective"], dtype=float)
        np.testing.assert_allclose(line.get_xdata(), d[g]["profile"]["x"])
        np.testing.assert_allclose(line.get_ydata(), obj - obj.min())
    threshold = d["tbptt"]["profile"]["threshold"]
    assert ax_p.get_ylim() == pytest.approx((0, 8 * threshold))
    flat = [line for line in ax_p.get_lines() if line.get_label() == "95% threshold"]
    assert list(flat[0].get_ydata()) == pytest.approx([threshold, threshold])
    # the bootstrap panel: each recipe's finite replicates, its CI edges dashed
    reps = record["bootstrap"]["params"]
    heights = [sum(p.get_height() for p in c) for c in ax_b.containers]
    n = [len(reps["delta_phi[tbptt]"]) - 1, len(reps["delta_phi[hyper]"])]
    assert heights == n
    assert [t.get_text() for t in ax_b.get_legend().get_texts()] == [f"tbptt ({n[0]})", f"hyper ({n[1]})"]
    dashed = sorted(line.get_xdata()[0] for line in ax_b.get_lines() if line.get_linestyle() == "--")
    assert dashed == pytest.approx(sorted(d["tbptt"]["bootstrap_ci"] + d["hyper"]["bootstrap_ci"]))
