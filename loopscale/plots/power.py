"""The figure of `loopscale power`: the minimum detectable delta-phi of each design against what it costs.

One point per design of the menu (FLOPs of the design with a second recipe's looped runs, log scale; MDE at 80%
power, 5% two-sided), labelled by name, and below it the MDE from curves where the pilot is a curve-law fit; the
--detect target as a line and the recommended design as a star.
Drawn from the record `loopscale power` writes; nothing is computed here.
"""

from __future__ import annotations

from matplotlib.figure import Figure


def power_figure(record: dict) -> Figure:
    """MDE of delta-phi against FLOPs per design (module docstring)."""
    fig = Figure(figsize=(7.2, 4.6), layout="constrained")
    ax = fig.subplots()
    designs = record["designs"]
    xs = [d["cost"]["flops_with_candidate"] for d in designs]
    ys = [d["delta_phi"]["mde"] for d in designs]
    ax.scatter(xs, ys, color="tab:blue", zorder=3, label="fitted from final points")
    if all("curves" in d for d in designs):  # a curve-law pilot: the same sweeps fitted from their curves
        curves = [d["curves"]["delta_phi"]["mde"] for d in designs]
        ax.scatter(xs, curves, color="tab:green", marker="s", zorder=3, label="fitted from curves")
        ax.legend(fontsize=8, loc="best")
    for d, x, y in zip(designs, xs, ys):
        ax.annotate(d["name"], (x, y), textcoords="offset points", xytext=(5, 4), fontsize=8)
    target = record.get("target") or {}
    if target:
        ax.axhline(target["detect"], color="tab:red", lw=1, ls="--", label=f"target |Δφ| = {target['detect']:g}")
        rec = target.get("recommended")
        if rec:
            x, y = rec["cost"]["flops_with_candidate"], (rec.get("curves") or rec)["delta_phi"]["mde"]
            ax.scatter([x], [y], marker="*", s=160, color="tab:red", zorder=4, label=f"recommended: {rec['name']}")
        ax.legend(fontsize=8, loc="best")
    ax.set_xscale("log")
    ax.set_xlabel("training compute of the comparison, $C$ (FLOPs)")
    ax.set_ylabel("minimum detectable $|\\Delta\\varphi|$ (80% power)")
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title(f"loopscale power: {record['settings']['n_sims']} simulated sweeps per design", fontsize=10)
    return fig
