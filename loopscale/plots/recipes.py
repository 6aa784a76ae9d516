"""Figures that compare recipes: phi and delta-phi across separate fits (`delta_phi`), and a
joint fit's recipes (`joint_delta_phi`, with `recipe_fit`: one recipe's view of a joint fit as a
looped-law fit, which every single-fit figure then draws as is)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from loopscale.errors import InputError
from loopscale.fit.result import FitResult, compare_param, load_fit

from .inputs import fit_label, looped_phi
from .layout import explain_empty, panel_grid


def delta_phi(fits) -> Figure:
    """phi per recipe with its 95% CI, and phi - phi_first with a bootstrap CI.

    `fits`: a mapping label -> fit (FitResult, dict or path), or a sequence of fits (labelled by
    their recipe). The first is the reference (the baseline recipe).
    """
    named = _named_fits(fits)
    if len(named) < 1:
        raise InputError("delta_phi needs at least one fit")
    labels = list(named)
    phis = [looped_phi(f, "delta-phi") for f in named.values()]
    fig, (ax_v, ax_d) = panel_grid(2, size=(4.8, 3.6))
    xs = np.arange(len(labels))
    for x, label, phi in zip(xs, labels, phis):
        ci = named[label].ci95.get("phi")
        yerr = None if ci is None else [[phi - ci[0]], [ci[1] - phi]]
        ax_v.errorbar([x], [phi], yerr=yerr, fmt="o", capsize=4, color=f"C{x % 10}")
    ax_v.set_xticks(xs, labels)
    ax_v.set_xlabel("recipe")
    ax_v.set_ylabel("phi")
    ax_v.set_title("phi by recipe (95% CI)")
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
        explain_empty(ax_d, "one fit only: pass the other recipes' fits to compare")
    ax_d.set_xlabel("recipe")
    ax_d.set_ylabel(f"phi - phi({base_label})")
    ax_d.set_title(f"delta-phi vs {base_label} (95% CI)")
    fig.suptitle("recurrence-equivalence exponent across recipes")
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
        raise InputError(
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
        raise InputError(f"joint_delta_phi needs a looped-joint fit; this fit is {fit.law!r}")
    recipes, ref = j["recipes"], j["reference"]
    fig, (ax_v, ax_d) = panel_grid(2, size=(4.8, 3.6))
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
