"""Which injection forms exist: every module of loopscale/injections/ except form.py and this one, each named
after its form and holding `FORM`. Found on first use (importing a form's file does not import torch), sorted
by name; adding a form is adding its file."""

from __future__ import annotations

import functools
import importlib
import pkgutil

from loopscale import injections as package
from loopscale.errors import ConfigError
from loopscale.injections.form import InjectionForm

NOT_FORMS = frozenset({"form", "registry"})


@functools.cache
def forms() -> dict[str, InjectionForm]:
    """{name: form} of every form module, by name."""
    found = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if info.name in NOT_FORMS:
            continue
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        spec = getattr(module, "FORM", None)
        if not isinstance(spec, InjectionForm) or spec.name != info.name:
            raise TypeError(f"{module.__name__} must set FORM to an InjectionForm named {info.name!r}")
        found[info.name] = spec
    return found


def names(**states) -> tuple[str, ...]:
    """The forms' names, sorted; with `states` only the forms whose attributes have those values."""
    return tuple(n for n, f in forms().items() if all(getattr(f, k) == v for k, v in states.items()))


def form(name: str) -> InjectionForm:
    """The form called `name`; a ConfigError naming the others when there is none."""
    found = forms().get(name)
    if found is None:
        raise ConfigError(f"injection={name!r} is not allowed; choose one of {', '.join(map(repr, names()))}")
    return found


def form_for_recipe(recipe: str) -> str | None:
    """The form model.recipe=`recipe` picks under injection=auto at r > 1 (hyper -> hyper), or None."""
    return next((n for n, f in forms().items() if f.recipe and f.recipe == recipe), None)
