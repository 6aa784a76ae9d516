"""The diagnostic figures of one fit (each function returns a matplotlib Figure). Every figure draws the
rows the fit covers view by view (`views`: one marker per recipe, a joint fit's recipes each at its own
phi) with one colour per r; the iso-FLOP figure is in isoflop.py.

collapse               L - B D^-beta vs N_eff at the fitted phi (per recipe for a joint fit), phi = 0, phi = 1
phi_profile            the objective profiled in phi with its interval; bootstrap histogram of phi
residuals              log L - log L_hat by r and by budget; free multipliers k_r against r^phi
predicted_vs_observed  L_hat against L (the figure `loopscale fit --plot` writes)
compute_optimal        N* and D* vs C for each r, with the best run at each budget
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

import loopscale.plots.labels as labels  # the module, not the package: no import cycle
from loopscale.errors import InputError
from loopscale.fit.isoflop import compute_optimal_curve
from loopscale.fit.laws.registry import law_class, law_names
from loopscale.fit.result import FitResult, load_fit
from loopscale.fit.runs_table import budgets

from .curves import collapse_coordinates
from .figure import FitFigure
from .inputs import as_looped_table, free_multipliers, log_residuals, looped_phi, predicted_loss
from .layout import explain_empty, log_axis, panel_grid, r_colours, scaled_y_label, style_legend
from .views import DENSE, all_rows, view_styles, views


# ----------------------------------------------------------------------------------------------
# Collapse
# ----------------------------------------------------------------------------------------------
def collapse(table: pd.DataFrame, fit) -> Figure:
    """L - B D^-beta vs N_eff: at the fitted phi (a joint fit: one panel per recipe at its own phi, with
    the shared r = 1 runs), then at phi = 0 and phi = 1 (every run).

    All r on one curve at the fitted phi (and visibly apart at 0 and 1) is the visual test of the law.
    """
    fit = load_fit(fit)
    per_recipe = law_class(fit.law).per_recipe
    if not per_recipe:
        looped_phi(fit, "collapse")
    vs = views(table, fit)
    if per_recipe:
        dense = [v for v in vs if v.label == DENSE]
        fitted = [
            (f"{v.label}: {labels.phi_text(v.fit.params['phi'])}", [(u, v.fit.params["phi"]) for u in dense + [v]])
            for v in vs
            if v.label != DENSE
        ]
    else:
        phi_hat = fit.params["phi"]
        fitted = [(f"fitted {labels.phi_text(phi_hat)}", [(v, phi_hat) for v in vs])]
    panels = [
        *fitted,
        (r"$\phi = 0$: a loop is worth one block", [(v, 0.0) for v in vs]),
        (r"$\phi = 1$: a loop is worth $r$ blocks", [(v, 1.0) for v in vs]),
    ]
    colours = r_colours(all_rows(vs)["r"])
    fig, axes = panel_grid(len(panels), size=(4.4, 3.8))
    for ax, (title, drawn) in zip(axes, panels):
        rms = _collapse_panel(ax, drawn, colours)
        ax.set_title(f"{title}\nRMS distance from the curve {100 * rms:.2f}%", fontsize=10)
    curve = Line2D([], [], color="black", lw=1.2, label=labels.LAW_CURVE)
    style_legend(fig, colours, view_styles(vs), extra=[curve])
    fig.suptitle("collapse: with the data term removed, every $r$ should fall on one curve")
    return fig


def _collapse_panel(ax, drawn, colours) -> float:
    """The runs of each (view, phi) in collapse coordinates and the law's curve; returns their RMS relative
    distance from the curve (`curves.collapse_spread` for one fit's rows)."""
    xs, ys = [], []
    for view, phi in drawn:
        x, y = collapse_coordinates(view.rows, view.fit, phi)
        r = view.rows["r"].to_numpy(dtype=float)
        for rv in sorted(set(r)):
            ax.scatter(x[r == rv], y[r == rv], color=colours[rv], marker=view.marker, s=14, zorder=3)
        xs.append(x)
        ys.append(y)
    x, y = np.concatenate(xs), np.concatenate(ys)
    p = drawn[0][0].fit.params
    line = np.geomspace(x.min(), x.max(), 100)
    ax.plot(line, p["E"] + p["A"] * line ** -p["alpha"], color="black", lw=1.2)
    log_axis(ax, "x")
    ax.set_xlabel(labels.N_EFF)
    ax.set_ylabel(labels.COLLAPSED)
    curve = p["E"] + p["A"] * x ** -p["alpha"]
    return float(np.sqrt(np.mean(((y - curve) / curve) ** 2)))


# ----------------------------------------------------------------------------------------------
# Profile and bootstrap of phi
# ----------------------------------------------------------------------------------------------
def has_phi_evidence(fit: FitResult) -> bool:
    """Whether the fit record has a phi profile or bootstrap replicates of phi (anything to draw)."""
    reps = (fit.bootstrap or {}).get("params", {}).get("phi", [])
    return bool((fit.profile_phi or {}).get("phi")) or len(reps) > 0


def phi_profile(fit) -> Figure:
    """The objective minimised over the other parameters on a phi grid, minus its minimum, with the
    threshold that bounds the 95% interval; and the bootstrap replicates of phi. A panel is drawn for each
    the fit record has (a figure that says so when it has neither)."""
    fit = load_fit(fit)
    phi_hat = looped_phi(fit, "phi profile")
    prof = fit.profile_phi if (fit.profile_phi or {}).get("phi") else None
    reps = np.asarray((fit.bootstrap or {}).get("params", {}).get("phi", []), dtype=float)
    reps = reps[np.isfinite(reps)]
    fig, axes = panel_grid(max(1, (prof is not None) + (len(reps) > 0)), size=(5.0, 3.8))
    if prof is None and not len(reps):
        explain_empty(axes[0], "this fit JSON has no phi profile and no bootstrap replicates")
    if prof is not None:
        _draw_profile(axes.pop(0), prof, phi_hat)
    if len(reps):
        ax_b = axes[0]
        ax_b.hist(reps, bins=max(10, min(40, len(reps) // 5)), color="C0", alpha=0.8)
        ax_b.axvline(phi_hat, color="black", lw=1, label=labels.phi_text(phi_hat))
        for i, edge in enumerate(fit.ci95.get("phi") or []):
            ax_b.axvline(edge, color="C3", ls="--", lw=1, label="95% percentile CI" if i == 0 else None)
        ax_b.legend(fontsize=8)
        ax_b.set_title(f"bootstrap of $\\phi$ ({len(reps)} replicates)")
        ax_b.set_xlabel(labels.PHI)
        ax_b.set_ylabel("replicates")
    fig.suptitle(r"how well is $\phi$ determined?")
    return fig


def _draw_profile(ax, prof: dict, phi_hat: float) -> None:
    grid = np.asarray(prof["phi"], dtype=float)
    obj = np.asarray([np.nan if v is None else v for v in prof["objective"]], dtype=float)
    ax.plot(grid, obj - np.nanmin(obj), marker=".", color="C0")
    thr = prof.get("threshold")
    if thr is not None:
        ax.axhline(thr, color="C3", ls="--", lw=1, label="95% threshold")
    lo, hi = (prof.get("interval") or [None, None])[:2]
    if lo is not None or hi is not None:
        ax.axvspan(
            grid.min() if lo is None else lo,
            grid.max() if hi is None else hi,
            color="C3",
            alpha=0.12,
            label="95% profile interval",
        )
    ax.axvline(phi_hat, color="black", lw=1, label=labels.phi_text(phi_hat))
    if thr:  # zoom on the interval: the crossings matter, not the far walls of the valley
        ax.set_ylim(0, min(8 * thr, np.nanmax(obj - np.nanmin(obj))) * 1.05 or 8 * thr)
    ax.legend(fontsize=8)
    ax.set_xlabel(labels.PHI)
    scaled_y_label(ax, labels.OBJECTIVE)
    ax.set_title(r"profile of the objective in $\phi$")


# ----------------------------------------------------------------------------------------------
# Residuals and the free multipliers
# ----------------------------------------------------------------------------------------------
def residuals(table: pd.DataFrame, fit, free=None) -> Figure:
    """log L - log L_hat by r (when the table has several r) and by budget; and, given a looped-free fit,
    k_r against r^phi (a third panel only then).

    Structure in the residuals (a trend with r or C) means the law misses something; k_r off the
    r^phi curve means the power-law form of the recurrence benefit is wrong.
    """
    fit = load_fit(fit)
    vs = views(table, fit)
    colours = r_colours(all_rows(vs)["r"])
    levels = sorted(colours)
    by_r = len(levels) > 1  # a table of one r (a chinchilla table) has nothing to show by r
    fig, axes = panel_grid(by_r + 1 + (free is not None), size=(4.4, 3.6))
    ax_r, ax_c = (axes[0], axes[1]) if by_r else (None, axes[0])
    rng = np.random.default_rng(0)  # fixed jitter: same picture every time
    all_res = []
    for k, v in enumerate(vs):
        res = log_residuals(v.rows, v.fit)
        all_res.append(res)
        r, C = v.rows["r"].to_numpy(dtype=float), budgets(v.rows)
        slot = (k - (len(vs) - 1) / 2) * 0.6 / len(vs)
        x = np.array([levels.index(rv) for rv in r]) + slot + rng.uniform(-0.08, 0.08, len(r)) / len(vs)
        for rv in sorted(set(r)):
            rows = r == rv
            if ax_r is not None:
                ax_r.scatter(x[rows], res[rows], color=colours[rv], marker=v.marker, s=14)
            ax_c.scatter(C[rows], res[rows], color=colours[rv], marker=v.marker, s=14)
    if ax_r is not None:
        ax_r.set_xticks(range(len(levels)), [f"{v:g}" for v in levels])
        ax_r.set_xlabel(labels.R)
        ax_r.set_title("residuals by $r$")
    log_axis(ax_c, "x")
    ax_c.set_xlabel(labels.BUDGET)
    ax_c.set_title("residuals by budget")
    for ax in (ax_r, ax_c) if ax_r is not None else (ax_c,):
        ax.axhline(0, color="black", lw=0.8)
        ax.set_ylabel(labels.RESIDUAL)
    if free is not None:
        axes[-1].set_title(r"free multipliers $k_r$ vs $r^{\phi}$")
        _draw_multipliers(axes[-1], free_multipliers(free), load_fit(free), fit.params.get("phi"))
    style_legend(fig, colours, view_styles(vs))
    rms = np.sqrt(np.mean(np.concatenate(all_res) ** 2))
    fig.suptitle(f"residuals of the {fit.law} fit (RMS {rms:.4f} in $\\log L$)")
    return fig


def _draw_multipliers(ax, k: dict[float, float], free: FitResult, phi: float | None) -> None:
    rs = np.array(sorted(k))
    ks = np.array([k[v] for v in rs])
    ci = [free.ci95.get(f"k_{v:g}") for v in rs]
    if all(c is not None for c in ci[1:]):
        lo = np.array([ks[0]] + [c[0] for c in ci[1:]])
        hi = np.array([ks[0]] + [c[1] for c in ci[1:]])
        ax.errorbar(rs, ks, yerr=[ks - lo, hi - ks], fmt="o", color="C0", label="$k_r$ (95% CI)")
    else:
        ax.plot(rs, ks, "o", color="C0", label=f"$k_r$ ({free.law} fit)")
    line = np.geomspace(1, rs.max(), 50)
    if phi is not None:
        law = labels.phi_text(phi, r"\phi")
        ax.plot(line, line**phi, color="black", lw=1.2, label=f"$r^{{\\phi}}$, {law}")
    ax.plot(line, line, color="grey", ls=":", lw=1, label="$r^1$")
    ax.plot(line, np.ones_like(line), color="grey", ls="--", lw=1, label="$r^0$")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel(labels.R)
    ax.set_ylabel(labels.K_R)
    ax.legend(fontsize=8)


def predicted_vs_observed(table: pd.DataFrame, fit) -> Figure:
    """L_hat against L for every run, one colour per r, with the identity line: the one-glance check
    `loopscale fit --plot` draws. A plain table (no r: a chinchilla fit) is one r = 1 series."""
    fit = load_fit(fit)
    vs = views(as_looped_table(table), fit)
    t = all_rows(vs)
    colours = r_colours(t["r"])
    fig = Figure(figsize=(5.6, 4.4), layout="constrained")
    ax = fig.subplots()
    for v in vs:
        L, L_hat, r = v.rows["L"].to_numpy(dtype=float), predicted_loss(v.rows, v.fit), v.rows["r"].to_numpy(float)
        for rv in sorted(set(r)):
            ax.scatter(L[r == rv], L_hat[r == rv], color=colours[rv], marker=v.marker, s=14)
    L, L_hat = t["L"].to_numpy(dtype=float), np.concatenate([predicted_loss(v.rows, v.fit) for v in vs])
    lims = [min(L.min(), L_hat.min()), max(L.max(), L_hat.max())]
    ax.plot(lims, lims, color="black", ls="--", lw=0.8)
    ax.set_xlabel(labels.OBS_LOSS)
    ax.set_ylabel(labels.PRED_LOSS)
    ax.set_title(f"{fit.law} fit: objective {fit.objective:.3g}, {len(L)} runs", fontsize=10)
    style_legend(fig, colours, view_styles(vs))
    return fig


# ----------------------------------------------------------------------------------------------
# Compute-optimal allocation
# ----------------------------------------------------------------------------------------------
def compute_optimal(table: pd.DataFrame, fit) -> Figure:
    """N* and D* vs C for each r (lines: the fitted law, one line style per recipe), with the lowest-loss
    run of each (r, budget) as points: an empirical check of the predicted allocation."""
    fit = load_fit(fit)
    if not law_class(fit.law).compute_optimal:
        able = ", ".join(n for n in law_names() if law_class(n).compute_optimal)
        raise InputError(f"the compute-optimal figure needs a fit of one of the laws {able}; this fit is {fit.law}")
    vs = views(table, fit)
    t = all_rows(vs)
    colours = r_colours(t["r"])
    b = budgets(t)
    C = np.geomspace(b.min() / 2, b.max() * 2, 60)
    fig, (ax_n, ax_d) = panel_grid(2, size=(4.8, 3.8))
    for v in vs:
        rows = v.rows.assign(_budget=budgets(v.rows))
        for r in sorted(set(rows["r"].to_numpy(dtype=float))):
            N_star, D_star = compute_optimal_curve(rows, v.fit, r, C)
            ax_n.plot(C, N_star, color=colours[r], lw=1.2, ls=v.linestyle)
            ax_d.plot(C, D_star, color=colours[r], lw=1.2, ls=v.linestyle)
            at_r = rows[rows["r"].to_numpy(dtype=float) == r]
            best = at_r.loc[at_r.groupby("_budget")["L"].idxmin()]
            ax_n.scatter(best["_budget"], best["N"], color=colours[r], marker=v.marker, s=16, zorder=3)
            ax_d.scatter(best["_budget"], best["D"], color=colours[r], marker=v.marker, s=16, zorder=3)
    for ax, what in ((ax_n, labels.N_STAR), (ax_d, labels.D_STAR)):
        log_axis(ax, "x")
        log_axis(ax, "y")
        ax.set_xlabel(labels.COMPUTE)
        ax.set_ylabel(what)
    ax_n.set_title("compute-optimal model size")
    ax_d.set_title("compute-optimal tokens")
    style_legend(fig, colours, view_styles(vs))
    fig.suptitle("compute-optimal allocation per $r$ (lines: fitted law; points: best run per budget)")
    return fig


def _phi_or_joint(fit) -> bool:
    return law_class(fit.law).per_recipe or "phi" in fit.params


def _single_phi(fit) -> bool:
    return not law_class(fit.law).per_recipe and "phi" in fit.params


FIGURES = (  # a joint fit's phi profile and delta-phi figures: plots/recipes.py
    FitFigure("collapse", 1, lambda t, fit, c, f: collapse(t, fit) if _phi_or_joint(fit) else None),
    FitFigure(
        "phi_profile",
        2,
        lambda t, fit, c, f: phi_profile(fit) if _single_phi(fit) and has_phi_evidence(fit) else None,
        tables=("runs", "curves"),
    ),
    FitFigure("residuals", 3, lambda t, fit, c, f: residuals(t, fit, f)),
    FitFigure(
        "compute_optimal",
        5,
        lambda t, fit, c, f: compute_optimal(t, fit) if law_class(fit.law).compute_optimal else None,
    ),
)
