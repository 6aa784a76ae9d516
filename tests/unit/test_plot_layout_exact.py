"""The figures' shared layout by hand (issue 58, loopscale/plots/layout.py): one tab10 colour per distinct r in
increasing r, recipes' markers and line styles in the order given, the panel grid's shape and size with no
empty axes, the figure legend's handles and columns, the title's wrap width, which log ticks are labelled at
each span boundary, and the y label's power of ten outside [-2, 3]. No file written."""

from __future__ import annotations

import pytest
from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from loopscale.plots import layout as L


def test_one_colour_per_distinct_r_in_increasing_r_and_recipe_styles_in_order():
    tab10 = colormaps["tab10"]
    assert L.r_colours([4, 1, 2.0, 4.0, 8]) == {1.0: tab10(0), 2.0: tab10(1), 4.0: tab10(2), 8.0: tab10(3)}
    many = L.r_colours(range(1, 13))
    assert many[11.0] == tab10(0) and many[12.0] == tab10(1)  # the cycle wraps after ten
    styles = L.recipe_styles(["tb", "base", "hy", "a", "b"])
    assert list(styles) == ["tb", "base", "hy", "a", "b"]
    assert list(styles.values()) == [("o", "-"), ("s", "--"), ("^", "-."), ("D", ":"), ("v", "-")]
    assert L.r_label(4) == "$r = 4$" and L.r_label(2.5) == "$r = 2.5$"


@pytest.mark.parametrize(
    "n, ncols, shape",
    [(7, 3, (3, 3)), (3, 3, (1, 3)), (4, 3, (2, 3)), (2, 3, (1, 2)), (5, 2, (3, 2)), (1, 3, (1, 1))],
)
def test_the_panel_grid_is_rows_of_at_most_ncols_with_no_unused_axes(n, ncols, shape):
    fig, axes = L.panel_grid(n, ncols, size=(4.0, 3.0))
    assert len(axes) == n and len(fig.axes) == n
    rows, cols = shape
    assert tuple(fig.get_size_inches()) == pytest.approx((4.0 * cols, 3.0 * rows))
    assert axes[0].get_subplotspec().get_gridspec().get_geometry() == (rows, cols)


def test_the_figure_legend_is_r_sorted_then_recipes_when_several_then_extra():
    fig = Figure(figsize=(5.0, 3.0))
    colours = L.r_colours([8, 1, 2])
    extra = [Line2D([], [], color="k", label="law")]
    L.style_legend(fig, colours, L.recipe_styles(["base", "tb"]), extra=extra)
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == ["$r = 1$", "$r = 2$", "$r = 8$", "base", "tb", "law"]
    assert legend._ncols == 4  # int(5.0 / 1.1) = 4 entries a row, of 6
    one = Figure(figsize=(20.0, 3.0))
    L.style_legend(one, colours, L.recipe_styles(["base"]))
    (legend,) = one.legends
    assert [t.get_text() for t in legend.get_texts()] == ["$r = 1$", "$r = 2$", "$r = 8$"]  # one recipe: no key
    assert legend._ncols == 3  # never more columns than entries


def test_the_title_wraps_at_the_figures_width_in_characters():
    fig = Figure(figsize=(3.3, 3.0))  # 3.3 x 72 / (0.55 x 12) = 36 characters
    text = "validation of the looped fit on the demo table with every fold"
    L.suptitle(fig, text)
    assert fig._suptitle.get_text().split("\n") == ["validation of the looped fit on the", "demo table with every fold"]
    narrow = Figure(figsize=(1.0, 3.0))  # 10 characters would be too few: 20 at least
    L.suptitle(narrow, text)
    assert max(len(line) for line in narrow._suptitle.get_text().split("\n")) <= 20
    assert narrow._suptitle.get_text().split("\n")[0] == "validation of the"


def labels_at(lo, hi, ticks):
    fig = Figure()
    ax = fig.subplots()
    ax.set_xscale("log")
    ax.set_xlim(lo, hi)
    fmt = L.SparseLogFormatter()
    fmt.set_axis(ax.xaxis)
    return [fmt(t) for t in ticks]


def test_log_ticks_are_labelled_by_the_span_in_view():
    ticks = [1e3, 2e3, 3e3, 5e3, 7e3, 1e4]
    # two decades in view (1e3 and 1e4 both inside): decades only
    assert labels_at(1e3, 1e4, ticks) == ["$10^{3}$", "", "", "", "", "$10^{4}$"]
    # one decade, span log10(9000 / 1100) = 0.91 > 0.6: 1, 2, 5
    assert labels_at(1.1e3, 9e3, ticks) == ["$10^{3}$", "$2\\times10^{3}$", "", "$5\\times10^{3}$", "", "$10^{4}$"]
    # span log10(6e3 / 2.5e3) = 0.38, in (0.3, 0.6]: 1, 2, 3, 5
    assert labels_at(2.5e3, 6e3, ticks) == ["$10^{3}$", "$2\\times10^{3}$", "$3\\times10^{3}$", "$5\\times10^{3}$", "",
                                            "$10^{4}$"]  # fmt: skip
    # span log10(7.5e3 / 5e3) = 0.18 <= 0.3: every mantissa
    assert labels_at(5e3, 7.5e3, ticks)[4] == "$7\\times10^{3}$"
    # at each boundary: 3 is labelled below a span of 0.6, not above; 4 below a span of 0.3, not above
    assert labels_at(2e3, 2e3 * 10**0.62, [3e3])[0] == ""
    assert labels_at(2e3, 2e3 * 10**0.58, [3e3])[0] == "$3\\times10^{3}$"
    assert labels_at(3e3, 3e3 * 10**0.32, [4e3])[0] == ""
    assert labels_at(3e3, 3e3 * 10**0.28, [4e3])[0] == "$4\\times10^{3}$"
    # not a mantissa times a power of ten, zero, negative: no label
    assert labels_at(1e3, 1e4, [2.5e3, 0.0, -1.0]) == ["", "", ""]


@pytest.mark.parametrize(
    "top, label",
    [
        (999.0, "y"),  # power 2: plain
        (1500.0, "y"),  # power 3: plain
        (12000.0, "y ($\\times 10^{4}$)"),
        (0.0123, "y"),  # power -2: plain
        (0.00123, "y ($\\times 10^{-3}$)"),
    ],
)
def test_the_y_label_carries_the_power_of_ten_outside_minus_2_to_3(top, label):
    ax = Figure().subplots()
    ax.set_ylim(-top / 2, top)
    L.scaled_y_label(ax, "y")
    assert ax.get_ylabel() == label
    if label != "y":
        power = int(label.split("{")[1].split("}")[0])
        assert ax.yaxis.get_major_formatter()(top, 0) == f"{top / 10.0**power:g}"
