"""baseline: the looped-scaling paper's recipe (docs/design.md, "The published recipe"; the authors' released
code, kschwethelm/looped-lm-scaling): a prelude, the recurrent block looped r times with full backprop and the
published injection (concat u = W [e; s], or its split form linear on the CPU presets), a coda; phi = 0.46."""

from loopscale.recipes.recipe import Recipe

RECIPE = Recipe("baseline", published=True)
