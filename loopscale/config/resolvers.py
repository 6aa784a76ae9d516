"""The OmegaConf resolvers the configs use (`${ls.point_flops:${point}}`, `${ls.recipe:${model}}`, ...): the
naming rules (naming.py) and the model's recipe label (model.py) in one place, so neither imports the other."""

from __future__ import annotations

from typing import Any

from omegaconf import OmegaConf

from loopscale.config.lr_rule import loop_multiplier as lr_loop_multiplier
from loopscale.config.lr_rule import multiplier as lr_rule_multiplier
from loopscale.config.model import ModelConfig
from loopscale.config.naming import (
    _parse_point,
    _safe_name,
    budget_tag,
    lr_rule_tag,
    lr_tag,
    parse_fork_point,
    seed_tag,
)
from loopscale.errors import UnknownName


def recipe_label(model: Any) -> str:
    """`${ls.recipe:${model}}`: the recipe label the model node resolves to (model.recipe, or for recipe=auto
    the published recipe its fields describe, else a name made from them; loopscale/config/model.py)."""
    fields = OmegaConf.to_container(model, resolve=True) if OmegaConf.is_config(model) else dict(model)
    try:
        return ModelConfig(**fields).recipe
    except UnknownName:  # a typo'd name: refused here, before Hydra makes a run dir named after it
        raise
    except (TypeError, ValueError):  # an invalid model: the run fails on it and records why, under this name
        return str(fields.get("recipe"))


def register_resolvers() -> None:
    """OmegaConf resolvers used by loopscale/conf/*.yaml (`${ls.point_flops:${point}}` etc.)."""
    for name, fn in (
        ("ls.point_flops", lambda p: _parse_point(p)["C"]),
        ("ls.point_width", lambda p: _parse_point(p)["d_model"]),
        ("ls.budget_tag", budget_tag),
        ("ls.ceil_half", lambda r: -(-int(r) // 2)),
        ("ls.seed_tag", seed_tag),
        ("ls.lr_tag", lr_tag),
        ("ls.lr_rule", lr_rule_multiplier),  # an experiment's tuned lr rule (loopscale/config/lr_rule.py)
        ("ls.lr_rule_tag", lr_rule_tag),
        ("ls.lr_loop_rule", lr_loop_multiplier),  # the loop's tuned lr (`loopscale tune --axis loop`)
        ("ls.recipe", recipe_label),
        ("ls.safe_name", _safe_name),
        ("ls.fork_flops", lambda p: parse_fork_point(p)[0]),  # sweeps/grid/cpu_wsd.yaml
        ("ls.fork_width", lambda p: parse_fork_point(p)[1]),
    ):
        if not OmegaConf.has_resolver(name):
            OmegaConf.register_new_resolver(name, fn)
