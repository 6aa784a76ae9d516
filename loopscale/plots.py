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
    delta_phi        phi per recipe variant and its difference from the first, with 95% intervals
                     (for a joint fit, `joint_delta_phi`: the joint delta-phi next to the separate fits')
    compute_optimal  N* and D* vs C for each r, with the best run at each budget

Figures are built with `matplotlib.figure.Figure` (no pyplot state), so they work under any backend
and in notebooks alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from .atomic import atomic_path
from .derived import optimal_size
from .fit_result import FitResult, compare_param, load_fit, recipe_phi
from .laws import compute_from_tokens, cost_params, n_eff, predict_loss, tokens_from_compute
from .tables import budget_clusters, budget_column
from .tables import read_table as read_any_table

# Columns a looped-law figure reads; `read_table` checks for them.
REQUIRED_COLUMNS = ("N_once", "N_rec", "r", "D", "L")
LAW_INPUTS = ("N_once", "N_rec", "N", "r", "D", "C")
FIGURE_NAMES = ("iso_flop", "collapse", "phi_profile", "residuals", "delta_phi", "compute_optimal")


# ----------------------------------------------------------------------------------------------
# Inputs
# ----------------------------------------------------------------------------------------------
def read_table(path) -> pd.DataFrame:
    """A runs table from CSV or Parquet, with the looped-law columns present and numeric.

    A plain Chinchilla table (N, D or C, L, no r) is accepted too: it is a looped table with r = 1,
    N_once = N and N_rec = 0, for which every N_eff equals N.
    """
    table = read_any_table(path)  # CSV, Parquet or JSON lines; ValueError naming the file
    return as_looped_table(table, source=str(path))


def as_looped_table(table: pd.DataFrame, source: str = "runs table") -> pd.DataFrame:
    """The table with r, N_once, N_rec (filled in for a plain N table) and D (from C = 6 N D)."""
    t = table.copy()
    if "N_once" not in t and "N" in t:
        t["N_once"], t["N_rec"] = t["N"], 0.0
    if "r" not in t:
        t["r"] = 1
    if "D" not in t and "C" in t and "N_once" in t:
        t["D"] = tokens_from_compute(t["C"], cost_params(t["N_once"], t["N_rec"], t["r"]))
    missing = [c for c in REQUIRED_COLUMNS if c not in t]
    if missing:
        raise ValueError(f"{source} lacks column(s) {', '.join(missing)}")
    if len(t) == 0:
        raise ValueError(f"{source} has no rows")
    for col in REQUIRED_COLUMNS:
        t[col] = pd.to_numeric(t[col], errors="coerce")
    bad = ~np.isfinite(t[list(REQUIRED_COLUMNS)].to_numpy(dtype=float)).all(axis=1)
    if bad.any():
        raise ValueError(f"{source} has {int(bad.sum())} row(s) with missing or non-numeric law inputs")
    if "N" not in t:
        t["N"] = t["N_once"] + t["N_rec"]
    if "C" not in t:
        t["C"] = compute_from_tokens(t["D"], cost_params(t["N_once"], t["N_rec"], t["r"]))
    return t


def fit_label(fit: FitResult, default: str = "fit") -> str:
    """A short name for a fit: its group value (`loopscale fit --group variant` fits one variant per
    file), else `default`."""
    group = fit.group or {}
    return str(group["value"]) if group.get("value") is not None else default


def rows_for_fit(table: pd.DataFrame, fit: FitResult) -> pd.DataFrame:
    """The rows a fit was made on: with `--group COL` a fit covers the rows where COL equals its
    value, so a sweep's whole table can be drawn against one variant's fit."""
    group = fit.group or {}
    col = group.get("column")
    if col is None:
        return table
    if col not in table:
        raise ValueError(f"the fit is for {col} = {group.get('value')!r} but the table has no column {col!r}")
    mask = table[col].astype(str) == str(group.get("value"))
    if group.get("shared_r1"):  # a recipe of a joint fit: its runs and the shared r = 1 runs
        mask |= table["r"].to_numpy(dtype=float) == 1
    rows = table[mask]
    if len(rows) == 0:
        raise ValueError(f"the table has no rows with {col} = {group.get('value')!r} (the fit's group)")
    return rows.reset_index(drop=True)


def budgets(table: pd.DataFrame) -> np.ndarray:
    """Compute budget per row, rounded to 3 significant digits: the fitter's own rule (`budget_column`:
    the requested C_budget where a row has it, else the spent C), so figures group runs as the fit did."""
    return budget_clusters(budget_column(table))


def predicted_loss(table: pd.DataFrame, fit: FitResult) -> np.ndarray:
    """L_hat per row of the table at the fitted parameters (only the numeric law inputs are passed).
    A joint fit takes each row's phi from its recipe (`fit_result.recipe_phi`)."""
    cols = {c: table[c].to_numpy(dtype=float) for c in LAW_INPUTS if c in table}
    if fit.law == "looped-joint":
        phi = recipe_phi(table, fit.params, (fit.joint or {}).get("column", "variant"))
        p = fit.params
        n = cols["N_once"] + cols["r"] ** phi * cols["N_rec"]
        return p["E"] + p["A"] * n ** -p["alpha"] + p["B"] * cols["D"] ** -p["beta"]
    return predict_loss(fit.law, fit.params, cols)


def log_residuals(table: pd.DataFrame, fit: FitResult) -> np.ndarray:
    """log L - log L_hat: the quantity the fitter's Huber objective is summed over."""
    return np.log(table["L"].to_numpy(dtype=float)) - np.log(predicted_loss(table, fit))


def r_colours(r_values: Iterable[float]) -> dict[float, tuple]:
    """One colour per r, stable across figures (matplotlib's tab10 cycle in increasing r)."""
    from matplotlib import colormaps

    cmap = colormaps["tab10"]
    return {r: cmap(i % 10) for i, r in enumerate(sorted(set(float(v) for v in r_values)))}


def _phi(fit: FitResult, figure: str) -> float:
    if "phi" not in fit.params:
        raise ValueError(f"the {figure} figure needs a looped fit with phi; this fit is {fit.law!r}")
    return float(fit.params["phi"])


def _note(ax, text: str) -> None:
    """A panel that explains why it is empty instead of silently dropping it."""
    ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True, transform=ax.transAxes, fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([])


def _grid(n: int, ncols: int = 3, size=(4.2, 3.4)) -> tuple[Figure, list]:
    ncols = max(1, min(ncols, n))
    nrows = int(np.ceil(n / ncols))
    fig = Figure(figsize=(size[0] * ncols, size[1] * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel().tolist()
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes[:n]


# ----------------------------------------------------------------------------------------------
# 1. iso-FLOP curves
# ----------------------------------------------------------------------------------------------
def law_line(group: pd.DataFrame, fit: FitResult, n_points: int = 60) -> tuple[np.ndarray, np.ndarray]:
    """The fitted law along one iso-FLOP curve (runs with one budget and one r).

    Between the runs, N_once, N_rec and D are interpolated in log N from the runs themselves (the
    architecture family fixes how they move with width), so the line needs no accounting model.
    """
    g = group.sort_values("N").drop_duplicates("N")
    log_n = np.log(g["N"].to_numpy(dtype=float))
    grid = np.linspace(log_n.min(), log_n.max(), n_points)
    cols = {c: np.exp(np.interp(grid, log_n, np.log(g[c].to_numpy(dtype=float)))) for c in ("N_once", "D") if c in g}
    rec = g["N_rec"].to_numpy(dtype=float)
    cols["N_rec"] = np.exp(np.interp(grid, log_n, np.log(rec))) if (rec > 0).all() else np.interp(grid, log_n, rec)
    cols["N"], cols["r"] = np.exp(grid), np.full(n_points, float(g["r"].iloc[0]))
    return np.exp(grid), predict_loss(fit.law, fit.params, cols)


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
    fig, axes = _grid(len(levels))
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
def collapse_coordinates(table: pd.DataFrame, fit: FitResult, phi: float):
    """(N_eff at this phi, L - B D^-beta): with the data term removed, the law says every run lies
    on the single curve E + A N_eff^-alpha, whatever its r, if phi is right."""
    p = fit.params
    x = n_eff(table["N_once"], table["N_rec"], table["r"], phi)
    y = table["L"].to_numpy(dtype=float) - p["B"] * table["D"].to_numpy(dtype=float) ** -p["beta"]
    return np.asarray(x, dtype=float), y


def collapse_spread(table: pd.DataFrame, fit, phi: float) -> float:
    """RMS relative distance of the collapsed runs from E + A N_eff^-alpha at this phi.

    The number behind the collapse figure: smallest near the fitted phi when the law holds.
    """
    fit = load_fit(fit)
    table = rows_for_fit(table, fit)
    p = fit.params
    x, y = collapse_coordinates(table, fit, phi)
    curve = p["E"] + p["A"] * x ** -p["alpha"]
    return float(np.sqrt(np.mean(((y - curve) / curve) ** 2)))


def collapse(table: pd.DataFrame, fit) -> Figure:
    """L - B D^-beta vs N_eff in three panels: the fitted phi, phi = 0 and phi = 1.

    All r on one curve at the fitted phi (and visibly apart at 0 and 1) is the visual test of the law.
    """
    fit = load_fit(fit)
    table = rows_for_fit(table, fit)
    phi_hat = _phi(fit, "collapse")
    p = fit.params
    colours = r_colours(table["r"])
    panels = [
        (phi_hat, f"fitted phi = {phi_hat:.3f}"),
        (0.0, "phi = 0: a loop is worth one block"),
        (1.0, "phi = 1: a loop is worth r blocks"),
    ]
    fig, axes = _grid(3, size=(4.4, 3.8))
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
    phi_hat = _phi(fit, "phi profile")
    fig, (ax_p, ax_b) = _grid(2, size=(5.0, 3.8))
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
        _note(ax_p, "this fit JSON has no phi profile")
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
        _note(ax_b, "this fit JSON has no bootstrap replicates")
        ax_b.set_title("bootstrap of phi")
    ax_b.set_xlabel("phi")
    ax_b.set_ylabel("replicates")
    fig.suptitle("how well is phi determined?")
    return fig


# ----------------------------------------------------------------------------------------------
# 4. Residuals and the free multipliers
# ----------------------------------------------------------------------------------------------
def free_multipliers(free) -> dict[float, float]:
    """{r: k_r} from a looped-free fit, with k_1 = 1 (N_eff = N_once + k_r N_rec)."""
    free = load_fit(free)
    if free.law != "looped-free":
        raise ValueError(f"the free multipliers need a looped-free fit; this fit is {free.law!r}")
    k = {float(name[2:]): float(v) for name, v in free.params.items() if name.startswith("k_")}
    return {1.0: 1.0, **k}


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
    fig, (ax_r, ax_c, ax_k) = _grid(3, size=(4.4, 3.6))
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
        _note(ax_k, "no looped-free fit given (loopscale fit --law looped-free)")
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


def plot_fit(table: pd.DataFrame, fit, path, dpi: int = 110) -> Path:
    """Write `predicted_vs_observed` to path (what `loopscale fit --plot PATH` calls)."""
    path = Path(path)
    with atomic_path(path) as tmp:
        predicted_vs_observed(table, fit).savefig(tmp, dpi=dpi)
    return path


# ----------------------------------------------------------------------------------------------
# 5. delta-phi across variants
# ----------------------------------------------------------------------------------------------
def delta_phi(fits) -> Figure:
    """phi per recipe variant with its 95% CI, and phi - phi_first with a bootstrap CI.

    `fits`: a mapping label -> fit (FitResult, dict or path), or a sequence of fits (labelled by
    their variant). The first is the reference (the baseline recipe).
    """
    named = _named_fits(fits)
    if len(named) < 1:
        raise ValueError("delta_phi needs at least one fit")
    labels = list(named)
    phis = [_phi(f, "delta-phi") for f in named.values()]
    fig, (ax_v, ax_d) = _grid(2, size=(4.8, 3.6))
    xs = np.arange(len(labels))
    for x, label, phi in zip(xs, labels, phis):
        ci = named[label].ci95.get("phi")
        yerr = None if ci is None else [[phi - ci[0]], [ci[1] - phi]]
        ax_v.errorbar([x], [phi], yerr=yerr, fmt="o", capsize=4, color=f"C{x % 10}")
    ax_v.set_xticks(xs, labels)
    ax_v.set_xlabel("variant")
    ax_v.set_ylabel("phi")
    ax_v.set_title("phi by variant (95% CI)")
    base_label, base = labels[0], named[labels[0]]
    others = labels[1:]
    if others:
        for x, label in enumerate(others):
            cmp = compare_param(base, named[label], "phi")
            ci = cmp.get("ci")
            yerr = None if ci is None else [[cmp["delta"] - ci[0]], [ci[1] - cmp["delta"]]]
            ax_d.errorbar([x], [cmp["delta"]], yerr=yerr, fmt="o", capsize=4, color=f"C{(x + 1) % 10}")
        ax_d.axhline(0, color="black", lw=0.8)
        ax_d.set_xticks(range(len(others)), others)
    else:
        _note(ax_d, "one fit only: pass the other variants' fits to compare")
    ax_d.set_xlabel("variant")
    ax_d.set_ylabel(f"phi - phi({base_label})")
    ax_d.set_title(f"delta-phi vs {base_label} (95% CI)")
    fig.suptitle("recurrence-equivalence exponent across recipe variants")
    return fig


def _named_fits(fits) -> dict[str, FitResult]:
    if isinstance(fits, Mapping) and not ("law" in fits and "params" in fits):
        return {str(k): load_fit(v) for k, v in fits.items()}
    out: dict[str, FitResult] = {}
    for i, f in enumerate([fits] if isinstance(fits, (FitResult, Mapping)) else fits):
        fr = load_fit(f)
        label = fit_label(fr, Path(f).stem if isinstance(f, (str, Path)) else f"fit {i + 1}")
        out[label if label not in out else f"{label} ({i + 1})"] = fr
    return out


def recipe_fit(fit, recipe: str) -> FitResult:
    """One recipe's view of a joint fit, as a looped-law FitResult: the shared E, A, alpha, B, beta
    with phi = phi[recipe] (its interval and bootstrap replicates too), covering the recipe's runs
    and the shared r = 1 runs. Every single-law figure then draws it as is."""
    fit = load_fit(fit)
    j = fit.joint or {}
    if fit.law != "looped-joint" or recipe not in j.get("recipes", []):
        raise ValueError(
            f"recipe_fit needs a looped-joint fit with recipe {recipe!r}; got a {fit.law!r} fit "
            f"with recipes {j.get('recipes')}"
        )
    rename = {f"phi[{recipe}]": "phi"}
    dense = ("E", "A", "alpha", "B", "beta")
    params = {k: fit.params[k] for k in dense} | {"phi": fit.params[f"phi[{recipe}]"]}
    ci95 = {rename.get(k, k): v for k, v in (fit.ci95 or {}).items() if k in dense or k in rename}
    boot = None
    if fit.bootstrap:
        cols = fit.bootstrap.get("params", {})
        boot = dict(fit.bootstrap, params={rename.get(k, k): v for k, v in cols.items() if k in dense or k in rename})
    return FitResult(
        law="looped",
        params=params,
        objective=fit.objective,
        grad_norm=fit.grad_norm,
        n_starts=fit.n_starts,
        n_refined=fit.n_refined,
        n_best_basin=fit.n_best_basin,
        settings=fit.settings,
        seed=fit.seed,
        n_rows=fit.n_rows,
        ci95=ci95,
        bootstrap=boot,
        warnings=list(fit.warnings),
        residual_rms_log=fit.residual_rms_log,
        group={"column": j.get("column"), "value": recipe, "shared_r1": True},
    )


def joint_delta_phi(fit) -> Figure:
    """A joint fit's recipes: phi per recipe (95% bootstrap CI), and delta-phi vs the reference from
    the joint fit (bootstrap CI and profile interval) next to the separate fits' comparison."""
    fit = load_fit(fit)
    j = fit.joint or {}
    if fit.law != "looped-joint":
        raise ValueError(f"joint_delta_phi needs a looped-joint fit; this fit is {fit.law!r}")
    recipes, ref = j["recipes"], j["reference"]
    fig, (ax_v, ax_d) = _grid(2, size=(4.8, 3.6))
    for x, g in enumerate(recipes):
        phi = fit.params[f"phi[{g}]"]
        ci = (fit.ci95 or {}).get(f"phi[{g}]")
        yerr = None if ci is None else [[phi - ci[0]], [ci[1] - phi]]
        ax_v.errorbar([x], [phi], yerr=yerr, fmt="o", capsize=4, color=f"C{x % 10}")
    ax_v.set_xticks(range(len(recipes)), recipes)
    ax_v.set_ylabel("phi (joint fit)")
    ax_v.set_title("phi by recipe, shared dense law (95% CI)")
    others = [g for g in recipes if g != ref]
    styles = (
        ("bootstrap_ci", "joint: bootstrap", "C0", -0.15),
        ("profile_interval", "joint: profile", "C2", 0.0),
        ("separate", "separate fits", "C3", 0.15),
    )
    for x, g in enumerate(others):
        d = j["delta_phi"][g]
        for key, label, colour, dx in styles:
            est = d["separate"]["delta"] if key == "separate" and d.get("separate") else d["estimate"]
            ci = (d.get("separate") or {}).get("ci") if key == "separate" else d.get(key)
            if key == "separate" and not d.get("separate"):
                continue
            lo, hi = (ci or [None, None])[:2]
            yerr = None if lo is None or hi is None else [[est - lo], [hi - est]]
            ax_d.errorbar([x + dx], [est], yerr=yerr, fmt="o", capsize=4, color=colour, label=label if x == 0 else None)
    ax_d.axhline(0, color="black", lw=0.8)
    ax_d.set_xticks(range(len(others)), others)
    ax_d.set_ylabel(f"phi - phi({ref})")
    ax_d.set_title(f"delta-phi vs {ref} (95% intervals)")
    ax_d.legend(fontsize=8)
    chk = j.get("shared_check")
    sub = "" if not chk else f"; shared dense parameters: LR p = {chk['p_value']:.3g}"
    fig.suptitle(f"joint fit across recipes{sub}")
    return fig


# ----------------------------------------------------------------------------------------------
# 6. Compute-optimal allocation
# ----------------------------------------------------------------------------------------------
def compute_optimal_curve(table: pd.DataFrame, fit: FitResult, r: float, C: np.ndarray):
    """(N*, D*) at budgets C for models with r recurrences, from the fitted law.

    At fixed r the architecture family fixes N_eff = c N and the training cost per token F = f N
    (c, f: medians over that r's runs). With D = C / F the law is
    L(N) = E + A (c N)^-alpha + B (C / (f N))^-beta; setting dL/dN = 0 gives the closed form
        N* = (alpha A c^-alpha / (beta B))^(1/(alpha+beta)) * (C / f)^(beta/(alpha+beta)),
        D* = C / (f N*).
    """
    p = fit.params
    g = table[table["r"].to_numpy(dtype=float) == r]
    N = g["N"].to_numpy(dtype=float)
    F = g["C"].to_numpy(dtype=float) / g["D"].to_numpy(dtype=float)
    c = float(np.median(n_eff(g["N_once"], g["N_rec"], g["r"], p.get("phi", 1.0)) / N))
    f = float(np.median(F / N))
    C = np.asarray(C, dtype=float)
    N_star = optimal_size(p, C, c, f)
    return N_star, C / (f * N_star)


def compute_optimal(table: pd.DataFrame, fit) -> Figure:
    """N* and D* vs C for each r (lines: the fitted law), with the lowest-loss run of each
    (r, budget) as points: an empirical check of the predicted allocation."""
    fit = load_fit(fit)
    table = rows_for_fit(table, fit)
    t = table.assign(_budget=budgets(table))
    colours = r_colours(t["r"])
    C = np.geomspace(t["_budget"].min() / 2, t["_budget"].max() * 2, 60)
    fig, (ax_n, ax_d) = _grid(2, size=(4.8, 3.8))
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


# ----------------------------------------------------------------------------------------------
# All figures
# ----------------------------------------------------------------------------------------------
def figures(table: pd.DataFrame, fit, compare=(), free=None) -> dict[str, Figure]:
    """Every figure that applies: phi figures need a looped fit, delta-phi needs `compare` fits.
    A joint fit draws the single-law figures for its reference recipe (`recipe_fit`) and its own
    delta-phi figure (`joint_delta_phi`)."""
    fit = load_fit(fit)
    if fit.law == "looped-joint":
        out = figures(table, recipe_fit(fit, fit.joint["reference"]), (), free)
        out["delta_phi"] = joint_delta_phi(fit)
        return {name: out[name] for name in FIGURE_NAMES if name in out}
    out = {"iso_flop": iso_flop(table, fit), "residuals": residuals(table, fit, free)}
    if "phi" in fit.params:
        out["collapse"] = collapse(table, fit)
        out["phi_profile"] = phi_profile(fit)
        out["compute_optimal"] = compute_optimal(table, fit)
        if compare:
            out["delta_phi"] = delta_phi([fit, *compare])
    return {name: out[name] for name in FIGURE_NAMES if name in out}


def save_all(table: pd.DataFrame, fit, out_dir, compare=(), free=None, dpi: int = 110) -> list[Path]:
    """Write every figure that applies as out_dir/<name>.png; return the paths in FIGURE_NAMES order."""
    drawn = figures(table, fit, compare, free)  # draw everything before writing anything
    return save_figures(drawn, out_dir, dpi)


def save_figures(drawn: Mapping[str, Figure], out_dir, dpi: int = 110) -> list[Path]:
    """Write each figure as out_dir/<name>.png; return the paths in the mapping's order."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, fig in drawn.items():
        path = out_dir / f"{name}.png"
        with atomic_path(path) as tmp:  # never a cut PNG (loopscale/atomic.py)
            fig.savefig(tmp, dpi=dpi)
        paths.append(path)
    return paths
