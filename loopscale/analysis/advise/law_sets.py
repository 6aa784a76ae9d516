"""A fit's law as parameter sets for the optimiser: E, A, alpha, B, beta and the multiplier m_r of
N_eff = N_once + m_r N_rec per r, at the point estimate and for every stored bootstrap replicate
(docs/design.md, "Advice").

This is the one module of `loopscale.analysis.advise` that reads a fit's law, and it asks the law
(`loopscale.fit.laws`: `multiplier`, `dense`, `per_recipe`, `per_r_multipliers`, `bounds`), never its name:
what sets m_r, the box each parameter must lie in, which r a law can advise, which recipe and which fitted
models a fit is read for. Every other module reads `LawSets` only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from loopscale.errors import InputError
from loopscale.fit.laws.form import Law
from loopscale.fit.laws.registry import law_class
from loopscale.fit.result import FitResult

BASE = ("E", "A", "alpha", "B", "beta")
LOGGED = ("e", "a", "b")  # internal coordinates that are the log of the user's parameter (and log_k_<r>)


@dataclass(frozen=True)
class LawSets:
    """Law parameters as arrays with one entry per parameter set (a point estimate, or the bootstrap
    replicates); multiplier[r] is m_r of eq. 1 (r^phi for the looped law, 1 at r = 1). For a law whose m reads
    the size too (`Law.multiplier_scaling`), multiplier[r] is m at N_ref and scaling[r] its exponent in N_c:
    m = multiplier[r] (N_c / N_ref)^scaling[r], N_c = N_once + r N_rec (optimum.multiplier_at)."""

    E: np.ndarray
    A: np.ndarray
    alpha: np.ndarray
    B: np.ndarray
    beta: np.ndarray
    multiplier: Mapping[int, np.ndarray] = field(default_factory=dict)
    scaling: Mapping[int, np.ndarray] = field(default_factory=dict)
    N_ref: float | None = None

    def __len__(self) -> int:
        return len(self.E)

    def column(self, name: str) -> np.ndarray:
        return np.asarray(getattr(self, name), dtype=float)[:, None]

    def take(self, rows: slice) -> LawSets:
        """The parameter sets `rows` (for evaluating many replicates in chunks)."""
        cut = {k: np.asarray(getattr(self, k))[rows] for k in BASE}
        multiplier = {r: np.asarray(m)[rows] for r, m in self.multiplier.items()}
        scaling = {r: np.asarray(s)[rows] for r, s in self.scaling.items()}
        return LawSets(**cut, multiplier=multiplier, scaling=scaling, N_ref=self.N_ref)


def looped_sets(params: Mapping[str, Sequence[float]], r_values: Sequence[int]) -> LawSets:
    """LawSets from arrays of E, A, alpha, B, beta, phi (the looped law: m_r = r^phi)."""
    arr = {k: np.atleast_1d(np.asarray(params[k], dtype=float)) for k in ("E", "A", "alpha", "B", "beta", "phi")}
    mult = {int(r): np.power(float(r), arr["phi"]) for r in r_values}
    return LawSets(arr["E"], arr["A"], arr["alpha"], arr["B"], arr["beta"], mult)


# ----------------------------------------------------------------------------------------------------
# what the fit's law has and needs (asked of the law, never by its name: loopscale.fit.laws)


def law_of(fit: FitResult) -> Law:
    """The fit's law bound to its own parameter names (its r's, its recipes); InputError for an unknown law."""
    return law_class(fit.law).from_params(fit.params)


def parameter_box(fit: FitResult) -> dict[str, tuple[float, float]]:
    """{parameter: (low, high)}: the fitter's box (`Law.bounds`) in the fit's own parameters. A joint fit's
    phi[<recipe>] is its reference's phi plus a delta-phi, so its box is the sum of the two."""
    law = law_of(fit)
    box = dict(zip(law.internal_names, law.bounds()))
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
    """The recipe a per-recipe fit is read for (None for other laws); InputError when the law cannot advise
    these r (a dense law: r = 1 only; a per-r law: the r it has a multiplier for, `Law.multiplier`)."""
    law = law_of(fit)
    if law.dense and any(r != 1 for r in r_values):
        raise InputError(
            f"a {fit.law} fit has no phi, so it cannot say what a recurrence is worth: only r = 1 can be "
            "advised (pass --r 1), or fit the looped law (loopscale fit --law looped)"
        )
    if law.per_recipe:
        recipe = recipe or law.recipes[0]
    else:
        recipe = None
    for r in r_values:  # raises for an r or recipe the fit has no multiplier for
        law.multiplier_scaling(fit.params, float(r), recipe)
    return recipe


