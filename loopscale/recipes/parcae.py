"""parcae: Parcae (Prairie et al. 2026, "Parcae: Scaling Laws For Stable Looped Language Models", arXiv 2604.12946;
sandyresearch/parcae, parcae_lm/modules/injection.py
DiagonalInjection, parcae_lm/models/parcae/init.py, the released parcae_lm/configs/parcae/*.py): the diagonal
LTI injection u = exp(-softplus(dt) exp(A_log)) (.) s + softplus(dt) (.) (B e_n), B = I at init, no weight
decay on A_log, dt and B, a norm on the prelude's output, a like-init initial state; the largest decay factor
(< 1 by construction) logged at every evaluation as design/max_decay (loopscale/injections/parcae.py).

Left out, on purpose: the authors sample r per sequence (Poisson, mean 8) and backprop through ceil(r/2)
passes; a law point has one r, and truncation is the tbptt recipe's axis (combining them would confound the
two). Full backprop here, on the pre-norm block; Parcae's projection C after the loop is left out.
At r = 1 it is the baseline (its conventions apply at r > 1): the injection itself is not the identity at r = 1
(u = 0.45 s_0 + 0.80 e_n with a random s_0), so a one-pass Parcae model would not be the dense baseline.
"""

from loopscale.recipes.recipe import Recipe

RECIPE = Recipe("parcae", injections=("parcae",))
