"""loop_index: a loop-index (pass) embedding added to the block input of every pass, over the looped injection:

    u_i = inject(e, s_i) + p_i,   p = [p_0, ..., p_{r-1}] one learned vector of size d per pass, 0 at init

with inject the model's looped injection (model.looped_injection: linear on the CPU presets, concat on the
paper's). The per-pass embedding of the relaxed recursive designs (Bae et al. 2024, "Relaxed Recursive
Transformers", arXiv 2410.20672: a recursion (loop) index told to the shared block; the design brief's
"loop-index embedding added to the state at each pass").

p_i is used in pass i only: its r d parameters are the third accounting class N_pass (docs/design.md,
"Parameter accounting"), used once per token each, fitted by the looped-pass law N_once + N_pass + r^phi N_rec.
They are scalars to the optimizer (AdamW at lr_hyper, never decayed: a zero matrix would never leave its
radius-0 sphere under MuonH). The add costs no FLOPs in the published convention (like a residual add or a
bias: nothing multiplies). With p = 0 at init the model is the looped injection's, so at r = 1 (identity init
of the injection, p_0 = 0) its logits are the baseline's.
"""

from __future__ import annotations

from dataclasses import replace

from loopscale.errors import ConfigError
from loopscale.injections.form import N_PASS, SCALAR, InjectionForm, Param, module_class, truncated
from loopscale.injections.registry import form as injection_form


def inner_form(cfg) -> InjectionForm:
    """The looped injection this form adds its embedding to."""
    return injection_form(cfg.looped_injection)


class LoopIndexForm(InjectionForm):
    name = "loop_index"
    looped_injection = False  # it wraps the looped injection: it cannot be it

    def params(self, cfg) -> tuple[Param, ...]:
        inner = tuple(replace(p, name=f"inner.{p.name}") for p in inner_form(cfg).params(cfg))
        return (
            Param("index", (cfg.r, cfg.d_model), SCALAR, N_PASS, zero_init=True),
            *inner,
        )  # own parameters first, as torch lists them

    def matmul_flops_per_token(self, cfg, n_grad: int) -> int:
        return inner_form(cfg).matmul_flops_per_token(cfg, n_grad)

    def elementwise_flops_per_token(self, cfg, n_grad: int) -> int:
        return inner_form(cfg).elementwise_flops_per_token(cfg, n_grad)

    def forward_flops_per_token(self, cfg) -> int:
        return inner_form(cfg).forward_flops_per_token(cfg)

    def saved_bytes_per_token(self, cfg, n_grad: int) -> int:
        return inner_form(cfg).saved_bytes_per_token(cfg, n_grad)  # the add keeps nothing for its backward

    def weight_copy_bytes(self, cfg) -> int:
        return inner_form(cfg).weight_copy_bytes(cfg)

    def check(self, cfg) -> None:
        inner = inner_form(cfg)
        if truncated(cfg) and not inner.truncatable:
            raise ConfigError(f"injection='loop_index' over looped_injection={inner.name!r} cannot truncate backprop")
        inner.check(cfg)

    def build(self, cfg):
        return loop_index_module()(inner_form(cfg).build(cfg), cfg.r, cfg.d_model)


FORM = LoopIndexForm()


@module_class("LoopIndex")
def loop_index_module():
    import torch  # on first use: the spec above is read without torch (config, accounting, --help)

    class LoopIndex(torch.nn.Module):
        """The inner injection's state, and p_i added to its block input of pass i."""

        def __init__(self, inner, r: int, d_model: int):
            super().__init__()
            self.inner = inner
            self.index = torch.nn.Parameter(torch.zeros(r, d_model))

        def reset_parameters(self) -> None:
            self.inner.reset_parameters()
            torch.nn.init.zeros_(self.index)

        def start(self, e):
            return self.inner.start(e)

        def read(self, state, e, i: int):
            u, state = self.inner.read(state, e, i)
            return u + self.index[i].to(u.dtype), state

        def update(self, state, s, i: int):
            return self.inner.update(state, s, i)

        def finish(self, state):
            return self.inner.finish(state)

    return LoopIndex


__getattr__ = loop_index_module.find  # LoopIndex, defined on first use, for pickle
