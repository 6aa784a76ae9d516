"""A fit's law as parameter sets for the optimiser: E, A, alpha, B, beta and the multiplier m_r of
N_eff = N_once + m_r N_rec per r, at the point estimate and for every stored bootstrap replicate
(docs/design.md, "Advice").

This is the one module of `loopscale.analysis.advise` that asks which law a fit is (the law-name
comparisons are all here, in `_multiplier_key`, `law_of`, `check_law`, `advised_recipe`, `fit_shapes` and
`default_r_values`): what sets m_r (phi for the looped law, phi[<recipe>] for a joint fit, a free k_r for
looped-free, nothing for chinchilla), the box each parameter must lie in (the fitter's, `loopscale.fit.bounds`),
which r a law can advise, which recipe and which fitted models a fit is read for. Every other module reads
`LawSets` only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from loopscale.errors import InputError
from loopscale.fit.bounds import bounds_for
from loopscale.fit.laws import Law
from loopscale.fit.result import FitResult

BASE = ("E", "A", "alpha", "B", "beta")
LOGGED = ("e", "a", "b")  # internal coordinates that are the log of the user's parameter (and log_k_<r>)


@dataclass(frozen=True)
class LawSets:
    """Law parameters as arrays with one entry per parameter set (a point estimate, or the bootstrap
    replicates); multiplier[r] is m_r of eq. 1 (r^phi for the looped law, 1 at r = 1)."""

    E: np.ndarray
    A: np.ndarray
    alpha: np.ndarray
    B: np.ndarray
    beta: np.ndarray
    multiplier: Mapping[int, np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.E)

    def column(self, name: str) -> np.ndarray:
        return np.asarray(getattr(self, name), dtype=float)[:, None]

    def take(self, rows: slice) -> LawSets:
        """The parameter sets `rows` (for evaluating many replicates in chunks)."""
        cut = {k: np.asarray(getattr(self, k))[rows] for k in BASE}
        return LawSets(**cut, multiplier={r: np.asarray(m)[rows] for r, m in self.multiplier.items()})


def looped_sets(params: Mapping[str, Sequence[float]], r_values: Sequence[int]) -> LawSets:
    """LawSets from arrays of E, A, alpha, B, beta, phi (the looped law: m_r = r^phi)."""
    arr = {k: np.atleast_1d(np.asarray(params[k], dtype=float)) for k in ("E", "A", "alpha", "B", "beta", "phi")}
    mult = {int(r): np.power(float(r), arr["phi"]) for r in r_values}
    return LawSets(arr["E"], arr["A"], arr["alpha"], arr["B"], arr["beta"], mult)


# ----------------------------------------------------------------------------------------------------
# what each law has and needs


def _multiplier_key(law: str, r: int, recipe: str | None) -> str | None:
    """The parameter that sets m_r in N_eff = N_once + m_r N_rec, or None when m_r = 1."""
    if r == 1:
        return None
    return {"looped": "phi", "looped-joint": f"phi[{recipe}]", "looped-free": f"k_{r}"}[law]


def _recipes(fit: FitResult) -> list[str]:
    return [k[4:-1] for k in fit.params if k.startswith("phi[")]


def _free_r(fit: FitResult) -> list[float]:
    return sorted(float(k[2:]) for k in fit.params if k.startswith("k_"))


def law_of(fit: FitResult) -> Law:
    """The fit's law form with its own parameter names (InputError for an unknown law)."""
    if fit.law == "looped-free":
        return Law(fit.law, r_values=tuple(_free_r(fit)))
    if fit.law == "looped-joint":
        return Law(fit.law, recipes=tuple(_recipes(fit)))
    return Law(fit.law)


def parameter_box(fit: FitResult) -> dict[str, tuple[float, float]]:
    """{parameter: (low, high)}: the fitter's box (`fit.bounds`) in the fit's own parameters. A joint fit's
    phi[<recipe>] is its reference's phi plus a delta-phi, so its box is the sum of the two."""
    law = law_of(fit)
    box = dict(zip(law.internal_names, bounds_for(law)))
    out = {}
    for internal, user in zip(law.internal_names, law.user_names):
        lo, hi = box[internal]
        if internal.startswith("dphi["):
            lo, hi = box["phi"][0] + lo, box["phi"][1] + hi
        if internal in LOGGED or internal.startswith("log_k_"):
            lo, hi = float(np.exp(lo)), float(np.exp(hi))
        out[user] = (lo, hi)
    return out


