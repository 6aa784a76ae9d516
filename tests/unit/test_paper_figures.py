"""Paper-ready figures (issue 29, item 12) and the public-table helpers (item 9), on the committed fit fixture
(tests/fixtures/plots) and the Chinchilla points: every figure written as a PNG of at least 200 dpi and a PDF,
no panel without data, log tick labels that do not overlap once drawn, iso-FLOP panels binned to at most 9,
and --drop-top-k's filter."""

from itertools import combinations

import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from PIL import Image

from loopscale.errors import InputError
from loopscale.fit.runs_table import ColumnMap, budgets, drop_top_k
from loopscale.plots import labels
from loopscale.plots.inputs import read_table
from loopscale.plots.isoflop import budget_panels, iso_flop
from loopscale.plots.registry import DPI, figures, save_figures
from loopscale.plots.single_fit import collapse
from support.fit_fixtures import PLOTS_FIXTURE as FIXTURE
from support.paths import CHINCHILLA

CHIN_COLUMNS = ColumnMap(N="Model Size", C="Training FLOP", L="loss")


def all_figures(table, fit):
    drawn = figures(table, fit, [FIXTURE / "fit.tbptt.json"], FIXTURE / "free.baseline.json")
    joint = figures(table, FIXTURE / "fit.joint.json")
    return {**drawn, **{f"joint_{k}": v for k, v in joint.items()}}


def overlapping_ticks(fig) -> list[str]:
    """Pairs of drawn tick labels on one axis whose boxes overlap (after the figure is laid out)."""
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    clashes = []
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            ticks = axis.get_major_ticks() + axis.get_minor_ticks()
            boxes = [
                (t.label1.get_text(), t.label1.get_window_extent(renderer))
                for t in ticks
                if t.label1.get_visible() and t.label1.get_text() and lo <= t.get_loc() <= hi  # drawn labels only
            ]
            for (a, box_a), (b, box_b) in combinations(boxes, 2):
                if box_a.overlaps(box_b):
                    clashes.append(f"{ax.get_title()!r}: {a} / {b}")
    return clashes


def test_every_figure_png_200_dpi_and_pdf(table, fit, tmp_path):
    paths = save_figures(all_figures(table, fit), tmp_path)
    pngs = [p for p in paths if p.suffix == ".png"]
    assert len(pngs) == 14 and DPI >= 200  # 7 of the single fit (loop_gap the 7th), 7 of the joint (its loop_gap too)
    for png in pngs:
        dpi = Image.open(png).info["dpi"]
        assert min(dpi) >= 199.9, (png.name, dpi)  # PNG stores dots per metre: 200 reads back as 199.9999
        pdf = png.with_suffix(".pdf")
        assert pdf.read_bytes().startswith(b"%PDF") and pdf.stat().st_size > 3000


def test_no_empty_panels_and_no_overlapping_tick_labels(table, fit):
    for name, fig in all_figures(table, fit).items():
        for ax in fig.axes:
            drawn = ax.collections or ax.lines or ax.patches or ax.containers
            assert drawn, f"{name}: panel {ax.get_title()!r} draws nothing"
        assert overlapping_ticks(fig) == [], name


def test_labels_are_mathtext_with_units(table, fit):
    fig = collapse(table, fit)
    drawn = {ax.get_xlabel() for ax in fig.axes} | {ax.get_ylabel() for ax in fig.axes}
    assert drawn == {labels.N_EFF, labels.COLLAPSED}
    assert r"$N_\mathrm{eff}" in labels.N_EFF and "nats/token" in labels.COLLAPSED
    iso = iso_flop(table, fit)
    assert {ax.get_ylabel() for ax in iso.axes} == {r"loss $L$ (nats/token)"}
    assert all("FLOPs" in ax.get_title() for ax in iso.axes)


def test_budget_panels_at_most_nine_log_spaced():
    C = np.geomspace(1e18, 1e22, 225)
    panels = budget_panels(C)
    assert len(panels) == 9
    assert panels[0][0] == C[0] and panels[-1][1] == C[-1]
    widths = [np.log10(hi / lo) for lo, hi in panels]
    assert max(widths) < 4 / 9 + 1e-9  # each panel spans one ninth of the decades or less
    covered = sum(((C >= lo) & (C <= hi)).sum() for lo, hi in panels)
    assert covered == len(C)  # every budget in exactly one panel
    assert budget_panels([1e18, 1e19, 1e18]) == [(1e18, 1e18), (1e19, 1e19)]  # few budgets: one panel each


def test_chinchilla_iso_flop_is_nine_panels_without_looped_columns(tmp_path):
    raw = pd.read_csv(CHINCHILLA)
    assert not {"N_once", "N_rec", "r"} & set(raw.columns)
    t = drop_top_k(read_table(CHINCHILLA, CHIN_COLUMNS, "chinchilla"), 5)
    assert len(t) == 240 and budgets(t).size == 240 and np.unique(budgets(t)).size > 200
    from loopscale.fit.laws.registry import law_data_from_table
    from loopscale.fit.optimize import fit_law

    result, _ = fit_law(law_data_from_table(t, "chinchilla"), "chinchilla", n_refine=4)
    fig = iso_flop(t, result)
    assert len(fig.axes) == 9
    assert sum(len(c.get_offsets()) for ax in fig.axes for c in ax.collections if len(c.get_offsets())) >= 240
    path = save_figures({"iso_flop": fig}, tmp_path, formats=("png",))[0]
    width, height = Image.open(path).size
    assert height < 2500 and width < 3000  # not 225 panels, 27,676 px tall
    assert overlapping_ticks(fig) == []


def test_drop_top_k_drops_the_highest_losses():
    t = pd.DataFrame({"L": [3.0, 5.0, 1.0, 4.0, 2.0], "x": range(5)})
    out = drop_top_k(t, 2)
    assert list(out["L"]) == [3.0, 1.0, 2.0] and list(out["x"]) == [0, 2, 4]
    assert drop_top_k(t, 0) is t
    with pytest.raises(InputError, match="every row"):
        drop_top_k(t, 5)
    with pytest.raises(InputError, match=">= 0"):
        drop_top_k(t, -1)
