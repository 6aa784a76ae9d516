"""Diagnostic figures of a fitted scaling law, drawn from a runs table and a fit record.

The law under test (docs/design.md):

    L = E + A * N_eff^-alpha + B * D^-beta,    N_eff = N_once + r^phi * N_rec

Every figure is drawn from what `loopscale collect` wrote (the runs table) and what `loopscale fit`
wrote (the fit JSON, with its bootstrap replicates and phi profile). Nothing here fits anything:
fitted lines are `laws.predict_loss` at the stored parameters, intervals are the stored ones.

Figures (each function returns a matplotlib Figure; `save_all` writes them as PNG):
    iso_flop         loss vs N per compute budget, one colour per r, runs and fitted-law lines
    collapse         L - B D^-beta vs N_eff at the fitted phi, at phi = 0 and at phi = 1
    phi_profile      the objective profiled in phi with its interval; bootstrap histogram of phi
    residuals        log L - log L_hat by r and by budget; free multipliers k_r against r^phi
                     (and `predicted_vs_observed`, the figure `loopscale fit --plot` writes)
    delta_phi        phi per recipe and its difference from the first, with 95% intervals
                     (for a joint fit, `joint_delta_phi`: the joint delta-phi next to the separate fits')
    compute_optimal  N* and D* vs C for each r, with the best run at each budget
    advice_figure    `loopscale advise`: loss vs unique parameters at a budget per r, constraints, the choice

The modules, bottom to top:
    inputs      the runs table and the fit's numbers per row (read_table, rows_for_fit, predicted_loss, ...)
    layout      colours per r, panel grids, the note of an empty panel
    curves      the law along each figure's axes (law_line, collapse_spread, compute_optimal_curve)
    single_fit  the figures of one fit
    recipes     the figures that compare recipes (delta_phi, joint_delta_phi) and recipe_fit
    registry    which figures apply (figures, FIGURE_NAMES) and writing them (save_all, plot_fit)
    advice      the figure of `loopscale advise` (from an Advice, not from a runs table)
Every public name is re-exported here, so `from loopscale.plots import X` reaches all of them.
"""

from __future__ import annotations

from loopscale.fit.result import FitResult, load_fit

from .advice import advice_figure
from .curves import collapse_coordinates, collapse_spread, compute_optimal_curve, law_line
from .inputs import (
    LAW_INPUTS,
    REQUIRED_COLUMNS,
    as_looped_table,
    budgets,
    fit_label,
    free_multipliers,
    log_residuals,
    predicted_loss,
    read_table,
    rows_for_fit,
)
from .layout import r_colours
from .recipes import delta_phi, joint_delta_phi, recipe_fit
from .registry import FIGURE_NAMES, figures, plot_fit, save_all, save_figures
from .single_fit import collapse, compute_optimal, iso_flop, phi_profile, predicted_vs_observed, residuals

__all__ = [
    "FIGURE_NAMES",
    "LAW_INPUTS",
    "REQUIRED_COLUMNS",
    "FitResult",
    "advice_figure",
    "as_looped_table",
    "budgets",
    "collapse",
    "collapse_coordinates",
    "collapse_spread",
    "compute_optimal",
    "compute_optimal_curve",
    "delta_phi",
    "figures",
    "fit_label",
    "free_multipliers",
    "iso_flop",
    "joint_delta_phi",
    "law_line",
    "load_fit",
    "log_residuals",
    "phi_profile",
    "plot_fit",
    "predicted_loss",
    "predicted_vs_observed",
    "r_colours",
    "read_table",
    "recipe_fit",
    "residuals",
    "rows_for_fit",
    "save_all",
    "save_figures",
]
