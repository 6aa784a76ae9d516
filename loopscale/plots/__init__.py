"""Diagnostic figures of a fitted scaling law, drawn from a runs table and a fit record.

The law under test (docs/design.md):

    L = E + A * N_eff^-alpha + B * D^-beta,    N_eff = N_once + r^phi * N_rec

Every figure is drawn from what `loopscale collect` wrote (the runs table) and what `loopscale fit`
wrote (the fit JSON, with its bootstrap replicates and phi profile). Nothing here fits anything:
fitted lines are `laws.registry.predict_loss` at the stored parameters, intervals are the stored ones.

Figures (each function returns a matplotlib Figure; `save_all` writes them as PNG at 200 dpi and PDF):
    iso_flop         loss vs N per compute budget (binned into at most 9 panels), a colour per r, a marker
                     per recipe, runs and fitted-law lines
    collapse         L - B D^-beta vs N_eff at the fitted phi (a joint fit: per recipe at its own phi),
                     at phi = 0 and at phi = 1
    phi_profile      the objective profiled in phi with its interval; bootstrap histogram of phi
                     (a joint fit: `delta_phi_profile`, the same for delta-phi per recipe)
    residuals        log L - log L_hat by r and by budget; free multipliers k_r against r^phi (given one)
                     (and `predicted_vs_observed`, the figure `loopscale fit --plot` writes)
    delta_phi        phi per recipe and its difference from the first, with 95% intervals, each fit named
                     by its recipe (for a joint fit, `joint_delta_phi`: the joint delta-phi next to the
                     separate fits')
    compute_optimal  N* and D* vs C for each r, with the best run at each budget
    advice_figure    `loopscale advise`: loss vs unique parameters at a budget per r, constraints, the choice

The modules, bottom to top:
    inputs      the runs table and the fit's numbers per row (read_table, rows_for_fit, predicted_loss, ...)
    labels      the axis labels (mathtext, with units: nats/token, parameters, tokens, FLOPs)
    layout      colours per r, markers per recipe, panel grids, log-axis ticks, the figure legend
    views       the rows of each recipe with the fit that predicts them (views, recipe_fit)
    curves      the law along each figure's axes (law_line, collapse_spread, compute_optimal_curve)
    isoflop     the iso-FLOP figure and its budget panels
    single_fit  the other figures of one fit
    recipes     the figures that compare recipes (delta_phi, joint_delta_phi, delta_phi_profile)
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
from .isoflop import MAX_PANELS, budget_panels, iso_flop
from .layout import r_colours
from .recipes import delta_phi, delta_phi_profile, fit_name, joint_delta_phi, named_fits
from .registry import DPI, FIGURE_NAMES, FORMATS, figure_files, figures, plot_fit, save_all, save_figures
from .single_fit import collapse, compute_optimal, phi_profile, predicted_vs_observed, residuals
from .views import View, recipe_fit, views

__all__ = [
    "DPI",
    "FIGURE_NAMES",
    "FORMATS",
    "MAX_PANELS",
    "View",
    "budget_panels",
    "delta_phi_profile",
    "fit_name",
    "named_fits",
    "views",
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
    "figure_files",
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
