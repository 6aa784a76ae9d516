"""Figures that compare recipes: phi and delta-phi across separate fits (`delta_phi`, each fit named by its
recipe: `named_fits`), and a joint fit's recipes (`joint_delta_phi`; `delta_phi_profile`: the objective
profiled in delta-phi and the bootstrap replicates of delta-phi, the joint fit's `phi_profile` figure)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

import loopscale.plots.labels as labels  # the module, not the package: no import cycle
from loopscale.errors import InputError, LoopscaleError
from loopscale.fit.laws.registry import law_class
from loopscale.fit.result import FitResult, compare_param, load_fit
from loopscale.fit.runs_table import read_table as read_any_table

from .figure import FitFigure
from .inputs import fit_label, looped_phi
from .layout import explain_empty, panel_grid, scaled_y_label


def fit_name(fit: FitResult, default: str) -> str:
    """What to call a fit in a legend: its group value (`fit --group recipe`), else the one recipe of the
    looped runs in the table it was fitted on (its recorded input, when that file is still there), else
    `default` (e.g. the fit file's name)."""
    label = fit_label(fit, "")
    if label:
        return label
    path = Path(str((fit.input or {}).get("path") or ""))
    if path.name and path.is_file():
        try:
            t = read_any_table(path)
        except (LoopscaleError, OSError, ValueError):
            return default
        if "recipe" in t and "r" in t:
            names = set(t.loc[t["r"].astype(float) > 1, "recipe"].dropna().astype(str))
            if len(names) == 1:
                return names.pop()
    return default


def named_fits(fits) -> dict[str, FitResult]:
    """{name: fit} from a mapping (kept as it is) or a sequence of fits or paths, each named by `fit_name`
    (default: the file's stem, or "fit i"); a repeated name gets its position appended."""
    if isinstance(fits, Mapping) and not ("law" in fits and "params" in fits):
        return {str(k): load_fit(v) for k, v in fits.items()}
    out: dict[str, FitResult] = {}
    for i, f in enumerate([fits] if isinstance(fits, (FitResult, Mapping)) else fits):
        fr = load_fit(f)
        label = fit_name(fr, Path(f).stem if isinstance(f, (str, Path)) else f"fit {i + 1}")
        out[label if label not in out else f"{label} ({i + 1})"] = fr
    return out


def delta_phi(fits) -> Figure:
    """phi per recipe with its 95% CI, and phi - phi_first with a bootstrap CI.

    `fits`: a mapping label -> fit (FitResult, dict or path), or a sequence of fits (named by their
    recipe: `named_fits`). The first is the reference (the baseline recipe).
    """
    named = named_fits(fits)
    if len(named) < 1:
        raise InputError("delta_phi needs at least one fit")
    names = list(named)
    phis = [looped_phi(f, "delta-phi") for f in named.values()]
    fig, axes = panel_grid(2 if len(names) > 1 else 1, size=(4.8, 3.6))
    ax_v = axes[0]
    for x, (name, phi) in enumerate(zip(names, phis)):
        ci = named[name].ci95.get("phi")
        yerr = None if ci is None else [[phi - ci[0]], [ci[1] - phi]]
        ax_v.errorbar([x], [phi], yerr=yerr, fmt="o", capsize=4, color=f"C{x % 10}")
    ax_v.set_xticks(range(len(names)), names)
    ax_v.set_xlim(-0.5, len(names) - 0.5)  # the end points away from the frame
    ax_v.set_xlabel("recipe")
    ax_v.set_ylabel(labels.PHI)
    ax_v.set_title(r"$\phi$ by recipe (95% CI)")
    base_name, base = names[0], named[names[0]]
    if len(names) > 1:
        ax_d = axes[1]
        for x, name in enumerate(names[1:]):
            cmp = compare_param(base, named[name], "phi")
            ci = cmp.ci
            yerr = None if ci is None else [[cmp.delta - ci[0]], [ci[1] - cmp.delta]]
            ax_d.errorbar([x], [cmp.delta], yerr=yerr, fmt="o", capsize=4, color=f"C{(x + 1) % 10}")
        ax_d.axhline(0, color="black", lw=0.8)
        ax_d.set_xticks(range(len(names) - 1), names[1:])
        ax_d.set_xlim(-0.5, len(names) - 1.5)
        ax_d.set_xlabel("recipe")
        ax_d.set_ylabel(f"$\\phi - \\phi$({base_name})")
        ax_d.set_title(f"$\\Delta\\phi$ vs {base_name} (95% CI)")
    fig.suptitle("recurrence-equivalence exponent across recipes (separate fits)")
    return fig


def joint_delta_phi(fit) -> Figure:
    """A joint fit's recipes: phi per recipe (95% bootstrap CI), and delta-phi vs the reference from
    the joint fit (bootstrap CI and profile interval) next to the separate fits' comparison."""
    fit = load_fit(fit)
    j = fit.joint or {}
    if not law_class(fit.law).per_recipe:
        raise InputError(f"joint_delta_phi needs a joint fit (one phi per recipe); this fit is {fit.law!r}")
    recipes, ref, law = j["recipes"], j["reference"], law_class(fit.law)
    fig, (ax_v, ax_d) = panel_grid(2, size=(4.8, 3.6))
    for x, g in enumerate(recipes):
        phi = fit.params[law.recipe_param(g)]
        ci = (fit.ci95 or {}).get(law.recipe_param(g))
        yerr = None if ci is None else [[phi - ci[0]], [ci[1] - phi]]
        ax_v.errorbar([x], [phi], yerr=yerr, fmt="o", capsize=4, color=f"C{x % 10}")
    ax_v.set_xticks(range(len(recipes)), recipes)
    ax_v.set_xlim(-0.5, len(recipes) - 0.5)
    ax_v.set_ylabel(r"$\phi$ (joint fit)")
    ax_v.set_title("$\\phi$ by recipe, shared dense law (95% CI)")
    others = [g for g in recipes if g != ref]
    styles = (
        ("bootstrap_ci", "joint: bootstrap", "C0", -0.15),
        ("profile_interval", "joint: profile", "C2", 0.0),
        ("separate", "separate fits", "C3", 0.15),
    )
    for x, g in enumerate(others):
        d = j["delta_phi"][g]
        for key, label, colour, dx in styles:
            if key == "separate" and not d.get("separate"):
                continue
            est = d["separate"]["delta"] if key == "separate" else d["estimate"]
            ci = d["separate"].get("ci") if key == "separate" else d.get(key)
            lo, hi = (ci or [None, None])[:2]
            yerr = None if lo is None or hi is None else [[est - lo], [hi - est]]
            ax_d.errorbar([x + dx], [est], yerr=yerr, fmt="o", capsize=4, color=colour, label=label if x == 0 else None)
    ax_d.axhline(0, color="black", lw=0.8)
    ax_d.set_xticks(range(len(others)), others)
    ax_d.set_xlim(-0.5, len(others) - 0.5)
    ax_d.set_ylabel(f"$\\phi - \\phi$({ref})")
    ax_d.set_title(f"$\\Delta\\phi$ vs {ref} (95% intervals)")
    ax_d.legend(fontsize=8)
    chk = j.get("shared_check")
    sub = "" if not chk else f"; shared dense parameters: LR p = {chk['p_value']:.3g}"
    fig.suptitle(f"joint fit across recipes{sub}")
    return fig


def has_delta_phi_evidence(fit: FitResult) -> bool:
    """Whether a joint fit records a delta-phi profile or bootstrap replicates (anything to draw)."""
    d = (fit.joint or {}).get("delta_phi", {})
    boot, law = (fit.bootstrap or {}).get("params", {}), law_class(fit.law)
    return any((v.get("profile") or {}).get("x") for v in d.values()) or any(
        law.recipe_param(g, True) in boot for g in d
    )


def delta_phi_profile(fit) -> Figure:
    """A joint fit's delta-phi per recipe: the objective profiled in delta-phi (minus its minimum) with the
    threshold of the 95% interval, and the bootstrap replicates of delta-phi; a panel for each the record has."""
    fit = load_fit(fit)
    j = fit.joint or {}
    if not law_class(fit.law).per_recipe:
        raise InputError(f"delta_phi_profile needs a joint fit (one phi per recipe); this fit is {fit.law!r}")
    d = j.get("delta_phi", {})
    profiles = {g: v["profile"] for g, v in d.items() if (v.get("profile") or {}).get("x")}
    boot = (fit.bootstrap or {}).get("params", {})
    names = {g: law_class(fit.law).recipe_param(g, delta=True) for g in d}
    reps = {g: np.asarray(boot[names[g]], dtype=float) for g in d if names[g] in boot}
    reps = {g: v[np.isfinite(v)] for g, v in reps.items() if np.isfinite(v).any()}
    fig, axes = panel_grid(max(1, bool(profiles) + bool(reps)), size=(5.0, 3.8))
    if not profiles and not reps:
        explain_empty(axes[0], "this joint fit has no delta-phi profile and no bootstrap replicates")
    colour = {g: f"C{i % 10}" for i, g in enumerate(d)}
    if profiles:
        _profile_panel(axes.pop(0), profiles, d, colour)
    if reps:
        ax = axes[0]
        for g, v in reps.items():
            ax.hist(v, bins=max(10, min(40, len(v) // 5)), color=colour[g], alpha=0.5, label=f"{g} ({len(v)})")
            for edge in d[g].get("bootstrap_ci") or []:
                ax.axvline(edge, color=colour[g], ls="--", lw=1)
        ax.axvline(0, color="black", lw=0.8)
        ax.legend(fontsize=8)
        ax.set_xlabel(f"{labels.DELTA_PHI} vs {j['reference']}")
        ax.set_ylabel("replicates")
        ax.set_title(r"bootstrap of $\Delta\phi$ (dashed: 95% CI)")
    fig.suptitle(r"how well is $\Delta\phi$ determined? (joint fit)")
    return fig


def _profile_panel(ax, profiles: dict, d: dict, colour: dict) -> None:
    top = 0.0
    for g, prof in profiles.items():
        x = np.asarray(prof["x"], dtype=float)
        obj = np.asarray([np.nan if v is None else v for v in prof["objective"]], dtype=float)
        ax.plot(x, obj - np.nanmin(obj), marker=".", color=colour[g], label=g)
        ax.axvline(d[g]["estimate"], color=colour[g], lw=1)
        lo, hi = (d[g].get("profile_interval") or [None, None])[:2]
        if lo is not None or hi is not None:
            ax.axvspan(x.min() if lo is None else lo, x.max() if hi is None else hi, color=colour[g], alpha=0.1)
        top = max(top, float(prof.get("threshold") or 0.0))
    if top:
        ax.axhline(top, color="C3", ls="--", lw=1, label="95% threshold")
        ax.set_ylim(0, 8 * top)
    ax.axvline(0, color="black", lw=0.8)
    ax.legend(fontsize=8)
    ax.set_xlabel(labels.DELTA_PHI)
    scaled_y_label(ax, labels.OBJECTIVE)
    ax.set_title(r"profile of the objective in $\Delta\phi$ (shaded: 95%)")


def _delta_phi_figure(fit, compare):
    """A joint fit's own delta-phi figure; a single fit's with `compare` fits (a sequence, or a mapping name ->
    fit) beside it; None otherwise."""
    if law_class(fit.law).per_recipe:
        return joint_delta_phi(fit)
    if not compare or "phi" not in fit.params:
        return None
    named = isinstance(compare, Mapping)
    return delta_phi({fit_name(fit, "fit"): fit, **compare} if named else [fit, *compare])


FIGURES = (
    FitFigure(
        "phi_profile",
        2,
        lambda t, fit, c, f: (
            delta_phi_profile(fit) if law_class(fit.law).per_recipe and has_delta_phi_evidence(fit) else None
        ),
    ),
    FitFigure("delta_phi", 4, lambda t, fit, c, f: _delta_phi_figure(fit, c)),
)
