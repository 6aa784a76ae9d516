"""Which laws there are: the name of each registered law and its class (`form.Law`).

A law module registers its class with `@register`; every module in this package is loaded by the package
(`loopscale/fit/laws/__init__.py`), and a law of your own is one module that does the same, imported before
use. Everything that starts from a name (the CLI's `--law`, a fit record's `law`) looks the class up here
(`law_class`) and from then on asks the class what it has and needs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from loopscale.errors import InputError, not_one_of
from loopscale.fit.laws.form import Law, LawData

_LAWS: dict[str, type[Law]] = {}


def registering(kind: str, table: dict[str, type]) -> Callable[[type], type]:
    """A class decorator that makes a class known in `table` by its `name`: the laws' and the curve laws' (a class
    without a name, or a second class of one name, is refused; the same class loaded again is not a second)."""

    def register(cls: type) -> type:
        if not cls.name:
            raise ValueError(f"{cls.__qualname__} has no name: set the class attribute `name`")
        known = table.get(cls.name)
        if known is not None and known.__qualname__ != cls.__qualname__:
            raise ValueError(f"{kind} {cls.name!r} is registered twice ({known.__module__} and {cls.__module__})")
        table[cls.name] = cls
        return cls

    return register


register = registering("law", _LAWS)


def law_names() -> tuple[str, ...]:
    """Every registered law's name, sorted."""
    return tuple(sorted(_LAWS))


def find_law(name: str) -> type[Law] | None:
    """The class of law `name`, or None (a fit record of a law this process does not know)."""
    return _LAWS.get(name)


def law_class(name: str) -> type[Law]:
    """The class of law `name`; InputError listing the registered laws otherwise."""
    cls = _LAWS.get(name)
    if cls is None:
        raise not_one_of("law", name, law_names(), InputError, what="a registered law")
    return cls


def single_laws() -> tuple[str, ...]:
    """The laws `fit --law` fits to one table (a per-recipe law is fitted by `fit --joint`)."""
    return tuple(n for n in law_names() if not _LAWS[n].per_recipe)


def per_recipe_form(name: str) -> type[Law] | None:
    """The per-recipe law whose recipes each follow law `name` (what `fit --law NAME --joint COL` fits)."""
    return next((cls for n, cls in sorted(_LAWS.items()) if cls.per_recipe and cls.recipe_law == name), None)


def make_law(name: str, r=None, recipes=()) -> Law:
    """A Law bound to a fit's data: per-r laws take the distinct r > 1 in `r`; per-recipe laws `recipes`,
    the reference first."""
    return law_class(name).bind(r=r, recipes=recipes)


def warm_law(law: Law, r=None) -> Law:
    """The law whose optimum `law` starts from (`Law.warm_start`), bound to the same data: the r values and, for a
    per-recipe law, its recipes (looped-entry-joint starts from the looped-joint optimum of its recipes)."""
    return make_law(law.warm_start, r, recipes=law.recipes if law.per_recipe else ())


def law_data_from_table(table, law: str | Law) -> LawData:
    """LawData from a DataFrame (or dict of arrays) with the canonical columns the law reads
    (`Law.data_from_table`): the chinchilla law N and D (or C, then D = C / (6 N)); the looped laws N_once,
    N_rec, r and D (or C, then D = C / (6 (N_once + r N_rec)), the training cost of the looped model). L is
    used when present."""
    cls = type(law) if isinstance(law, Law) else law_class(law)
    return cls.data_from_table(table)


def predict_loss(law: str, params: Mapping[str, float], table_or_arrays, recipe_column: str = "recipe") -> np.ndarray:
    """Predicted loss L_hat for each row of a table (DataFrame or dict of arrays).

    `params` uses the user names (E, A, alpha, B, beta, phi, k_<r>, phi[<recipe>]), e.g. `FitResult.params`.
    Columns as in `law_data_from_table`; L is not needed. For ``looped-free`` every r > 1 in the table must
    have a k_<r> in params; a per-recipe law reads each row's recipe from `recipe_column`.
    """
    return law_class(law).predict_table(params, table_or_arrays, recipe_column)
