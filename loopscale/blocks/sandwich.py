"""sandwich: Huginn's "sandwich" layer (Geiping et al. 2025; seal-rg/recurrent-pretraining,
recpre/raven_modeling_minimal.py, SandwichBlock), a norm before and after each residual branch:

    x = norm_2(attn(norm_1(x)) + x);  x = norm_4(mlp(norm_3(x)) + x)

four RMSNorm gains of size d (12 d^2 + 4 d parameters with the ReLU^2 MLP), in every layer (prelude, recurrent
block and coda, as Huginn). F counts the four gains of every layer pass (4 d, 6x with gradient, 2x without).
Huginn's MLP is gated (SiLU) and its qkv one fused matrix; here the layer keeps the model's MLP (model.mlp) and
three q, k, v matrices, so the comparison with the baseline isolates the norms.
At r = 1 it is not the baseline: the norms after each branch change the function.
"""

from __future__ import annotations

from loopscale.blocks.form import BlockForm, LayerParts
from loopscale.injections.form import module_class


class SandwichForm(BlockForm):
    name = "sandwich"
    norm_names = ("norm_1", "norm_2", "norm_3", "norm_4")

    def saved_bytes_per_token(self, cfg, where: str, n_grad: int) -> int:
        # measured (tests/unit/test_blocks.py): the two post-branch norms keep their fp32 input and output and
        # a per-row rstd, beyond what the pre-norm layer keeps
        return n_grad * 2 * (8 * cfg.d_model + 4)

    def build(self, cfg, where: str, parts: LayerParts):
        return sandwich_module()(cfg, parts)


FORM = SandwichForm()


@module_class("SandwichLayer")
def sandwich_module():
    import torch  # on first use: the spec above is read without torch

    class SandwichLayer(torch.nn.Module):
        def __init__(self, cfg, parts: LayerParts):
            super().__init__()
            d, eps = cfg.d_model, cfg.norm_eps
            self.norm_1, self.norm_2, self.norm_3, self.norm_4 = (parts.norm(d, eps) for _ in range(4))
            self.attn = parts.attention(cfg)
            self.mlp = parts.mlp(cfg)

        def forward(self, x, cos, sin):
            x = self.norm_2(self.attn(self.norm_1(x), cos, sin) + x)
            return self.norm_4(self.mlp(self.norm_3(x)) + x)

    return SandwichLayer


__getattr__ = sandwich_module.find  # SandwichLayer, defined on first use, for pickle
