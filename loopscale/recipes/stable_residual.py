"""stable_residual: stable residual scaling of the loop (arXiv 2606.18524): the recurrent block's residual writes
scaled by lambda / (r sqrt(k)) (loopscale/blocks/scaled_residual.py; lambda = model.options.residual_lambda,
default 1). The claim to test: the optimal learning rate then depends on the unique layers only, not on r (the
lr-confound check of `loopscale validate` reads this recipe's lr grid).
Its r = 1 model is not the baseline (the writes are scaled by lambda / sqrt(k) at r = 1 too: one
parametrisation at every r): its conventions apply at r = 1 and its r = 1 runs are its own.
"""

from loopscale.recipes.recipe import Recipe

RECIPE = Recipe(
    "stable_residual",
    block="scaled_residual",
    own_dense=True,
    reduces="not the baseline at r = 1: the block's residual writes are scaled by lambda / sqrt(k) there too",
)
