"""Which recipes exist: every module of loopscale/recipes/ but recipe.py and this one, each named after its
recipe and holding `RECIPE` (the rule of loopscale/injections/registry.py). Adding a recipe is adding its file."""

from __future__ import annotations

import functools

from loopscale import recipes as package
from loopscale.errors import not_one_of
from loopscale.injections.registry import find_forms
from loopscale.recipes.recipe import Recipe

NOT_RECIPES = frozenset({"recipe", "registry"})


@functools.cache
def recipes() -> dict[str, Recipe]:
    """{name: recipe} of every recipe module, by name."""
    return find_forms(package, Recipe, NOT_RECIPES, attribute="RECIPE")


def names(**states) -> tuple[str, ...]:
    """The recipes' names, sorted; with `states` only those whose attributes have those values."""
    return tuple(n for n, g in recipes().items() if all(getattr(g, k) == v for k, v in states.items()))


def find(name: str) -> Recipe | None:
    """The recipe called `name`, or None (auto, or a name of the user's own for a design set by other fields)."""
    return recipes().get(name)


def recipe(name: str) -> Recipe:
    """The recipe called `name`; a ConfigError naming the others when there is none."""
    found = find(name)
    if found is None:
        raise not_one_of("recipe", name, names(), what="a registered recipe")
    return found


def label_of(cfg) -> str | None:
    """The recipe a model is, as recipe=auto names it: the first that may label models and that the fields match."""
    return next(
        (n for n, g in recipes().items() if g.auto_label and g.applies(cfg.r) and g.mismatch(cfg) is None), None
    )
