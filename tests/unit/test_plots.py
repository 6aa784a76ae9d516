"""loopscale.plots: every figure renders to PNG from the fixture (a looped-law table and REAL fits of it,
tests/fixtures/plots/make_fixture.py), with the expected labels, and the numbers behind the figures
are the law's: the collapse is tightest at the fitted phi, the fitted lines pass through the law at
the runs, N* minimises the law along the architecture family."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from loopscale.fit.isoflop import compute_optimal_curve
from loopscale.fit.laws.registry import law_data_from_table, predict_loss
from loopscale.fit.optimize import fit_law
from loopscale.fit.result import load_fit
from loopscale.plots import labels
from loopscale.plots.curves import collapse_spread, law_line
from loopscale.plots.files import write_figure
from loopscale.plots.inputs import free_multipliers, log_residuals, predicted_loss, read_table, rows_for_fit
from loopscale.plots.isoflop import iso_flop
from loopscale.plots.recipes import delta_phi
from loopscale.plots.registry import FIGURE_NAMES, figure_names, figures, plot_fit, save_all
from loopscale.plots.single_fit import collapse, compute_optimal, phi_profile, predicted_vs_observed, residuals
from loopscale.plots.views import recipe_fit
from support.paths import FIXTURES

FIXTURE = FIXTURES / "plots"  # what the fixtures `table`, `fit` and `baseline` read (support/fit_fixtures.py)
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def figure_text(fig) -> set[str]:
    """Every title, axis label, tick label and legend entry in a figure."""
    out = {fig.get_suptitle()}
    for ax in fig.axes:
        out |= {ax.get_title(), ax.get_xlabel(), ax.get_ylabel()}
        out |= {t.get_text() for t in ax.get_xticklabels()}
        legend = ax.get_legend()
        if legend is not None:
            out |= {t.get_text() for t in legend.get_texts()}
        out |= {t.get_text() for t in ax.texts}
    for legend in fig.legends:  # the figure-level legend (a colour per r, a marker per recipe)
        out |= {t.get_text() for t in legend.get_texts()}
    return {t for t in out if t}


def assert_png(fig, path: Path) -> None:
    fig.savefig(path, dpi=60)
    data = path.read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 5000


def has(texts: set[str], fragment: str) -> bool:
    return any(fragment in t for t in texts)


def test_iso_flop_one_panel_per_requested_budget(table, fit, tmp_path):
    fig = iso_flop(table, fit)
    assert_png(fig, tmp_path / "iso.png")
    texts = figure_text(fig)
    # the spent C scatters by +-1% around C_budget; panels follow the 6 requested budgets
    assert table["C"].nunique() > 6
    titles = sorted(ax.get_title() for ax in fig.axes if ax.get_visible())
    assert len(titles) == 6 and r"$C$ = $4.64\times10^{17}$ FLOPs" in titles
    assert {labels.N, labels.LOSS, "$r = 1$", "$r = 8$"} <= texts
    assert "nats/token" in labels.LOSS and "FLOPs" in labels.BUDGET
    assert fig.axes[0].get_xscale() == "log"


def test_law_line_passes_through_the_law_at_the_runs(baseline, fit):
    group = baseline[(baseline["C_budget"] == 1e18) & (baseline["r"] == 4)]
    x, y = law_line(group, fit, n_points=50)
    ends = group.sort_values("N").iloc[[0, -1]]
    at_runs = predict_loss("looped", fit.params, {c: ends[c].to_numpy(float) for c in ("N_once", "N_rec", "r", "D")})
    assert x[0] == pytest.approx(ends["N"].iloc[0]) and x[-1] == pytest.approx(ends["N"].iloc[-1])
    assert [y[0], y[-1]] == pytest.approx(at_runs, rel=1e-9)


def test_collapse_three_panels_and_tightest_at_fitted_phi(table, baseline, fit, tmp_path):
    fig = collapse(table, fit)
    assert_png(fig, tmp_path / "collapse.png")
    texts = figure_text(fig)
    assert {labels.N_EFF, labels.COLLAPSED, labels.LAW_CURVE} <= texts
    assert has(texts, f"fitted $\\hat{{\\phi}} = {fit.params['phi']:.3f}$")
    assert has(texts, r"$\phi = 0$") and has(texts, r"$\phi = 1$")
    spread = {phi: collapse_spread(table, fit, phi) for phi in (fit.params["phi"], 0.0, 1.0)}
    assert spread[fit.params["phi"]] < 0.5 * min(spread[0.0], spread[1.0])
    # every run of the fitted recipe (and only those) is drawn in every panel
    assert sum(len(c.get_offsets()) for c in fig.axes[0].collections) == len(baseline) < len(table)


def test_phi_profile_and_bootstrap(fit, tmp_path):
    fig = phi_profile(fit)
    assert_png(fig, tmp_path / "profile.png")
    texts = figure_text(fig)
    assert {r"profile of the objective in $\phi$", "95% profile interval", "95% percentile CI"} <= texts
    # the objective's power of ten is in its label, not in an offset text the panel title would cover
    assert fig.axes[0].get_ylabel().startswith(labels.OBJECTIVE)
    assert fig.axes[0].yaxis.get_offset_text().get_text() == ""
    n = fit.bootstrap["n_replicates"]
    assert f"bootstrap of $\\phi$ ({n} replicates)" in texts
    hist = fig.axes[1].patches
    assert sum(p.get_height() for p in hist) == n


def test_phi_profile_says_what_is_missing(fit, tmp_path):
    bare = load_fit({**fit.to_json_dict(), "profile_phi": None, "bootstrap": None, "ci95": {}})
    fig = phi_profile(bare)
    assert_png(fig, tmp_path / "bare.png")
    texts = figure_text(fig)
    assert "this fit JSON has no phi profile and no bootstrap replicates" in texts
    assert len(fig.axes) == 1  # one panel that says why, not two empty ones


def test_residuals_match_the_fitter(table, baseline, fit, tmp_path):
    fig = residuals(table, fit, FIXTURE / "free.baseline.json")
    assert_png(fig, tmp_path / "res.png")
    texts = figure_text(fig)
    assert {
        "residuals by $r$",
        "residuals by budget",
        r"free multipliers $k_r$ vs $r^{\phi}$",
        labels.RESIDUAL,
        labels.R,
    } <= texts
    res = log_residuals(baseline, fit)
    # the fitter's own RMS of its residuals on the same rows: predictions agree
    assert np.sqrt(np.mean(res**2)) == pytest.approx(fit.residual_rms_log, rel=1e-6)
    assert has(texts, f"\\phi = {fit.params['phi']:.3f}")
    # the free fit was bootstrapped: each k_r is drawn with its 95% interval
    free = load_fit(FIXTURE / "free.baseline.json")
    ax_k = fig.axes[2]
    assert "$k_r$ (95% CI)" in [t.get_text() for t in ax_k.get_legend().get_texts()]
    bars = [c for c in ax_k.containers if hasattr(c, "has_yerr") and c.has_yerr]
    segs = bars[0].lines[2][0].get_segments()
    np.testing.assert_allclose(
        [sorted(s[:, 1]) for s in segs[1:]], [free.ci95[f"k_{r}"] for r in (2, 4, 8)], rtol=1e-12
    )


def test_joint_fit_figures(table, tmp_path):
    joint = load_fit(FIXTURE / "fit.joint.json")
    drawn = figures(table, joint)
    assert {"iso_flop", "collapse", "phi_profile", "residuals", "delta_phi", "compute_optimal", "loop_gap"} == set(
        drawn
    )
    texts = figure_text(drawn["delta_phi"])
    assert {"joint: bootstrap", "joint: profile", "separate fits"} <= texts
    assert has(texts, "shared dense parameters: LR p =")
    base = recipe_fit(joint, "baseline")
    assert base.params["phi"] == joint.params["phi[baseline]"] and base.ci95["phi"] == joint.ci95["phi[baseline]"]
    rows = rows_for_fit(table, base)
    assert set(rows["recipe"]) == {"baseline", "tbptt", "hyper"} and set(
        rows.loc[rows["recipe"] != "baseline", "r"]
    ) == {1}
    # predictions of the joint fit use each row's recipe phi
    tb = table[(table["recipe"] == "tbptt") & (table["r"] > 1)]
    np.testing.assert_allclose(predicted_loss(tb, joint), predicted_loss(tb, recipe_fit(joint, "tbptt")), rtol=1e-12)
    assert_png(drawn["delta_phi"], tmp_path / "joint.png")


def test_free_multipliers(fit):
    k = free_multipliers(FIXTURE / "free.baseline.json")
    assert sorted(k) == [1.0, 2.0, 4.0, 8.0] and k[1.0] == 1.0
    assert k[2.0] < k[4.0] < k[8.0]  # more loops, more worth
    with pytest.raises(ValueError, match="looped-free"):
        free_multipliers(fit)


def test_residuals_without_free_fit_has_no_empty_panel(table, fit):
    fig = residuals(table, fit)
    assert len(fig.axes) == 2  # no third panel left empty for the k_r of a looped-free fit not given
    assert all(ax.collections for ax in fig.axes)


def test_delta_phi_across_recipes(fit, tmp_path):
    fits = [fit, FIXTURE / "fit.tbptt.json", FIXTURE / "fit.hyper.json"]
    fig = delta_phi(fits)
    assert_png(fig, tmp_path / "delta.png")
    texts = figure_text(fig)
    assert {
        r"$\phi$ by recipe (95% CI)",
        r"$\Delta\phi$ vs baseline (95% CI)",
        r"$\phi - \phi$(baseline)",
        "baseline",
        "tbptt",
        "hyper",
    } <= texts
    hyper = load_fit(FIXTURE / "fit.hyper.json")
    drawn = fig.axes[1].containers[-1].lines[0].get_ydata()  # the last error bar: hyper's delta
    assert drawn[0] == pytest.approx(hyper.params["phi"] - fit.params["phi"])


def test_compute_optimal_minimises_the_law_along_the_family(table, baseline, fit, tmp_path):
    fig = compute_optimal(table, fit)
    assert_png(fig, tmp_path / "opt.png")
    texts = figure_text(fig)
    assert {labels.N_STAR, labels.D_STAR, labels.COMPUTE} <= texts
    r, C = 4.0, 3e18
    N_star, D_star = compute_optimal_curve(baseline, fit, r, np.array([C]))
    g = baseline[baseline["r"] == r]
    c = np.median((g["N_once"] + r ** fit.params["phi"] * g["N_rec"]) / g["N"])
    f = np.median(g["C"] / g["D"] / g["N"])
    N = np.geomspace(N_star[0] / 3, N_star[0] * 3, 2001)
    p = fit.params
    loss = p["E"] + p["A"] * (c * N) ** -p["alpha"] + p["B"] * (C / (f * N)) ** -p["beta"]
    assert N[np.argmin(loss)] == pytest.approx(N_star[0], rel=2e-3)
    assert D_star[0] * f * N_star[0] == pytest.approx(C)


def test_save_all_writes_every_figure(table, fit, tmp_path):
    paths = save_all(
        table, fit, tmp_path / "figs", compare=[FIXTURE / "fit.hyper.json"], free=FIXTURE / "free.baseline.json", dpi=40
    )
    runs_figures = list(figure_names("runs"))  # loss_curves is a curves fit's (test_fit_curves_cli)
    assert "loss_curves" in FIGURE_NAMES and "loss_curves" not in runs_figures
    assert [p.stem for p in paths[::2]] == runs_figures
    assert [p.suffix for p in paths] == [".png", ".pdf"] * len(runs_figures)
    assert all(p.read_bytes().startswith(PNG_MAGIC) for p in paths[::2])
    assert all(p.read_bytes().startswith(b"%PDF") for p in paths[1::2])
    without = figures(table, fit)
    assert list(without) == [n for n in runs_figures if n != "delta_phi"]


def test_plain_chinchilla_table_gets_the_figures_that_apply(baseline, tmp_path):
    plain = baseline[baseline["r"] == 1][["N", "D", "L"]].reset_index(drop=True)
    path = tmp_path / "plain.csv"
    plain.to_csv(path, index=False)
    t = read_table(path)
    assert (t["r"] == 1).all() and (t["N_rec"] == 0).all()
    result, _ = fit_law(law_data_from_table(plain, "chinchilla"), "chinchilla", n_refine=4)
    paths = save_all(t, result, tmp_path / "figs", dpi=40)
    assert [p.name for p in paths] == ["iso_flop.png", "iso_flop.pdf", "residuals.png", "residuals.pdf"] + [
        "compute_optimal.png",
        "compute_optimal.pdf",
    ]
    with pytest.raises(ValueError, match="needs a looped fit"):
        collapse(t, result)


def test_read_table_parquet_and_bad_tables(table, tmp_path):
    pq = tmp_path / "runs.parquet"
    table.to_parquet(pq)
    assert len(read_table(pq)) == len(table)
    with pytest.raises(ValueError, match="no such file"):
        read_table(tmp_path / "nope.csv")
    table.drop(columns=["L"]).to_csv(tmp_path / "noL.csv", index=False)
    with pytest.raises(ValueError, match="lacks column"):
        read_table(tmp_path / "noL.csv")
    bad = table.astype({"L": object})
    bad.loc[3, "L"] = "oops"
    bad.to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(ValueError, match="1 row"):
        read_table(tmp_path / "bad.csv")


def test_load_fit_rejects_non_fit_json(tmp_path):
    p = tmp_path / "x.json"
    p.write_text('{"hello": 1}')
    with pytest.raises(ValueError, match="not a loopscale fit"):
        load_fit(p)
    p.write_text("{not json")
    with pytest.raises(ValueError, match="cannot read fit JSON"):
        load_fit(p)


def test_fixture_is_the_looped_law_table(table, baseline):
    """The fixture table has the columns `collect` writes, three recipes, budgets shaped like the
    published sweep."""
    from loopscale.train.run_json import TABLE_COLUMNS

    raw = pd.read_csv(FIXTURE / "runs.csv")
    assert list(raw.columns) == TABLE_COLUMNS
    assert table.groupby("recipe").size().to_dict() == {"baseline": 72, "hyper": 72, "tbptt": 72}
    assert sorted(baseline["r"].unique()) == [1, 2, 4, 8]
    assert baseline["C_budget"].nunique() == 6


def test_rows_for_fit_follows_the_fit_group(table, fit):
    hyper = load_fit(FIXTURE / "fit.hyper.json")
    assert hyper.group.to_json() == {"column": "recipe", "value": "hyper"}
    rows = rows_for_fit(table, hyper)
    assert set(rows["recipe"]) == {"hyper"} and len(rows) == hyper.input["n_rows_used"]
    with pytest.raises(ValueError, match="no column 'recipe'"):
        rows_for_fit(table.drop(columns=["recipe"]), hyper)
    ungrouped = load_fit({**fit.to_json_dict(), "group": None})
    assert len(rows_for_fit(table, ungrouped)) == len(table)


def test_plot_fit_predicted_vs_observed(table, fit, tmp_path):
    path = plot_fit(table, fit, tmp_path / "fit.png", dpi=40)
    assert path.read_bytes().startswith(PNG_MAGIC)
    fig = predicted_vs_observed(table, fit)
    assert {labels.OBS_LOSS, labels.PRED_LOSS, "$r = 8$"} <= figure_text(fig)
    assert sum(len(c.get_offsets()) for c in fig.axes[0].collections) == 72


def test_write_figure_lays_out_once_and_leaves_the_figure_as_it_was(table, fit, tmp_path):
    """A figure's PNG and PDF share one constrained-layout solve (the PDF keeps the PNG's positions), and the
    figure keeps its layout engine afterwards: a later draw lays it out again."""
    fig = collapse(table, fit)
    engine = fig.get_layout_engine()
    solves = []
    solve = engine.execute
    engine.execute = lambda f: (solves.append(f), solve(f))[1]  # counts the real solver's runs, still runs it
    png, pdf = write_figure(fig, [tmp_path / "c.png", tmp_path / "c.pdf"], dpi=40)
    assert len(solves) == 1
    assert png.read_bytes().startswith(PNG_MAGIC) and pdf.read_bytes().startswith(b"%PDF")
    assert fig.get_layout_engine() is engine
    positions = np.array([ax.get_position().bounds for ax in fig.axes])
    fig.savefig(tmp_path / "again.png", dpi=40)
    assert len(solves) == 2
    assert np.allclose([ax.get_position().bounds for ax in fig.axes], positions, atol=1e-9)
