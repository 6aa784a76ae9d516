"""What loopscale knows about one block form (one transformer layer), from a ModelConfig alone and without torch.

A form is one module of loopscale/blocks/ named after it, with `FORM = <a BlockForm>` (registry.py finds it).
Every layer holds the same attention and MLP matrices (`layer_matrices`: q, k, v, attention-out, MLP-in,
MLP-out, counted by loopscale/model/accounting.py); a form states what it adds, for a layer at `where`
(prelude, recurrent or coda; the recurrent block's layers run r passes, the others one):

    params(cfg, where)                          its own parameters (norm gains, adapters), named as in the
                                                layer's named_parameters(), each with its optimizer group;
                                                a parameter counts with its layer (N_once in prelude and coda,
                                                N_rec in the recurrent block) unless declared N_PASS
    matmul_flops_per_token(cfg, where, n_grad)  its own matmuls over the layer's passes (FlopCounterMode's count)
    elementwise_flops_per_token(cfg, where, n_grad)  its gains over the layer's passes (F, not FlopCounterMode)
    saved_bytes_per_token(cfg, where, n_grad)   what autograd keeps beyond the pre-norm layer's bytes
                                                (loopscale/model/memory.py), over the layer's passes
    weight_copy_bytes(cfg, where)               bf16 copies of its own weights kept for backward, per forward
    residual_scale(cfg, where)                  the factor on the layer's residual writes (1: none)
    check(cfg)                                  a ConfigError for a model it cannot train
    build(cfg, where, parts)                    the layer's nn.Module, from the model's parts

with n_grad the layer's passes with gradient (the last bptt_k of r in the recurrent block; 1 elsewhere). The
module's forward is (x, cos, sin), or (x, cos, sin, i) with the pass index i when `uses_pass_index`; its
`reset_parameters()`, when it has one, runs after the model's own init (which may draw over its parameters).
"""

from __future__ import annotations

from dataclasses import dataclass

from loopscale.injections.form import NORM, Param

WHERE = ("prelude", "recurrent", "coda")


@dataclass(frozen=True)
class LayerParts:
    """What a block form builds its layer from (loopscale/model/transformer.py's classes): attention(cfg),
    mlp(cfg), norm(d, eps). Their forwards take `adapt(name, input, output)`, the hook per-pass adapters use."""

    attention: type
    mlp: type
    norm: type


def layer_passes(cfg, where: str) -> tuple[int, int]:
    """(passes, passes with gradient) of one layer at `where`: r and the last bptt_k (or r) in the recurrent
    block, (1, 1) in the prelude and coda."""
    if where != "recurrent":
        return 1, 1
    return cfg.r, cfg.r if cfg.bptt_k is None else cfg.bptt_k


def uses_flops(cfg, where: str, n_grad: int, macs: int) -> int:
    """FLOPs of `macs` multiply-adds a token in every pass of one layer at `where`: 6x a pass with gradient,
    2x a pass under no_grad."""
    passes, _ = layer_passes(cfg, where)
    return (6 * n_grad + 2 * (passes - n_grad)) * macs


def layer_matrices(cfg) -> tuple[tuple[str, tuple[int, int]], ...]:
    """(name, [out, in]) of every matrix of a layer, as nn.Linear stores them: q, k, v, attention-out, MLP-in
    (gate and up fused under SwiGLU), MLP-out."""
    d, h = cfg.d_model, cfg.mlp_hidden
    fc_out = h if cfg.mlp == "relu2" else 2 * h
    attention = tuple((f"attn.{n}", (d, d)) for n in ("q", "k", "v", "proj"))
    return (*attention, ("mlp.fc", (fc_out, d)), ("mlp.proj", (d, h)))


class BlockForm:
    """The torch-free spec of one block form; the defaults are the pre-norm layer's: two RMSNorm gains."""

    name: str = ""
    uses_pass_index = False  # forward(x, cos, sin, i): the layer reads the pass index (recurrent block only)
    options: tuple[str, ...] = ()  # the keys of ModelConfig.options it reads
    norm_names: tuple[str, ...] = ("attn_norm", "mlp_norm")

    def params(self, cfg, where: str) -> tuple[Param, ...]:
        return tuple(Param(f"{n}.weight", (cfg.d_model,), NORM) for n in self.norm_names)

    def matmul_flops_per_token(self, cfg, where: str, n_grad: int) -> int:
        return 0

    def elementwise_flops_per_token(self, cfg, where: str, n_grad: int) -> int:
        """The norm gains, d each, in every pass (the published convention: 6x with gradient, 2x without)."""
        return uses_flops(cfg, where, n_grad, len(self.norm_names) * cfg.d_model)

    def saved_bytes_per_token(self, cfg, where: str, n_grad: int) -> int:
        return 0

    def weight_copy_bytes(self, cfg, where: str) -> int:
        return 0

    def residual_scale(self, cfg, where: str) -> float:
        return 1.0

    def check(self, cfg) -> None:
        """Raise ConfigError for a config this form cannot train (called by ModelConfig)."""

    def build(self, cfg, where: str, parts: LayerParts):
        raise NotImplementedError(f"block form {self.name!r} defines no module (build)")
