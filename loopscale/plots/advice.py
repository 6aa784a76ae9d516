"""The figure of `loopscale advise`: predicted loss against unique parameters at a fixed budget C.

One curve per r (the fitted law along the model family, D = C / F per width), its band (the bootstrap
replicates' interval of the loss of each model), the constraint lines (the unique-parameter cap; the part of
a curve beyond an inference limit is dotted), the break-even cap with its interval, each r's advised model
and the chosen one. Drawn from `loopscale.analysis.advise.advice.Advice`; nothing is computed here.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

import loopscale.plots.labels as labels  # the module, not the package: no import cycle

from .layout import log_axis, r_colours


def advice_figure(advice) -> Figure:
    """Loss vs unique parameters per r at the advice's budget (see the module docstring)."""
    record, curves = advice.record, advice.curves
    colours = r_colours(curves)
    fig = Figure(figsize=(7.6, 5.0), layout="constrained")
    ax = fig.subplots()
    for r, curve in sorted(curves.items()):
        _draw_curve(ax, curve, colours[float(r)], f"$r = {r}$")
    for rec in record["per_r"]:
        if rec["feasible"]:
            m = rec["advised"]
            ax.scatter(m["N_unique"], m["L"], color=colours[float(rec["r"])], s=30, zorder=4, edgecolor="black", lw=0.5)
    best = next(rec for rec in record["per_r"] if rec["r"] == record["best"]["r"])["advised"]
    label = (
        f"advised: $r = {record['best']['r']}$, $d = {best['d_model']:g}$, $D$ = {labels.sci(best['D_tokens'])} tokens"
    )
    ax.scatter(best["N_unique"], best["L"], marker="*", s=260, color="gold", edgecolor="black", zorder=5, label=label)
    _constraint_lines(ax, record)
    log_axis(ax, "x")
    ax.set_ylim(*_y_limits(record, curves))
    ax.set_xlabel(r"unique parameters $N_\mathrm{once} + N_\mathrm{rec}$ (non-embedding)")
    ax.set_ylabel(labels.PRED_LOSS)
    ax.legend(fontsize=8, loc="upper right")
    cons, family = record["constraints"], record["family"]
    n_reps = record["best"]["n_replicates"]
    band = f"bands: {record['level']:.0%} of {n_reps} bootstrap replicates" if n_reps else "no bootstrap replicates"
    where = f"family {family['name']} ({family['recipe']})"
    fig.suptitle(f"predicted loss at $C$ = {labels.sci(cons['compute_flops'])} FLOPs, {where}; {band}", fontsize=10)
    return fig


def _draw_curve(ax, curve: dict, colour, label: str) -> None:
    x, y, ok = np.asarray(curve["N_unique"]), np.asarray(curve["L"]), np.asarray(curve["feasible"], dtype=bool)
    if "L_lo" in curve:
        ax.fill_between(
            x[ok], np.asarray(curve["L_lo"])[ok], np.asarray(curve["L_hi"])[ok], color=colour, alpha=0.18, lw=0
        )
    ax.plot(x[ok], y[ok], color=colour, lw=1.5, label=label)
    if (~ok).any():  # beyond an inference limit (or the lifetime budget): not allowed
        ax.plot(x[~ok], y[~ok], color=colour, lw=1.0, ls=":")


def _constraint_lines(ax, record: dict) -> None:
    cap = record["constraints"].get("max_unique_params")
    if cap:
        ax.axvline(cap, color="black", ls="--", lw=1.0, label=f"unique-parameter cap {labels.sci(cap)}")
    be = (record.get("break_even") or {}).get("overall")
    if be and be.get("M"):
        lo, hi = (be.get("interval") or [None, None])[:2]
        if lo and hi:
            ax.axvspan(lo, hi, color="grey", alpha=0.12, lw=0)
        ax.axvline(
            be["M"], color="grey", ls="-.", lw=1.0, label=f"break-even {labels.sci(be['M'])}: looping wins left of it"
        )
    if record["constraints"].get("max_inference_flops") or record["constraints"].get("inference_tokens"):
        ax.plot([], [], color="grey", ls=":", label="dotted: beyond the inference limit")


def _y_limits(record: dict, curves: dict) -> tuple[float, float]:
    """From just below the lowest band to a margin above the advised losses, so the minima and where the
    curves cross stay visible (the curves rise steeply away from them)."""
    advised = [rec["advised"]["L"] for rec in record["per_r"] if rec["feasible"]]
    lows = [np.min(c.get("L_lo", c["L"])) for c in curves.values()]
    bottom = min(min(lows), min(advised))
    spread = max(max(advised) - min(advised), 0.02 * min(advised))
    top = max(advised) + 2.5 * spread
    return bottom - 0.1 * (top - bottom), top
