"""What a recipe is: the forms and conventions of one loop design, and the check that a model is that design.

A recipe's conventions apply at r > 1, where the designs differ; at r = 1 every recipe is the dense baseline
model (its r = 1 runs are the baseline's and a joint fit shares them), unless `own_dense` says the design
changes the dense model too (a block of its own, a random initial state): its r = 1 runs are then its own.
`reduces` says which, and why: tests/unit/test_recipes.py checks it on the logits.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

PUBLISHED_INJECTIONS = ("linear", "concat")  # the looped-scaling authors' injection, and its split form
DENSE_INJECTION = "passthrough"  # u = s: the r = 1 model


@dataclass(frozen=True)
class Recipe:
    """name: model.recipe; injections: the forms the design accepts at r > 1, the first picked by injection=auto
    (empty: the published looped injection, model.looped_injection); block: its block form; options: defaults of
    ModelConfig.options (a user's own values win); truncated: backprop through the last ceil(r/2) passes only;
    whole_stack: no prelude or coda at r > 1 (their layers leave the model: k = (depth - p - c) / r); own_dense:
    the conventions apply at r = 1 too; published: a recipe of the looped-scaling paper; auto_label: recipe=auto
    may name a model after it; reduces: how its r = 1 model relates to the baseline's."""

    name: str
    injections: tuple[str, ...] = ()
    block: str = "prenorm"
    options: Mapping[str, Any] = field(default_factory=dict)
    truncated: bool = False
    whole_stack: bool = False
    own_dense: bool = False
    published: bool = False
    auto_label: bool = True
    reduces: str = "at r = 1 the recipe is the baseline's dense model (its conventions apply at r > 1)"

    def applies(self, r: int) -> bool:
        """Whether the recipe's conventions shape a model with r passes."""
        return r > 1 or self.own_dense

    def injection(self, r: int, looped_injection: str) -> str:
        """What injection=auto becomes under this recipe."""
        if self.injections:
            return self.injections[0]
        return looped_injection if r > 1 else DENSE_INJECTION

    def mismatch(self, cfg) -> str | None:
        """Why the model `cfg` is not this design (None when it is): its forms, truncation and layout."""
        if not self.applies(cfg.r):
            return None
        allowed = self.injections or (PUBLISHED_INJECTIONS if cfg.r > 1 else (DENSE_INJECTION,))
        truncated = cfg.bptt_k is not None and cfg.bptt_k < cfg.r
        if cfg.injection not in allowed:
            return f"injection={cfg.injection!r} (the recipe's: {' or '.join(allowed)})"
        if cfg.block != self.block:
            return f"block={cfg.block!r} (the recipe's: {self.block!r})"
        if truncated != self.truncated:
            return f"bptt_k={cfg.bptt_k} ({'truncated' if self.truncated else 'full'} backprop in the recipe)"
        if self.whole_stack and (cfg.n_prelude or cfg.n_coda):
            return f"n_prelude={cfg.n_prelude}, n_coda={cfg.n_coda} (the recipe loops the whole stack: 0 and 0)"
        return self.mismatch_of_own(cfg)

    def mismatch_of_own(self, cfg) -> str | None:
        """A recipe's further conditions (hyper: static lanes)."""
        return None
