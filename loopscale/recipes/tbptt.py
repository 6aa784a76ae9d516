"""tbptt: the paper's truncated-backprop probe (docs/design.md, "Truncated backprop"; kschwethelm/looped-lm-scaling):
the baseline with gradient through the last k = ceil(r/2) passes only (bptt_k); phi = 0.38 (arXiv v2-v3)."""

from loopscale.recipes.recipe import Recipe

RECIPE = Recipe("tbptt", truncated=True, published=True)
