"""Which curve laws there are: name -> class (`law.CurveLaw`). Every module of this package that registers
one is loaded on first look-up, so a law of its own is one module here (or anywhere, imported before use)."""

from __future__ import annotations

import importlib

from loopscale.errors import InputError
from loopscale.fit.curves.law import CurveLaw
from loopscale.fit.laws.registry import registering

_LAWS: dict[str, type[CurveLaw]] = {}
_LAW_MODULES = ("multipower", "lr_annealing")  # the laws shipped in this package


register = registering("curve law", _LAWS)


def _load() -> None:
    for name in _LAW_MODULES:
        importlib.import_module(f"loopscale.fit.curves.{name}")


def curve_law_names() -> tuple[str, ...]:
    """Every registered curve law's name, sorted."""
    _load()
    return tuple(sorted(_LAWS))


def curve_law(name: str) -> CurveLaw:
    """An instance of curve law `name`; an unknown name is refused with the known ones."""
    _load()
    if name not in _LAWS:
        raise InputError(f"unknown curve law {name!r}; known: {', '.join(sorted(_LAWS))}")
    return _LAWS[name]()