def check_law(fit: FitResult, r_values: Sequence[int], recipe: str | None) -> str | None:
    """The recipe a joint fit is read for (None for other laws); InputError when the law cannot advise these r."""
    if fit.law == "chinchilla":
        if any(r != 1 for r in r_values):
            raise InputError(
                "a chinchilla fit has no phi, so it cannot say what a recurrence is worth: only r = 1 can be "
                "advised (pass --r 1), or fit the looped law (loopscale fit --law looped)"
            )
    elif fit.law == "looped-free":
        have = [int(r) for r in _free_r(fit)]
        if any(r != 1 and r not in have for r in r_values):
            raise InputError(f"the looped-free fit has a multiplier k_r for r in {have} only: pass --r among 1,{have}")
    elif fit.law == "looped-joint":
        recipes = _recipes(fit)
        recipe = recipe or recipes[0]
        if recipe not in recipes:
            raise InputError(f"the joint fit has no recipe {recipe!r}; its recipes: {', '.join(recipes)}")
        return recipe
    elif fit.law != "looped":
        raise InputError(f"cannot advise from a {fit.law!r} fit")
    return None


def advised_recipe(fit: FitResult, recipe: str | None) -> str:
    """The recipe advised: --recipe, else a joint fit's reference, else the fit's group (fitted with --group
    recipe), else baseline."""
    if recipe:
        return recipe
    if fit.law == "looped-joint":
        return _recipes(fit)[0]
    group = fit.group or {}
    return str(group["value"]) if group.get("column") == "recipe" and group.get("value") is not None else "baseline"


def fit_shapes(fit: FitResult, recipe: str) -> list | None:
    """The model shapes [r, N_once, N_rec] the fit saw for this recipe (a joint fit: that recipe's runs and
    the shared r = 1 runs), or None when the record has none."""
    data = fit.data or {}
    by_recipe = data.get("shapes_by_recipe") or {}
    if fit.law == "looped-joint" and recipe in by_recipe:
        return by_recipe[recipe]
    return data.get("shapes") or None


def default_r_values(fit: FitResult, shapes) -> list[int]:
    """The r the fit saw (its shapes), else 1, 2, 4, 8; r = 1 only for a chinchilla fit; the r with a free
    multiplier (and 1) for a looped-free fit."""
    if fit.law == "chinchilla":
        return [1]
    if fit.law == "looped-free":
        return [1, *(int(r) for r in _free_r(fit))]
    return sorted({int(s[0]) for s in shapes}) if shapes else [1, 2, 4, 8]


# ----------------------------------------------------------------------------------------------------
# the sets


def _sets(fit: FitResult, columns: dict, r_values: Sequence[int], recipe: str | None) -> LawSets:
    arr = {k: np.atleast_1d(np.asarray(v, dtype=float)) for k, v in columns.items()}
    mult = {}
    for r in r_values:
        key = _multiplier_key(fit.law, r, recipe)
        if key is None:
            mult[r] = np.ones_like(arr["E"])
        else:
            mult[r] = arr[key] if fit.law == "looped-free" else np.power(float(r), arr[key])
    return LawSets(*(arr[k] for k in BASE), multiplier=mult)


def fit_law_sets(fit: FitResult, r_values: Sequence[int], recipe: str | None = None):
    """(point estimate, bootstrap replicates or None, recipe) as LawSets for these r, from a record checked
    by `record_checks.check_record`. Replicates with a missing or non-finite value are dropped; fewer than
    two left is None."""
    recipe = check_law(fit, r_values, recipe)
    keys = [*BASE, *sorted({k for r in r_values if (k := _multiplier_key(fit.law, r, recipe))})]
    point = _sets(fit, {k: [fit.params[k]] for k in keys}, r_values, recipe)
    stored = (fit.bootstrap or {}).get("params") or {}
    if not all(k in stored for k in keys):
        return point, None, recipe
    table = np.array([[np.nan if v is None else v for v in stored[k]] for k in keys], dtype=float)
    table = table[:, np.isfinite(table).all(axis=0)]
    if table.shape[1] < 2:
        return point, None, recipe
    return point, _sets(fit, dict(zip(keys, table)), r_values, recipe), recipe
