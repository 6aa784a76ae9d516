"""Which injection forms exist: every module of loopscale/injections/ except form.py and this one, each named
after its form and holding `FORM`. Found on first use (importing a form's file does not import torch), sorted
by name; adding a form is adding its file."""

from __future__ import annotations

import functools
import importlib
import pkgutil

from loopscale import injections as package
from loopscale.errors import not_one_of
from loopscale.injections.form import InjectionForm

NOT_FORMS = frozenset({"form", "registry"})


def find_forms(package, spec_type: type, skip: frozenset[str], attribute: str = "FORM") -> dict:
    """{name: spec} of every module of `package` but `skip`, each named after its spec (`attribute`, an instance
    of `spec_type`), sorted by name: the rule of every registry of kinds (injections here, blocks in
    loopscale/blocks/, recipes in loopscale/recipes/)."""
    found = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if info.name in skip:
            continue
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        spec = getattr(module, attribute, None)
        if not isinstance(spec, spec_type) or spec.name != info.name:
            raise TypeError(f"{module.__name__} must set {attribute} to an {spec_type.__name__} named {info.name!r}")
        found[info.name] = spec
    return found


@functools.cache
def forms() -> dict[str, InjectionForm]:
    """{name: form} of every form module, by name."""
    return find_forms(package, InjectionForm, NOT_FORMS)


def names(**states) -> tuple[str, ...]:
    """The forms' names, sorted; with `states` only the forms whose attributes have those values."""
    return tuple(n for n, f in forms().items() if all(getattr(f, k) == v for k, v in states.items()))


def form(name: str) -> InjectionForm:
    """The form called `name`; a ConfigError naming the others when there is none."""
    found = forms().get(name)
    if found is None:
        raise not_one_of("injection", name, names())
    return found
