"""hyper: the paper's hyper-connection probe (Zhu et al. 2024, "Hyper-Connections"; kschwethelm/looped-lm-scaling):
K = 2 static residual lanes around the recurrent block (loopscale/injections/hyper.py); phi = 0.65 (arXiv v2-v3).
The dynamic variant (model.options.hyper_dynamic) is a design of its own (recipe=auto names it hyper-dynamic)."""

from dataclasses import dataclass

from loopscale.injections.form import option
from loopscale.recipes.recipe import Recipe


@dataclass(frozen=True)
class HyperRecipe(Recipe):
    def mismatch_of_own(self, cfg) -> str | None:
        return (
            "hyper_dynamic=True (the published probe's lanes are static)"
            if option(cfg, "hyper_dynamic", False)
            else None
        )


RECIPE = HyperRecipe("hyper", injections=("hyper",), published=True)
