"""lora: per-pass low-rank adapters on the shared block's matrices (Bae et al. 2024, "Relaxed Recursive
Transformers: Effective Parameter Sharing with Layer-wise LoRA", arXiv 2410.20672): in pass i every matrix W of
a recurrent layer acts as

    W + B_i A_i,   A_i [rank, in], B_i [out, rank], one pair per pass and matrix (q, k, v, attention-out,
                   MLP-in, MLP-out)

so y = W x + B_i (A_i x). B_i = 0 at init (the shared block alone, as LoRA starts), A_i uniform with std
1 / sqrt(in); the rank is `model.options.lora_rank` (default 4: the CPU widths are 16-128; Bae et al. use
ranks up to 512 at d = 2048, initialised from an SVD of trained layers, which training from scratch has not).
The prelude and coda layers are plain pre-norm layers.

Pass i's pair is used in pass i only: the 2 r rank (in + out) parameters per matrix are the third accounting
class N_pass (docs/design.md, "Parameter accounting"). They are scalars to the optimizer (AdamW at lr_hyper,
never decayed): B_i starts at zero, and MuonH would keep a zero matrix at zero. FLOPs: rank (in + out)
multiply-adds a matrix and pass, 6x with gradient (FlopCounterMode's count).
With B = 0 the model is the shared block's, so at r = 1 its logits are the baseline's.
"""

from __future__ import annotations

import math

from loopscale.blocks.form import BlockForm, LayerParts, layer_matrices, layer_passes, uses_flops
from loopscale.blocks.prenorm import prenorm_module
from loopscale.errors import ConfigError
from loopscale.injections.form import N_PASS, SCALAR, Param, module_class, option

RANK = 4  # model.options.lora_rank


def rank(cfg) -> int:
    return option(cfg, "lora_rank", RANK)


class LoraForm(BlockForm):
    name = "lora"
    uses_pass_index = True
    options = ("lora_rank",)

    def params(self, cfg, where: str) -> tuple[Param, ...]:
        norms = super().params(cfg, where)
        if where != "recurrent":
            return norms
        adapters = []
        for name, (out, inp) in layer_matrices(cfg):
            key = name.replace(".", "_")
            adapters.append(Param(f"adapters.{key}.A", (cfg.r, rank(cfg), inp), SCALAR, N_PASS))
            adapters.append(Param(f"adapters.{key}.B", (cfg.r, out, rank(cfg)), SCALAR, N_PASS, zero_init=True))
        return (*norms, *adapters)

    def matmul_flops_per_token(self, cfg, where: str, n_grad: int) -> int:
        if where != "recurrent":
            return 0
        macs = sum(rank(cfg) * (inp + out) for _, (out, inp) in layer_matrices(cfg))
        return uses_flops(cfg, where, n_grad, macs)

    def saved_bytes_per_token(self, cfg, where: str, n_grad: int) -> int:
        if where != "recurrent":
            return 0
        # measured (tests/unit/test_blocks.py), per pass with gradient: autocast's bf16 copy of the fp32 normed input
        # for the A_i of q, k, v and MLP-in (4 of d; the other two read bf16 already) and the bf16 A_i x of all six
        return n_grad * (4 * 2 * cfg.d_model + len(layer_matrices(cfg)) * 2 * rank(cfg))

    def weight_copy_bytes(self, cfg, where: str) -> int:
        if where != "recurrent":
            return 0
        # per pass with gradient: autocast's bf16 copies of the slices A_i, B_i (a slice is no leaf: cast again)
        return layer_passes(cfg, where)[1] * sum(2 * rank(cfg) * (inp + out) for _, (out, inp) in layer_matrices(cfg))

    def check(self, cfg) -> None:
        if rank(cfg) < 1:
            raise ConfigError(f"options.lora_rank={rank(cfg)!r} must be >= 1")

    def build(self, cfg, where: str, parts: LayerParts):
        if where != "recurrent":
            return prenorm_module()(cfg, parts)
        return lora_module()(cfg, parts, rank(cfg), layer_matrices(cfg))


FORM = LoraForm()


@module_class("LoraAdapter")
def adapter_module():
    import torch  # on first use: the spec above is read without torch

    F = torch.nn.functional

    class LoraAdapter(torch.nn.Module):
        """A [r, rank, in] and B [r, out, rank]: pass i adds B_i (A_i x) to W x."""

        def __init__(self, r: int, rank: int, out_features: int, in_features: int):
            super().__init__()
            self.A = torch.nn.Parameter(torch.empty(r, rank, in_features))
            self.B = torch.nn.Parameter(torch.empty(r, out_features, rank))
            self.reset_parameters()

        def reset_parameters(self) -> None:
            a = math.sqrt(3.0 / self.A.shape[-1])  # uniform, std 1 / sqrt(in)
            torch.nn.init.uniform_(self.A, -a, a)
            torch.nn.init.zeros_(self.B)

        def forward(self, x, i: int):
            return F.linear(F.linear(x, self.A[i]), self.B[i])

    return LoraAdapter


@module_class("LoraLayer")
def lora_module():
    import torch  # on first use: the spec above is read without torch

    class LoraLayer(prenorm_module()):
        """A pre-norm layer whose matrices get pass i's adapters: forward(x, cos, sin, i)."""

        def __init__(self, cfg, parts: LayerParts, rank: int, matrices):
            super().__init__(cfg, parts)
            self.adapters = torch.nn.ModuleDict(
                {name.replace(".", "_"): adapter_module()(cfg.r, rank, out, inp) for name, (out, inp) in matrices}
            )

        def reset_parameters(self) -> None:
            """After the model's init (which draws over every matrix): B = 0, A uniform."""
            for adapter in self.adapters.values():
                adapter.reset_parameters()

        def forward(self, x, cos, sin, i: int):
            def adapt(name, inp, out):
                return out + self.adapters[name.replace(".", "_")](inp, i).to(out.dtype)

            return super().forward(x, cos, sin, adapt)

    return LoraLayer


def __getattr__(attribute: str):
    """LoraLayer and LoraAdapter, defined on first use, as attributes of this file for pickle."""
    if attribute == "LoraAdapter":
        return adapter_module.find(attribute)
    return lora_module.find(attribute)
