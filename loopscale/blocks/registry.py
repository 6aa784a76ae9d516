"""Which block forms exist: every module of loopscale/blocks/ but form.py and this one, each named after its
form and holding `FORM` (the rule of loopscale/injections/registry.py). Adding a form is adding its file."""

from __future__ import annotations

import functools

from loopscale import blocks as package
from loopscale.blocks.form import BlockForm
from loopscale.errors import not_one_of
from loopscale.injections.registry import find_forms

NOT_FORMS = frozenset({"form", "registry"})
DEFAULT = "prenorm"  # the layer of every model before block forms (and what block=auto is without a recipe)


@functools.cache
def forms() -> dict[str, BlockForm]:
    """{name: form} of every block form module, by name."""
    return find_forms(package, BlockForm, NOT_FORMS)


def names() -> tuple[str, ...]:
    return tuple(forms())


def form(name: str) -> BlockForm:
    """The block form called `name`; a ConfigError naming the others when there is none."""
    found = forms().get(name)
    if found is None:
        raise not_one_of("block", name, names())
    return found
