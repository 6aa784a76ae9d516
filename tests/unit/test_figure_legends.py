"""Issue 41 (16): a figure's legend is drawn where it hides nothing and is not cut: inside the image, clear of
the suptitle (the iso-FLOP figure's "(lines)" was under the legend) and of every panel. Measured on the
rendered figure (matplotlib's own extents, in pixels), for the figures with a figure-level legend."""

from __future__ import annotations

import pytest

from loopscale.plots.registry import figures


def _overlap(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def _inside(inner, outer, slack: float = 1.0) -> bool:
    return (
        inner.x0 >= outer.x0 - slack
        and inner.y0 >= outer.y0 - slack
        and inner.x1 <= outer.x1 + slack
        and inner.y1 <= outer.y1 + slack
    )


def _rendered(fig):
    """The figure drawn once (constrained layout placed), as the PNG writer draws it; its renderer."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


@pytest.mark.parametrize("budgets", [1, 2, 6])
@pytest.mark.parametrize("name", ["iso_flop", "collapse", "residuals", "compute_optimal"])
def test_a_figure_legend_hides_no_title_and_no_panel(baseline, fit, name, budgets):
    # one budget: a one-panel iso-FLOP figure, narrower than its suptitle (the report's case)
    kept = sorted(baseline["C_budget"].unique())[:budgets]
    fig = figures(baseline[baseline["C_budget"].isin(kept)], fit)[name]
    renderer = _rendered(fig)
    (legend,) = fig.legends
    box = legend.get_window_extent(renderer)
    assert _inside(box, fig.bbox), (name, box, fig.bbox)
    if fig._suptitle is not None:
        title = fig._suptitle.get_window_extent(renderer)
        assert _inside(title, fig.bbox) and not _overlap(box, title), (name, title, box, fig.bbox)
    for ax in fig.axes:
        assert not _overlap(box, ax.get_window_extent(renderer)), name


def test_the_fit_plot_legend_is_inside_the_image_and_off_the_axes(baseline, fit):
    from loopscale.plots.single_fit import predicted_vs_observed

    fig = predicted_vs_observed(baseline, fit)
    renderer = _rendered(fig)
    (legend,) = fig.legends
    box = legend.get_window_extent(renderer)
    assert _inside(box, fig.bbox) and box.x1 < fig.bbox.x1 - 2  # not against the image's right edge
    assert not _overlap(box, fig.axes[0].get_window_extent(renderer))
