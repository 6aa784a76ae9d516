"""The figure of `loopscale validate`: the fit's law refitted without each fold, its predictions on the rows it
did not see against the measured loss, one colour per fold; a panel for the held-out budgets and one for the
held-out r. Reads the validation record (`loopscale.fit.validation.run.validate`) only."""

from __future__ import annotations

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure

import loopscale.plots.labels as labels  # the module, not the package: no import cycle
from loopscale.fit.validation.record import ValidationRecord

from .layout import explain_empty

PANELS = (("budget", "leave one budget out"), ("r", "leave one r out"))
MAX_LEGEND = 12  # folds named in a panel's legend


def held_out_figure(record: ValidationRecord) -> Figure:
    """Predicted against measured loss of every held-out row of the fit's law (form 0), coloured by fold."""
    fig = Figure(figsize=(10.0, 4.4), layout="constrained")
    axes = fig.subplots(1, 2)
    for ax, (kind, title) in zip(axes, PANELS):
        done = [
            r for r in record["results"] if r["form"] == 0 and r["ok"] and record["folds"][r["fold"]]["kind"] == kind
        ]
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(labels.OBS_LOSS)
        ax.set_ylabel(labels.PRED_LOSS)
        if not done:
            why = next((f["reason"] for f in record["folds"] if f["kind"] == kind and f["reason"]), "no fold")
            explain_empty(ax, f"cannot: {why}")
            continue
        colours = colormaps["viridis"](np.linspace(0, 0.9, len(done)))
        for colour, r in zip(colours, done):
            label = record["folds"][r["fold"]]["label"]
            err = r["held_out"]["mean_abs_rel_error"]
            named = len(done) <= MAX_LEGEND or r is done[0]  # a table of many budgets: one colour scale, no list
            label = f"{label}: {err:.2%}" if len(done) <= MAX_LEGEND else f"{len(done)} folds, {label} first"
            ax.scatter(r["observed"], r["predicted"], color=colour, s=14, label=label if named else None)
        values = np.concatenate([np.r_[r["observed"], r["predicted"]] for r in done])
        lims = [values.min(), values.max()]
        ax.plot(lims, lims, color="black", ls="--", lw=0.8)
        ax.legend(fontsize=7, title="held out: mean |error|", title_fontsize=7)
    fig.suptitle(f"{record['fit']['law']} fit: held-out predictions", fontsize=11)
    return fig
