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
    loop_gap         L(r) - L(1) of runs sharing width and budget against N_c = N_once + r N_rec, the runs and
                     the law (a looped fit of a table with width and C_budget; a joint fit: a panel per recipe):
                     does the loop's price follow the law with size?
    compute_optimal  N* and D* vs C for each r, with the best run at each budget
    advice_figure    `loopscale advise`: loss vs unique parameters at a budget per r, constraints, the choice

The modules, bottom to top:
    inputs      the runs table and the fit's numbers per row (read_table, rows_for_fit, predicted_loss, ...)
    labels      the axis labels (mathtext, with units: nats/token, parameters, tokens, FLOPs)
    layout      colours per r, markers per recipe, panel grids, log-axis ticks, the figure legend
    views       the rows of each recipe with the fit that predicts them (views, recipe_fit)
    figure      what a fit figure is for the registry (FitFigure: name, rank, draw); each module lists its FIGURES
    curves      the law along each figure's axes (law_line, collapse_spread; the law's N*, D*: fit/isoflop.py)
    isoflop     the iso-FLOP figure and its budget panels
    single_fit  the other figures of one fit
    loop_gap    the loop's price by size (loop_gaps: the paired runs' gaps, recipe_gaps: a joint fit's, loop_gap)
    recipes     the figures that compare recipes (delta_phi, joint_delta_phi, delta_phi_profile)
    registry    the fit figures, found in the modules' FIGURES, which apply (figures) and writing them (save_all)
    advice      the figure of `loopscale advise` (from an Advice, not from a runs table)
Import each name from the module that defines it (`from loopscale.plots.isoflop import iso_flop`): this
package re-exports nothing, so importing one module does not load the others.
"""
