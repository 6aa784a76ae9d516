"""huginn: Huginn's design (Geiping et al. 2025, "Scaling up Test-Time Compute with Latent Reasoning: A Recurrent
Depth Approach"; seal-rg/recurrent-pretraining, recpre/raven_modeling_minimal.py): the sandwich layer
x = norm_2(attn(norm_1(x)) + x), x = norm_4(mlp(norm_3(x)) + x) in every layer (loopscale/blocks/sandwich.py),
the adapter Linear(2d -> d) on [s; e] at every pass and the random "like-init" initial state
(loopscale/injections/huginn.py, which says where it differs from loopscale's concat injection).

Left out: r drawn per step (Poisson-lognormal, mean 32) with gradient through the last 8 passes; a law point has
one r (and truncation is the tbptt recipe's axis). Full backprop here.
Its r = 1 model is not the baseline (the sandwich norms and the random initial state change the dense model):
its conventions apply at r = 1 too, and its r = 1 runs are its own.
"""

from loopscale.recipes.recipe import Recipe

RECIPE = Recipe(
    "huginn",
    injections=("huginn",),
    block="sandwich",
    own_dense=True,
    reduces="not the baseline at r = 1: the sandwich norms and the random initial state change the dense model",
)
