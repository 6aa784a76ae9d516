"""The diagnostic figures of one fit (each function returns a matplotlib Figure):

iso_flop               loss vs N per compute budget, one colour per r, runs and fitted-law lines
collapse               L - B D^-beta vs N_eff at the fitted phi, at phi = 0 and at phi = 1
phi_profile            the objective profiled in phi with its interval; bootstrap histogram of phi
residuals              log L - log L_hat by r and by budget; free multipliers k_r against r^phi
predicted_vs_observed  L_hat against L (the figure `loopscale fit --plot` writes)
compute_optimal        N* and D* vs C for each r, with the best run at each budget
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from loopscale.fit.result import FitResult, load_fit

from .curves import collapse_coordinates, collapse_spread, compute_optimal_curve, law_line
from .inputs import budgets, free_multipliers, log_residuals, looped_phi, predicted_loss, rows_for_fit
from .layout import explain_empty, panel_grid, r_colours


# ----------------------------------------------------------------------------------------------
# 1. iso-FLOP curves
# ----------------------------------------------------------------------------------------------
def iso_flop(table: pd.DataFrame, fit) -> Figure:
    """Loss vs N (log x) at each compute budget: one colour per r, runs as points, fitted law as lines.

    At fixed C a bigger model sees fewer tokens (D = C / F), so each curve has a minimum: the
    compute-optimal size for that r. Looping shifts the r curves left (fewer unique parameters).
    """
    fit = load_fit(fit)
    table = rows_for_fit(table, fit)
    t = table.assign(_budget=budgets(table))
    levels = sorted(t["_budget"].unique())
    colours = r_colours(t["r"])
    fig, axes = panel_grid(len(levels))
    for ax, C in zip(axes, levels):
        at_c = t[t["_budget"] == C]
        for r, g in at_c.groupby("r"):
            ax.scatter(g["N"], g["L"], color=colours[float(r)], s=18, label=f"r = {r:g}", zorder=3)
            if len(g) > 1:
                x, y = law_line(g, fit)
                ax.plot(x, y, color=colours[float(r)], lw=1.2)
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())  # minor labels collide on a narrow N range
        ax.set_xlabel("N (non-embedding parameters)")
        ax.set_ylabel("loss L")
        ax.set_title(f"C = {C:.3g} FLOPs")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"iso-FLOP curves: runs (points) and the fitted {fit.law} law (lines)")
    return fig


# ----------------------------------------------------------------------------------------------
# 2. Collapse
# ----------------------------------------------------------------------------------------------
def collapse(table: pd.DataFrame, fit) -> Figure:
    """L - B D^-beta vs N_eff in three panels: the fitted phi, phi = 0 and phi = 1.

    All r on one curve at the fitted phi (and visibly apart at 0 and 1) is the visual test of the law.
    """
    fit = load_fit(fit)
    table = rows_for_fit(table, fit)
    phi_hat = looped_phi(fit, "collapse")
    p = fit.params
    colours = r_colours(table["r"])
    panels = [
        (phi_hat, f"fitted phi = {phi_hat:.3f}"),
        (0.0, "phi = 0: a loop is worth one block"),
        (1.0, "phi = 1: a loop is worth r blocks"),
    ]
    fig, axes = panel_grid(3, size=(4.4, 3.8))
    for ax, (phi, title) in zip(axes, panels):
        x, y = collapse_coordinates(table, fit, phi)
        for r in sorted(colours):
            rows = table["r"].to_numpy(dtype=float) == r
            ax.scatter(x[rows], y[rows], color=colours[r], s=14, label=f"r = {r:g}", zorder=3)
        line = np.geomspace(x.min(), x.max(), 100)
        ax.plot(line, p["E"] + p["A"] * line ** -p["alpha"], color="black", lw=1.2, label="E + A N_eff^-alpha")
        ax.set_xscale("log")
        ax.set_xlabel("N_eff = N_once + r^phi N_rec")
        ax.set_ylabel("L - B D^-beta")
        spread = collapse_spread(table, fit, phi)
        ax.set_title(f"{title}\nRMS distance from curve {100 * spread:.2f}%", fontsize=10)
    axes[0].legend(fontsize=8)
    fig.suptitle("collapse: with the data term removed, every r should fall on one curve")
    return fig


# ----------------------------------------------------------------------------------------------
# 3. Profile and bootstrap of phi
# ----------------------------------------------------------------------------------------------
def phi_profile(fit) -> Figure:
    """Left: the objective minimised over the other parameters on a phi grid, minus its minimum,
    with the threshold that bounds the 95% interval. Right: the bootstrap replicates of phi."""
    fit = load_fit(fit)
    phi_hat = looped_phi(fit, "phi profile")
    fig, (ax_p, ax_b) = panel_grid(2, size=(5.0, 3.8))
    prof = fit.profile_phi
    if prof and prof.get("phi"):
        grid = np.asarray(prof["phi"], dtype=float)
        obj = np.asarray([np.nan if v is None else v for v in prof["objective"]], dtype=float)
        ax_p.plot(grid, obj - np.nanmin(obj), marker=".", color="C0")
        if prof.get("threshold") is not None:
            ax_p.axhline(prof["threshold"], color="C3", ls="--", lw=1, label="95% threshold")
        lo, hi = (prof.get("interval") or [None, None])[:2]
        if lo is not None or hi is not None:
            ax_p.axvspan(
                grid.min() if lo is None else lo,
                grid.max() if hi is None else hi,
                color="C3",
                alpha=0.12,
                label="95% profile interval",
            )
        ax_p.axvline(phi_hat, color="black", lw=1, label=f"phi_hat = {phi_hat:.3f}")
        thr = prof.get("threshold")
        if thr:  # zoom on the interval: the crossings matter, not the far walls of the valley
            ax_p.set_ylim(0, min(8 * thr, np.nanmax(obj - np.nanmin(obj))) * 1.05 or 8 * thr)
        ax_p.legend(fontsize=8)
    else:
        explain_empty(ax_p, "this fit JSON has no phi profile")
    ax_p.set_xlabel("phi")
    ax_p.set_ylabel("objective - minimum")
    ax_p.set_title("profile of the objective in phi")
    reps = np.asarray((fit.bootstrap or {}).get("params", {}).get("phi", []), dtype=float)
    reps = reps[np.isfinite(reps)]
    if len(reps):
        ax_b.hist(reps, bins=max(10, min(40, len(reps) // 5)), color="C0", alpha=0.8)
        ax_b.axvline(phi_hat, color="black", lw=1, label=f"phi_hat = {phi_hat:.3f}")
        for i, edge in enumerate(fit.ci95.get("phi") or []):
            ax_b.axvline(edge, color="C3", ls="--", lw=1, label="95% percentile CI" if i == 0 else None)
        ax_b.legend(fontsize=8)
        ax_b.set_title(f"bootstrap of phi ({len(reps)} replicates)")
    else:
        explain_empty(ax_b, "this fit JSON has no bootstrap replicates")
        ax_b.set_title("bootstrap of phi")
    ax_b.set_xlabel("phi")
    ax_b.set_ylabel("replicates")
    fig.suptitle("how well is phi determined?")
    return fig


# ----------------------------------------------------------------------------------------------
# 4. Residuals and the free multipliers
# ----------------------------------------------------------------------------------------------
def residuals(table: pd.DataFrame, fit, free=None) -> Figure:
    """log L - log L_hat by r and by budget; and, given a looped-free fit, k_r against r^phi.

    Structure in the residuals (a trend with r or C) means the law misses something; k_r off the
    r^phi curve means the power-law form of the recurrence benefit is wrong.
    """
    fit = load_fit(fit)
    table = rows_for_fit(table, fit)
    res = log_residuals(table, fit)
    r = table["r"].to_numpy(dtype=float)
    C = budgets(table)
    colours = r_colours(r)
    fig, (ax_r, ax_c, ax_k) = panel_grid(3, size=(4.4, 3.6))
    jitter = np.random.default_rng(0).uniform(-0.12, 0.12, len(r))  # fixed: same picture every time
    levels = sorted(colours)
    for i, rv in enumerate(levels):
        rows = r == rv
        ax_r.scatter(i + jitter[rows], res[rows], color=colours[rv], s=14)
        ax_c.scatter(C[rows], res[rows], color=colours[rv], s=14, label=f"r = {rv:g}")
    ax_r.set_xticks(range(len(levels)), [f"{v:g}" for v in levels])
    ax_r.set_xlabel("r (recurrences)")
    ax_r.set_title("residuals by r")
    ax_c.set_xscale("log")
    ax_c.set_xlabel("compute budget C (FLOPs)")
    ax_c.set_title("residuals by budget")
    ax_c.legend(fontsize=8)
    for ax in (ax_r, ax_c):
        ax.axhline(0, color="black", lw=0.8)
        ax.set_ylabel("log L - log L_hat")
    ax_k.set_title("free multipliers k_r vs r^phi")
    if free is None:
        explain_empty(ax_k, "no looped-free fit given (loopscale fit --law looped-free)")
    else:
        _draw_multipliers(ax_k, free_multipliers(free), load_fit(free), fit.params.get("phi"))
    fig.suptitle(f"residuals of the {fit.law} fit (RMS {np.sqrt(np.mean(res**2)):.4f} in log L)")
    return fig


def _draw_multipliers(ax, k: dict[float, float], free: FitResult, phi: float | None) -> None:
    rs = np.array(sorted(k))
    ks = np.array([k[v] for v in rs])
    ci = [free.ci95.get(f"k_{v:g}") for v in rs]
    if all(c is not None for c in ci[1:]):
        lo = np.array([ks[0]] + [c[0] for c in ci[1:]])
        hi = np.array([ks[0]] + [c[1] for c in ci[1:]])
        ax.errorbar(rs, ks, yerr=[ks - lo, hi - ks], fmt="o", color="C0", label="k_r (95% CI)")
    else:
        ax.plot(rs, ks, "o", color="C0", label="k_r (looped-free fit)")
    line = np.geomspace(1, rs.max(), 50)
    if phi is not None:
        ax.plot(line, line**phi, color="black", lw=1.2, label=f"r^phi, phi = {phi:.3f}")
    ax.plot(line, line, color="grey", ls=":", lw=1, label="r^1")
    ax.plot(line, np.ones_like(line), color="grey", ls="--", lw=1, label="r^0")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("r (recurrences)")
    ax.set_ylabel("k_r (N_eff = N_once + k_r N_rec)")
    ax.legend(fontsize=8)


def predicted_vs_observed(table: pd.DataFrame, fit) -> Figure:
    """L_hat against L for every run, one colour per r, with the identity line: the one-glance check
    `loopscale fit --plot` draws."""
    fit = load_fit(fit)
    table = rows_for_fit(table, fit)
    L, L_hat = table["L"].to_numpy(dtype=float), predicted_loss(table, fit)
    r = table["r"].to_numpy(dtype=float)
    colours = r_colours(r)
    fig = Figure(figsize=(4.8, 4.4), layout="constrained")
    ax = fig.subplots()
    for rv in sorted(colours):
        ax.scatter(L[r == rv], L_hat[r == rv], color=colours[rv], s=14, label=f"r = {rv:g}")
    lims = [min(L.min(), L_hat.min()), max(L.max(), L_hat.max())]
    ax.plot(lims, lims, color="black", ls="--", lw=0.8)
    ax.set_xlabel("observed L")
    ax.set_ylabel("predicted L_hat")
    ax.set_title(f"{fit.law} fit: objective {fit.objective:.3g}, {len(L)} runs")
    ax.legend(fontsize=8)
    return fig


# ----------------------------------------------------------------------------------------------
# 5. Compute-optimal allocation
# ----------------------------------------------------------------------------------------------
def compute_optimal(table: pd.DataFrame, fit) -> Figure:
    """N* and D* vs C for each r (lines: the fitted law), with the lowest-loss run of each
    (r, budget) as points: an empirical check of the predicted allocation."""
    fit = load_fit(fit)
    table = rows_for_fit(table, fit)
    t = table.assign(_budget=budgets(table))
    colours = r_colours(t["r"])
    C = np.geomspace(t["_budget"].min() / 2, t["_budget"].max() * 2, 60)
    fig, (ax_n, ax_d) = panel_grid(2, size=(4.8, 3.8))
    for r in sorted(colours):
        N_star, D_star = compute_optimal_curve(t, fit, r, C)
        ax_n.plot(C, N_star, color=colours[r], lw=1.2, label=f"r = {r:g}")
        ax_d.plot(C, D_star, color=colours[r], lw=1.2, label=f"r = {r:g}")
        at_r = t[t["r"].to_numpy(dtype=float) == r]
        best = at_r.loc[at_r.groupby("_budget")["L"].idxmin()]
        ax_n.scatter(best["_budget"], best["N"], color=colours[r], s=16, zorder=3)
        ax_d.scatter(best["_budget"], best["D"], color=colours[r], s=16, zorder=3)
    for ax, what in ((ax_n, "N* (non-embedding parameters)"), (ax_d, "D* (training tokens)")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("compute C (FLOPs)")
        ax.set_ylabel(what)
        ax.legend(fontsize=8)
    ax_n.set_title("compute-optimal model size")
    ax_d.set_title("compute-optimal tokens")
    fig.suptitle("compute-optimal allocation per r (lines: fitted law; points: best run per budget)")
    return fig
