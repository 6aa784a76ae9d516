"""Approach 2 of Hoffmann et al. 2022, as practitioners run it: per compute budget, the compute-optimal size N*(C)
from a parabola through the points NEAR the curve's minimum, with a bootstrap interval per budget; then the exponent
a of N* ~ C^a by a weighted line through (ln C, ln N*) with an interval that carries each budget's uncertainty. The
law fitted by Approach 3 implies a = beta / (alpha + beta) (C = 6 N D at r = 1); two methods that disagree by more
than their errors say the law's exponents are not what the iso-FLOP minima show.

The window (issue 53). A parabola in ln N is the second-order expansion of an iso-FLOP curve about its minimum;
L(ln N) = E + A N^-alpha + B (C / 6N)^beta is asymmetric (its third derivative is not 0), so a parabola through
points far from the minimum moves its vertex towards the flatter side, and a sweep spanning two decades of N puts
most of its points there (measured on released curves: the exponent off by up to 0.08 with one parabola over every
point). So per budget: the sizes' mean log L (over seeds), the lowest one and its WINDOW_NEIGHBOURS nearest sizes on
each side (fewer at an edge; 3 to 5 points), a parabola of log L in x = ln N through them, N* at its vertex. A
budget whose lowest size is on an edge of its sizes has no bracketed minimum and is left out (reason given), as is
a window whose parabola does not open upwards or whose vertex falls outside the window.

The uncertainty. Per budget, a parametric bootstrap (N_BOOTSTRAP draws): each size's mean log L moved by
sigma / sqrt(n_seeds) Gaussian noise, the window chosen again (the lowest point may move) and the vertex refitted;
the 95% interval is the draws' 2.5-97.5 percentiles, their standard deviation in ln N the budget's se. sigma of log
L: the seed sigma pooled from the table's seed repeats, or else the scatter of the windows' points about their
parabolas (pooled over budgets, each window's n - 3 degrees of freedom), whichever is larger.

The exponent: a weighted least-squares line of ln N* on ln C. Released iso-FLOP minima scatter about a power law by
more than their noise says (measured curves are not the law's: a size trained at an lr that suits it less, a
budget's coarse grid), so the weights are 1 / (se^2 + tau^2), tau^2 the between-budget variance by DerSimonian and
Laird's moment rule (1986) for a weighted regression, 0 when chi^2 <= dof: a random-effects meta-regression. With
1 / se^2 alone the two or three most precise budgets set a and its interval ignores the scatter (on released data
the exponent was 2-4 se from the published analyses'). Its interval: the 2.5-97.5 percentiles of the same fit on
each bootstrap draw's N* per budget, each draw moved by N(0, tau^2) per budget (a draw carries every budget's
uncertainty at once), widened about the estimate by sqrt(chi2 / dof) of the line when the budgets still scatter
more than their se say (the Particle Data Group's scale factor); a_se is the fit's standard error with that factor.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.interpolate import Akima1DInterpolator

from loopscale.errors import InputError
from loopscale.fit.isoflop import MIN_SIZES, WINDOW_RULE, budget_curve, window_of, window_vertex
from loopscale.fit.replicates import replicate_groups
from loopscale.fit.runs_table import ColumnMap, canonical_table
from loopscale.fit.runs_table import budgets as budget_labels  # the rule the fit and the figures group by
from loopscale.fit.seed_sigma import within_point
from loopscale.fit.validation.record import Approach2, Approach2Budget

N_BOOTSTRAP = 400


def approach2_table(raw: pd.DataFrame, columns: ColumnMap, budget_col: str = "C_budget", source="the table"):
    """Any iso-FLOP table (`loopscale isoflop`) as `iso_flop_exponent` reads it: N, C and L mapped as `fit` maps them
    (C = 6 N D where only D is given), its r (the r = 1 rows are used) and each run's budget from `budget_col`
    when the table has it (a name other than the default that it lacks is refused)."""
    table = canonical_table(raw, "chinchilla", columns)
    if "C" not in table.columns:
        table["C"] = 6 * table["N"] * table["D"]
    if "r" in raw.columns:
        table["r"] = raw["r"].to_numpy()
    if budget_col in raw.columns:
        table["C_budget"] = raw[budget_col].to_numpy()
    elif budget_col != "C_budget":
        raise InputError(f"--budget-col {budget_col!r} is not a column of {source}: {list(raw.columns)}")
    return table


def _sigma_log(table: pd.DataFrame, log_L: np.ndarray, curves: list) -> tuple[float | None, str]:
    """sigma of one run's log L for the bootstrap: max(seed sigma from the table's repeats, the windows' scatter
    about their parabolas), with where it came from; None when neither is measurable."""
    seed = None
    reps = replicate_groups(table.assign(L=np.exp(log_L)))
    if reps.has_repeats:
        ss, df = within_point(log_L, reps)
        seed = float(np.sqrt(ss.sum() / df.sum())) if df.sum() > 0 and ss.sum() > 0 else None
    rss, dof = 0.0, 0
    for x, y, n, win in curves:
        if win is None or win.stop - win.start <= 3:
            continue
        xs, ys, ns = x[win], y[win], n[win]
        coef = np.polyfit(xs, ys, 2, w=np.sqrt(ns))
        rss += float(np.sum(ns * (ys - np.polyval(coef, xs)) ** 2))
        dof += len(xs) - 3
    scatter = float(np.sqrt(rss / dof)) if dof > 0 else None
    found = [(s, name) for s, name in ((seed, "seed repeats"), (scatter, f"window scatter ({dof} dof)")) if s]
    if not found:
        return None, "none (no seed repeats, every window of 3 points): no interval"
    return max(found)


def _or_nan(v: float | None) -> float:
    return np.nan if v is None else v


def _weighted_line(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[float, float, float, int]:
    """(slope, intercept, chi2, dof) of the weighted least-squares line y = slope x + intercept."""
    W = np.sqrt(w)
    slope, intercept = np.linalg.lstsq(np.column_stack([x, np.ones_like(x)]) * W[:, None], y * W, rcond=None)[0]
    chi2 = float(np.sum(w * (y - slope * x - intercept) ** 2))
    return float(slope), float(intercept), chi2, len(x) - 2


def iso_flop_exponent(
    table, law_params: dict[str, float] | None = None, n_boot: int = N_BOOTSTRAP, seed: int = 0
) -> Approach2:
    """Approach 2's section from the r = 1 rows (every row of a dense table): the module docstring's method; "a" is
    None, with the reason, below two budgets with an N*; "a_interp" is the interpolation rule's exponent
    (`_interp_exponent`)."""
    r = table["r"].to_numpy(dtype=float) if "r" in table.columns else np.ones(len(table))
    dense = table[r == 1].reset_index(drop=True)
    out = Approach2(
        budgets=[],
        a=None,
        a_se=None,
        a_interval=None,
        a_law=None,
        reason=None,
        method=WINDOW_RULE,
        sigma_log=None,
        sigma_source=None,
    )
    if law_params and {"alpha", "beta"} <= law_params.keys():
        out["a_law"] = float(law_params["beta"] / (law_params["alpha"] + law_params["beta"]))
    if dense.empty:
        out["reason"] = "the table has no r = 1 runs"
        return out
    N = (dense["N_once"] + dense["N_rec"]) if "N_once" in dense.columns else dense["N"]
    log_n, log_L = np.log(N.to_numpy(dtype=float)), np.log(dense["L"].to_numpy(dtype=float))
    labels = budget_labels(dense)
    C_spent = dense["C"].to_numpy(dtype=float)
    budgets = np.unique(labels)
    curves = [(*budget_curve(log_n[labels == b], log_L[labels == b]),) for b in budgets]
    curves = [(x, y, n, window_of(y)[0]) for x, y, n in curves]
    sigma, source = _sigma_log(dense, log_L, curves)
    out.update(sigma_log=sigma, sigma_source=source)
    rng = np.random.default_rng(seed)
    draws = np.full((len(budgets), n_boot), np.nan)
    for i, (b, (x, y, n, _)) in enumerate(zip(budgets, curves)):
        v, win, why = window_vertex(x, y, n)
        row = Approach2Budget(
            C=float(np.exp(np.mean(np.log(C_spent[labels == b])))),
            n_sizes=len(x),
            window=None if win is None else [float(np.exp(x[win][0])), float(np.exp(x[win][-1]))],
            n_window=0 if win is None else int(win.stop - win.start),
            N_star=None if v is None else float(np.exp(v)),
            interval=None,
            log_se=None,
            reason=why,
        )
        if v is not None and sigma:
            noise = rng.standard_normal((n_boot, len(y))) * sigma / np.sqrt(n)
            draws[i] = [_or_nan(window_vertex(x, y + e, n)[0]) for e in noise]
            ok = draws[i][np.isfinite(draws[i])]
            if len(ok) >= n_boot / 2:
                row["interval"] = [float(np.exp(np.percentile(ok, 2.5))), float(np.exp(np.percentile(ok, 97.5)))]
                row["log_se"] = float(np.std(ok, ddof=1))
            else:
                row["reason"] = f"only {len(ok)} of {n_boot} bootstrap draws have a bracketed minimum"
        out["budgets"].append(row)
    _exponent(out, draws, rng)
    out["a_interp"] = _interp_exponent(out["budgets"], [interp_vertex(x, y) for x, y, _, _ in curves])
    return out


INTERP_STEPS = 25  # grid points per interval between sizes at which the interpolated curve is searched


def interp_vertex(x: np.ndarray, y: np.ndarray) -> float | None:
    """ln N* of one budget by the interpolation rule (Porian et al. 2024's released analysis): the argmin of an Akima
    spline of log L through every size's mean, searched on INTERP_STEPS points per interval; None when it falls on
    an edge of the sizes or there are fewer than MIN_SIZES. Approach 2's cross-check of the window rule (here, not
    in fit/isoflop.py: scipy.interpolate loads scipy.optimize, which the fit's readers must not)."""
    if len(x) < MIN_SIZES:  # isoflop's rule for the window too
        return None
    grid = np.linspace(x[0], x[-1], (len(x) - 1) * INTERP_STEPS)
    k = int(np.argmin(Akima1DInterpolator(x, y)(grid)))
    return None if k in (0, len(grid) - 1) else float(grid[k])


def _interp_exponent(rows: list[Approach2Budget], vertices: list[float | None]) -> float | None:
    """The exponent by the interpolation rule (`interp_vertex`): an unweighted line of its ln N* on ln C over
    the budgets where it has one (None below two). Beside the window rule's a it shows how much the rule moves it:
    on Porian et al.'s released configurations it reproduces their published exponents to within 0.007."""
    pairs = [(np.log(row["C"]), v) for row, v in zip(rows, vertices) if v is not None]
    if len(pairs) < 2:
        return None
    x, y = np.array(pairs).T
    return float(np.polyfit(x, y, 1)[0])


def _between_budget_variance(x: np.ndarray, y: np.ndarray, se: np.ndarray) -> float:
    """tau^2 of a random-effects weighted line (DerSimonian and Laird's moment rule): (chi2 - dof) / tr(P), P the
    weighted residual projector W - W X (X'W X)^-1 X'W, 0 when the budgets scatter no more than their se say."""
    w = 1 / se**2
    _, _, chi2, dof = _weighted_line(x, y, w)
    X = np.column_stack([x, np.ones_like(x)])
    WX = X * w[:, None]
    trace_p = float(np.sum(w) - np.trace(np.linalg.solve(X.T @ WX, WX.T @ WX)))
    return max(0.0, (chi2 - dof) / trace_p) if dof > 0 and trace_p > 0 else 0.0


def _exponent(out: Approach2, draws: np.ndarray, rng: np.random.Generator) -> None:
    """The exponent a of N* ~ C^a and its interval, into `out` (module docstring)."""
    rows = out["budgets"]
    use = [i for i, b in enumerate(rows) if b["N_star"] is not None]
    if len(use) < 2:
        out["reason"] = f"{len(use)} budget(s) with a bracketed minimum: a slope needs 2"
        return
    x = np.log([rows[i]["C"] for i in use])
    y = np.log([rows[i]["N_star"] for i in use])
    se = np.array([rows[i]["log_se"] or np.nan for i in use])
    if not np.all(np.isfinite(se) & (se > 0)):  # no per-budget uncertainty: an unweighted line
        slope, _ = np.polyfit(x, y, 1)
        out["a"] = float(slope)
        if len(use) >= 3:
            res = y - np.polyval(np.polyfit(x, y, 1), x)
            out["a_se"] = float(np.sqrt(res @ res / (len(x) - 2) / np.sum((x - x.mean()) ** 2)))
        return
    tau2 = _between_budget_variance(x, y, se)
    w = 1 / (se**2 + tau2)
    slope, _, chi2, dof = _weighted_line(x, y, w)
    scale = float(np.sqrt(max(1.0, chi2 / dof))) if dof > 0 else 1.0
    xc = x - np.average(x, weights=w)
    out["a"] = slope
    out["a_se"] = float(scale / np.sqrt(np.sum(w * xc**2)))
    out["a_chi2_dof"] = None if dof <= 0 else chi2 / dof
    out["tau_log"] = float(np.sqrt(tau2))
    slopes = []
    for k in range(draws.shape[1]):
        yk = draws[use, k] + np.sqrt(tau2) * rng.standard_normal(len(use))
        ok = np.isfinite(yk)
        if ok.sum() >= 2:
            slopes.append(_weighted_line(x[ok], yk[ok], w[ok])[0])
    if len(slopes) >= 20:
        lo, hi = np.percentile(slopes, [2.5, 97.5])
        out["a_interval"] = [float(slope - scale * (slope - lo)), float(slope + scale * (hi - slope))]
