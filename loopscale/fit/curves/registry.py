"""Which curve laws there are: name -> class (`law.CurveLaw`). Every module of this package that registers
one is loaded on first look-up, so a law of its own is one module here (or anywhere, imported before use)."""

from __future__ import annotations

import importlib

from loopscale.errors import InputError
from loopscale.fit.curves.law import CurveLaw

_LAWS: dict[str, type[CurveLaw]] = {}
_LAW_MODULES = ("multipower", "lr_annealing")  # the laws shipped in this package


def register(cls: type[CurveLaw]) -> type[CurveLaw]:
    """Class decorator: make `cls` known by its `name` (a second class of one name is refused)."""
    if not cls.name:
        raise ValueError(f"{cls.__qualname__} has no name")
    known = _LAWS.get(cls.name)
    if known is not None and known.__qualname__ != cls.__qualname__:
        raise ValueError(f"curve law {cls.name!r} is registered twice ({known.__module__} and {cls.__module__})")
    _LAWS[cls.name] = cls
    return cls


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
