"""scaled_residual: stable residual scaling of the loop (arXiv 2606.18524, as summarised in the design brief:
"residual writes of the looped block scaled by lambda / (N sqrt(L))", N passes, L unique layers; the claim:
the optimal learning rate then depends on L only, not on N):

    in the recurrent block   x = x + c attn(attn_norm(x));  x = x + c mlp(mlp_norm(x)),   c = lambda / (r sqrt(k))

with r the passes and k the block's unique layers (the looped block's L); the prelude and coda layers write
unscaled. lambda is `model.options.residual_lambda` (default 1.0: the brief gives no value). The scale is a
constant, not a parameter: no parameters beyond the pre-norm layer's, no FLOPs counted (a scalar multiply, like
a residual add), nothing saved for backward.

At r = 1 it is not the baseline (the block's writes are scaled by lambda / sqrt(k) there too): the claim is
about one parametrisation at every r, so its r = 1 runs are its own.
"""

from __future__ import annotations

import math

from loopscale.blocks.form import BlockForm, LayerParts
from loopscale.blocks.prenorm import prenorm_module
from loopscale.errors import ConfigError
from loopscale.injections.form import option

LAMBDA = 1.0  # model.options.residual_lambda


class ScaledResidualForm(BlockForm):
    name = "scaled_residual"
    options = ("residual_lambda",)

    def residual_scale(self, cfg, where: str) -> float:
        if where != "recurrent":
            return 1.0
        return option(cfg, "residual_lambda", LAMBDA) / (cfg.r * math.sqrt(cfg.n_rec))

    def check(self, cfg) -> None:
        lam = option(cfg, "residual_lambda", LAMBDA)
        if not lam > 0:
            raise ConfigError(f"options.residual_lambda={lam!r} must be > 0")

    def build(self, cfg, where: str, parts: LayerParts):
        return prenorm_module()(cfg, parts, self.residual_scale(cfg, where))


FORM = ScaledResidualForm()
