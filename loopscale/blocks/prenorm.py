"""prenorm: the pre-norm layer of every model before block forms (docs/design.md, "The looped model"):

    x = x + attn(attn_norm(x));  x = x + mlp(mlp_norm(x))

two RMSNorm gains of size d (12 d^2 + 2 d parameters with the ReLU^2 MLP). The module takes a residual scale
(1 here; loopscale/blocks/scaled_residual.py builds it with lambda / (r sqrt(k)) in the recurrent block).
"""

from __future__ import annotations

from loopscale.blocks.form import BlockForm, LayerParts
from loopscale.injections.form import module_class


class PreNormForm(BlockForm):
    name = "prenorm"

    def build(self, cfg, where: str, parts: LayerParts):
        return prenorm_module()(cfg, parts, self.residual_scale(cfg, where))


FORM = PreNormForm()


@module_class("PreNormLayer")
def prenorm_module():
    import torch  # on first use: the spec above is read without torch

    class PreNormLayer(torch.nn.Module):
        """One pre-norm transformer layer; its residual writes times `residual_scale` when that is not 1."""

        def __init__(self, cfg, parts: LayerParts, residual_scale: float = 1.0):
            super().__init__()
            self.attn_norm = parts.norm(cfg.d_model, cfg.norm_eps)
            self.attn = parts.attention(cfg)
            self.mlp_norm = parts.norm(cfg.d_model, cfg.norm_eps)
            self.mlp = parts.mlp(cfg)
            self.residual_scale = float(residual_scale)

        def write(self, x, y):
            """x + scale y: the residual write (a Python float: autograd keeps nothing for it)."""
            return x + y if self.residual_scale == 1.0 else x + self.residual_scale * y

        def forward(self, x, cos, sin, adapt=None):
            x = self.write(x, self.attn(self.attn_norm(x), cos, sin, adapt))
            return self.write(x, self.mlp(self.mlp_norm(x), adapt))

    return PreNormLayer


__getattr__ = prenorm_module.find  # PreNormLayer, defined on first use, for pickle
