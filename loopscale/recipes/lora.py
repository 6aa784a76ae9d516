"""lora: per-pass low-rank adapters on the shared block's matrices (Bae et al. 2024, "Relaxed Recursive
Transformers: Effective Parameter Sharing with Layer-wise LoRA", arXiv 2410.20672): W + B_i A_i in pass i,
rank model.options.lora_rank (default 4), B = 0 at init (loopscale/blocks/lora.py); the adapters are N_pass.
At r = 1 it reduces to the baseline at init (B_0 = 0), and its conventions apply at r > 1, so its r = 1 runs
are the baseline's.
"""

from loopscale.recipes.recipe import Recipe

RECIPE = Recipe(
    "lora",
    block="lora",
    reduces="the baseline at r = 1 at init (B_0 = 0: the shared block alone); r = 1 runs are the baseline's",
)
