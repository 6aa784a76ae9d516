"""The loop's price by size: L(r) - L(1) of the looped runs that share a width and a budget with an r = 1 run (in an
iso-depth sweep the pair has nearly the same N_c = N_once + r N_rec and, for the baseline, nearly the same tokens:
0.91-0.98x on the CPU demo; a recipe whose pass costs less trains more, tbptt 1.2-1.3x, and each panel says how
many), against N_c, with the fitted law's gap at the same rows (the law reads each run's own tokens).

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
from .views import recipe_fit

PAIR_COLUMNS = ("width", "C_budget")  # what makes a looped run the pair of an r = 1 run: same width, same budget


def loop_gaps(table: pd.DataFrame, fit) -> pd.DataFrame | None:
    """One row per (r > 1, width, budget) with an r = 1 run of the same width and budget: r, width, C_budget, N_c,
    gap (L(r) - L(1), each the mean over its seeds, nats), gap_law (the same from the fit's L_hat) and tokens_ratio
    (D / D of the r = 1 run). None when the table lacks the pair columns or has no pair."""
    fit = load_fit(fit)
    if any(c not in table.columns for c in PAIR_COLUMNS):
        return None
    rows = rows_for_fit(table, fit)
    rows = rows.assign(L_hat=predicted_loss(rows, fit), N_c=cost_params(rows["N_once"], rows["N_rec"], rows["r"]))
    means = rows.groupby(["r", *PAIR_COLUMNS], as_index=False)[["L", "L_hat", "N_c", "D"]].mean()
    plain = means[means["r"] == 1].set_index(list(PAIR_COLUMNS))[["L", "L_hat", "D"]]
    pairs = means[means["r"] > 1].join(plain, on=list(PAIR_COLUMNS), rsuffix="_1", how="inner")
    if pairs.empty:
        return None
    gaps = pairs.assign(
        gap=pairs["L"] - pairs["L_1"], gap_law=pairs["L_hat"] - pairs["L_hat_1"], tokens_ratio=pairs["D"] / pairs["D_1"]
    )
    return gaps[["r", *PAIR_COLUMNS, "N_c", "gap", "gap_law", "tokens_ratio"]].reset_index(drop=True)


def recipe_gaps(table: pd.DataFrame, fit) -> list[tuple[str | None, pd.DataFrame]]:
    """(recipe, `loop_gaps`) per recipe of a joint fit, each recipe's looped runs paired with the shared r = 1 runs
    and its gap from the law at its own phi (`views.recipe_fit`); one entry (None) for a single looped fit. Recipes
    without a pair are left out."""
    fit = load_fit(fit)
    if not law_class(fit.law).per_recipe:
        parts = [(None, loop_gaps(table, fit))]
    else:
        parts = [(g, loop_gaps(table, recipe_fit(fit, g))) for g in (fit.joint or {}).get("recipes", [])]
    return [(g, gaps) for g, gaps in parts if gaps is not None]


def loop_gap(table: pd.DataFrame, fit) -> Figure | None:
    """The runs' gaps (points, one per width and budget) and the law's (a dashed line per r through its mean gap at
    each width) against N_c: one panel, or one per recipe of a joint fit on shared axes."""
    fit = load_fit(fit)
    parts = recipe_gaps(table, fit)
    if not parts:
        return None
    colours = r_colours([1.0, *pd.concat([gaps for _, gaps in parts])["r"]])  # r = 1 keeps its colour elsewhere
    fig, axes = panel_grid(len(parts), size=(5.2, 3.8))
    single_title = f"the loop's price by size; the {fit.law} law dashed"
    for ax, (recipe, gaps) in zip(axes, parts):
        for r, g in gaps.groupby("r"):
            ax.scatter(g["N_c"], g["gap"], color=colours[r], s=18)
            law = g.groupby("width")[["N_c", "gap_law"]].mean().sort_values("N_c")
            ax.plot(law["N_c"], law["gap_law"], color=colours[r], lw=1.2, ls="--")
        ax.axhline(0.0, color="0.6", lw=0.8)
        log_axis(ax, "x")
        ax.set_xlabel(r"$N_c = N_\mathrm{once} + r N_\mathrm{rec}$ (parameters a token passes through)")
        ax.set_ylabel(r"$L(r) - L(1)$ (nats/token)")
        ratio = gaps["tokens_ratio"]
        tokens = f"pairs share width and budget; tokens {ratio.min():.2f}-{ratio.max():.2f}x r = 1's"
        ax.set_title(f"{recipe or single_title}\n{tokens}", fontsize=10)
    if len(parts) > 1:
        fig.suptitle(f"the loop's price by size, each recipe against the shared r = 1 runs; the {fit.law} law dashed")
        lo, hi = min(ax.get_ylim()[0] for ax in axes), max(ax.get_ylim()[1] for ax in axes)
        for ax in axes:  # one y-axis: the recipes' prices compare by eye
            ax.set_ylim(lo, hi)
    runs = Line2D([], [], color="0.3", marker="o", ls="", label="runs (seed mean)")
    style_legend(
        fig,
        {r: c for r, c in colours.items() if r > 1},
        extra=[runs, Line2D([], [], color="0.3", ls="--", label=f"{fit.law} law")],
    )
    return fig


def _looped(fit) -> bool:
    return not law_class(load_fit(fit).law).dense


FIGURES = (FitFigure("loop_gap", 4, lambda t, fit, c, f: loop_gap(t, fit) if _looped(fit) else None),)
