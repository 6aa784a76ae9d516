"""whole_stack: whole-stack looping (Ouro / LoopLM, Zhu et al. 2025, "Scaling Latent Reasoning via Looped
Language Models", arXiv 2510.25741): no unshared prelude or coda (p = c = 0), the looped block is the whole
stack. Here the block keeps the depth the layer plan gives it (k = (depth - p - c) / r, so the baseline's
block at each r) and the prelude and coda layers leave the model: L_eff = k r. N_once is then the three norms
and the injection only (embedding and head outside N, as always).
It keeps the baseline's injection (Ouro itself injects nothing: model.injection=passthrough is that variant).
At r = 1 it is the baseline (its conventions apply at r > 1). recipe=auto never names a model whole_stack (the
baseline takes any layout): label such a model with model.recipe=whole_stack.
"""

from loopscale.recipes.recipe import Recipe

RECIPE = Recipe("whole_stack", whole_stack=True, auto_label=False)
