"""loop_index: a loop-index (pass) embedding added to the block input at each pass (Bae et al. 2024, "Relaxed
Recursive Transformers", arXiv 2410.20672, and the design brief): u_i = inject(e, s_i) + p_i over the published
injection (loopscale/injections/loop_index.py); p_i, r d parameters in N_pass.
At r = 1 it reduces to the baseline at init (p_0 = 0, the injection's identity init: u = e = s_0), and its
conventions apply at r > 1, so its r = 1 runs are the baseline's.
"""

from loopscale.recipes.recipe import Recipe

RECIPE = Recipe(
    "loop_index",
    injections=("loop_index",),
    reduces="the baseline at r = 1 at init (p_0 = 0 and the injection's identity init); r = 1 runs are the baseline's",
)