def advised_recipe(fit: FitResult, recipe: str | None) -> str:
    """The recipe advised: --recipe, else a per-recipe fit's reference, else the fit's group (fitted with
    --group recipe), else baseline."""
    if recipe:
        return recipe
    law = law_of(fit)
    if law.per_recipe:
        return law.recipes[0]
    group = fit.group or {}
    return str(group["value"]) if group.get("column") == "recipe" and group.get("value") is not None else "baseline"


def fit_shapes(fit: FitResult, recipe: str) -> list | None:
    """The model shapes [r, N_once, N_rec] the fit saw for this recipe (a per-recipe fit: that recipe's runs
    and the shared r = 1 runs), or None when the record has none."""
    data = fit.data or {}
    by_recipe = data.get("shapes_by_recipe") or {}
    if law_class(fit.law).per_recipe and recipe in by_recipe:
        return by_recipe[recipe]
    return data.get("shapes") or None


def default_r_values(fit: FitResult, shapes) -> list[int]:
    """The r the fit saw (its shapes), else 1, 2, 4, 8; r = 1 only for a dense law; the r with a free
    multiplier (and 1) for a per-r law."""
    law = law_of(fit)
    if law.dense:
        return [1]
    if law.per_r_multipliers:
        return [1, *(int(r) for r in law.r_values)]
    return sorted({int(s[0]) for s in shapes}) if shapes else [1, 2, 4, 8]


# ----------------------------------------------------------------------------------------------------
# the sets


def _sets(law: Law, columns: dict, r_values: Sequence[int], recipe: str | None) -> LawSets:
    """The sets as the final-point law (`Law.final_point_params`: a curve law's fit read at a wsd run's end)."""
    arr = {k: np.atleast_1d(np.asarray(v, dtype=float)) for k, v in columns.items()}
    arr = {k: np.atleast_1d(np.asarray(v, dtype=float)) for k, v in law.final_point_params(arr).items()}
    mult, scaling, N_ref = {}, {}, None
    for r in r_values:
        m, exponent, ref = (
            (np.ones_like(arr["E"]), None, None) if r == 1 else law.multiplier_scaling(arr, float(r), recipe)
        )
        mult[r] = np.broadcast_to(m, arr["E"].shape)
        if exponent is not None:
            scaling[r], N_ref = np.broadcast_to(exponent, arr["E"].shape), ref
    return LawSets(*(arr[k] for k in BASE), multiplier=mult, scaling=scaling, N_ref=N_ref)


def fit_law_sets(fit: FitResult, r_values: Sequence[int], recipe: str | None = None):
    """(point estimate, bootstrap replicates or None, recipe) as LawSets for these r, from a record checked
    by `record_checks.check_record`. Replicates with a missing or non-finite value are dropped; fewer than
    two left is None."""
    recipe = check_law(fit, r_values, recipe)
    law = law_of(fit)
    keys = list(law.user_names)  # a replicate is used whole: every parameter of the law finite
    point = _sets(law, {k: [fit.params[k]] for k in keys}, r_values, recipe)
    stored = (fit.bootstrap or {}).get("params") or {}
    if not all(k in stored for k in keys):
        return point, None, recipe
    table = np.array([[np.nan if v is None else v for v in stored[k]] for k in keys], dtype=float)
    table = table[:, np.isfinite(table).all(axis=0)]
    if table.shape[1] < 2:
        return point, None, recipe
    return point, _sets(law, dict(zip(keys, table)), r_values, recipe), recipe
