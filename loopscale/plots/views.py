"""Which runs a figure draws with which fitted law: `views` splits the rows a fit covers into one view per
recipe, each with the fit that predicts it, so every figure marks recipes apart and a joint fit is drawn
recipe by recipe at each recipe's own phi. `recipe_fit` is one recipe's view of a joint fit as a
looped-law fit record."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from loopscale.errors import InputError
from loopscale.fit.laws.registry import law_class
from loopscale.fit.record_blocks import Group
from loopscale.fit.result import FitResult, load_fit

from .inputs import rows_for_fit
from .layout import recipe_styles

DENSE = "dense (r = 1)"  # the view of a joint fit's shared r = 1 runs


@dataclass
class View:
    """Rows of one recipe (label None: the table has no recipes to tell apart), drawn with `fit`
    (a looped or chinchilla law: a joint fit's recipe view), with its marker and line style."""

    label: str | None
    rows: pd.DataFrame
    fit: FitResult
    marker: str = "o"
    linestyle: str = "-"


def recipe_column(table: pd.DataFrame, fit: FitResult) -> str | None:
    """The column that names the recipes: the joint fit's, the fit's group column, else `recipe`."""
    col = (fit.joint or {}).get("column") or (fit.group or {}).get("column") or "recipe"
    return col if col in table else None


def views(table: pd.DataFrame, fit) -> list[View]:
    """The rows the fit covers, one view per recipe (module docstring). A joint fit: its shared r = 1 runs
    as one view (DENSE) and each recipe's looped runs at its own phi; any other fit: one view per value of
    the recipe column among its rows (one view with label None when there is one value or no column)."""
    fit = load_fit(fit)
    col = recipe_column(table, fit)
    if law_class(fit.law).per_recipe:
        j = fit.joint or {}
        looped = table["r"].to_numpy(dtype=float) > 1
        parts = [(DENSE, table[~looped], recipe_fit(fit, j["reference"]))]
        if col is None:
            raise InputError(f"the joint fit is over column {j.get('column')!r}, which the table lacks")
        label = table[col].astype(str).to_numpy()
        parts += [(g, table[looped & (label == g)], recipe_fit(fit, g)) for g in j["recipes"]]
    else:
        rows = rows_for_fit(table, fit)
        groups = list(dict.fromkeys(rows[col].astype(str))) if col else []
        if len(groups) <= 1:
            return [View(None, rows.reset_index(drop=True), fit)]
        parts = [(g, rows[(rows[col].astype(str) == g).to_numpy()], fit) for g in groups]
    parts = [(g, rows, f) for g, rows, f in parts if len(rows)]
    styles = recipe_styles([g for g, _, _ in parts])
    return [View(g, rows.reset_index(drop=True), f, *styles[g]) for g, rows, f in parts]


def view_styles(vs: list[View]) -> dict:
    """{label: (marker, line style)} of labelled views, for `layout.style_legend`."""
    return {v.label: (v.marker, v.linestyle) for v in vs if v.label is not None}


def all_rows(vs: list[View]) -> pd.DataFrame:
    return pd.concat([v.rows for v in vs], ignore_index=True)


def recipe_fit(fit, recipe: str) -> FitResult:
    """One recipe's view of a joint fit, as a FitResult of the joint law's `recipe_law` (the looped law): the
    shared E, A, alpha, B, beta with phi = phi[recipe] (its interval and bootstrap replicates too), covering
    the recipe's runs and the shared r = 1 runs. Every single-law figure then draws it as is."""
    fit = load_fit(fit)
    j = fit.joint or {}
    law = law_class(fit.law)
    if not law.per_recipe or recipe not in j.get("recipes", []):
        raise InputError(
            f"recipe_fit needs a looped-joint fit with recipe {recipe!r}; got a {fit.law!r} fit "
            f"with recipes {j.get('recipes')}"
        )
    phi = law_class(law.recipe_law).profile_param  # the recipe law's exponent: phi
    rename = {law.recipe_param(recipe): phi}
    # shared: the dense part and the law's own shared parameters (looped-entry's kappa, looped-logn's psi, N_ref)
    shared = set(fit.params) - {law.recipe_param(g) for g in j["recipes"]}
    params = {k: fit.params[k] for k in shared} | {phi: fit.params[law.recipe_param(recipe)]}
    ci95 = {rename.get(k, k): v for k, v in (fit.ci95 or {}).items() if k in shared or k in rename}
    boot = None
    if fit.bootstrap:
        cols = fit.bootstrap.get("params", {})
        boot = fit.bootstrap.replace(
            params={rename.get(k, k): v for k, v in cols.items() if k in shared or k in rename}
        )
    return FitResult(
        law=law.recipe_law,
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
        group=Group(j.get("column"), recipe, shared_r1=True),
    )
