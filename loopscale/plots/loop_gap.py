"""The loop's price at equal tokens, by size: L(r) - L(1) of the looped runs that share a width and a budget with an
r = 1 run (in an iso-depth sweep the pair trains the same tokens at nearly the same N_c = N_once + r N_rec), against
N_c, with the fitted law's gap at the same rows.

r^phi has the gap shrink as the model grows (its N-term flattens with size); runs whose gap grows instead say that a
pass is worth less the wider the model: phi runs with the size (`looped-logn`; docs/results.md, "phi runs with the
width"). The figure reads no law to pair the runs, so it shows that departure before any rival is fitted.
"""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from loopscale.fit.laws.form import cost_params
from loopscale.fit.laws.registry import law_class
from loopscale.fit.result import load_fit

from .figure import FitFigure
from .inputs import predicted_loss, rows_for_fit
from .layout import log_axis, panel_grid, r_colours, style_legend

PAIR_COLUMNS = ("width", "C_budget")  # what makes a looped run the pair of an r = 1 run: same width, same budget


def loop_gaps(table: pd.DataFrame, fit) -> pd.DataFrame | None:
    """One row per (r > 1, width, budget) with an r = 1 run of the same width and budget: r, width, C_budget, N_c,
    gap (L(r) - L(1), each the mean over its seeds, nats) and gap_law (the same from the fit's L_hat). None when the
    table lacks the pair columns or has no pair."""
    fit = load_fit(fit)
    if any(c not in table.columns for c in PAIR_COLUMNS):
        return None
    rows = rows_for_fit(table, fit)
    rows = rows.assign(L_hat=predicted_loss(rows, fit), N_c=cost_params(rows["N_once"], rows["N_rec"], rows["r"]))
    means = rows.groupby(["r", *PAIR_COLUMNS], as_index=False)[["L", "L_hat", "N_c"]].mean()
    plain = means[means["r"] == 1].set_index(list(PAIR_COLUMNS))[["L", "L_hat"]]
    pairs = means[means["r"] > 1].join(plain, on=list(PAIR_COLUMNS), rsuffix="_1", how="inner")
    if pairs.empty:
        return None
    return pairs.assign(gap=pairs["L"] - pairs["L_1"], gap_law=pairs["L_hat"] - pairs["L_hat_1"])[
        ["r", *PAIR_COLUMNS, "N_c", "gap", "gap_law"]
    ].reset_index(drop=True)


def loop_gap(table: pd.DataFrame, fit) -> Figure | None:
    """The runs' gaps (points, one per width and budget) and the law's (a dashed line per r through its mean gap at
    each width) against N_c."""
    fit = load_fit(fit)
    gaps = loop_gaps(table, fit)
    if gaps is None:
        return None
    colours = r_colours([1.0, *gaps["r"]])  # r = 1 keeps its colour of the other figures
    fig, axes = panel_grid(1, size=(5.2, 3.8))
    ax = axes[0]
    for r, g in gaps.groupby("r"):
        ax.scatter(g["N_c"], g["gap"], color=colours[r], s=18)
        law = g.groupby("width")[["N_c", "gap_law"]].mean().sort_values("N_c")
        ax.plot(law["N_c"], law["gap_law"], color=colours[r], lw=1.2, ls="--")
    ax.axhline(0.0, color="0.6", lw=0.8)
    log_axis(ax, "x")
    ax.set_xlabel(r"$N_c = N_\mathrm{once} + r N_\mathrm{rec}$ (parameters a token passes through)")
    ax.set_ylabel(r"$L(r) - L(1)$ at equal tokens (nats/token)")
    ax.set_title(f"the loop's price by size; the {fit.law} law dashed")
    runs = Line2D([], [], color="0.3", marker="o", ls="", label="runs (seed mean)")
    style_legend(
        fig,
        {r: c for r, c in colours.items() if r > 1},
        extra=[runs, Line2D([], [], color="0.3", ls="--", label=f"{fit.law} law")],
    )
    return fig


def _single_looped(fit) -> bool:
    cls = law_class(load_fit(fit).law)
    return not (cls.dense or cls.per_recipe)


FIGURES = (FitFigure("loop_gap", 4, lambda t, fit, c, f: loop_gap(t, fit) if _single_looped(fit) else None),)
