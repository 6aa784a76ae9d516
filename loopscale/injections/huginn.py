"""huginn: Huginn's adapter (Geiping et al. 2025, "Scaling up Test-Time Compute with Latent Reasoning";
seal-rg/recurrent-pretraining, recpre/raven_modeling_minimal.py, RavenForCausalLM: `adapter`,
`core_block_forward`, `initialize_state`, `_init_weights`):

    u_i = W [s_i; e],   W one bias-free Linear(2d -> d),   s_0 ~ truncated normal ("like-init")

Published facts carried over: the adapter reads the state FIRST and the prelude output second
(torch.cat([x, input_embeds])); its weight is drawn from a truncated normal with std sqrt(2 / (5 d)), cut at
+-3 std (their `_init_func` "std"); the initial state is a fresh truncated normal of std sqrt(2 / (5 d)) times
their embedding scale sqrt(d), i.e. std sqrt(2/5), cut at +-3 std, in every forward (training and evaluation;
here from the module's own generators, saved in the checkpoint: injections/form.py, random_start).

Where it differs from loopscale's `concat` (u = W [e; s], published by the looped-scaling authors): the order
of the halves (a permutation of W's columns: the same maps), the init (a random W instead of [I | 0], so u is
not e on the first pass), and s_0 (random instead of e). Both run the whole 2d -> d matmul every pass. Huginn's
own loop has no norm between passes beyond its sandwich block's last norm and normalises the loop's output
(ln_f) before the coda; in loopscale the pass norm closes every pass for every form.

At r = 1 it is not the baseline: the single pass reads a random W applied to [s_0; e] with a random s_0.
"""

from __future__ import annotations

import math

from loopscale.injections.form import InjectionForm, Param, SingleStream, module_class, pass_flops, random_start

STATE_STD = math.sqrt(2.0 / 5.0)  # sqrt(2 / (5 d)) x sqrt(d): the like-init state's std


def adapter_std(d_model: int) -> float:
    """sqrt(2 / (5 d)): Huginn's init std of the adapter (and of every matrix but the output projections)."""
    return math.sqrt(2.0 / (5.0 * d_model))


class HuginnForm(InjectionForm):
    name = "huginn"

    def params(self, cfg) -> tuple[Param, ...]:
        return (Param("weight", (cfg.d_model, 2 * cfg.d_model)),)

    def matmul_flops_per_token(self, cfg, n_grad: int) -> int:
        return pass_flops(cfg, n_grad, 2 * cfg.d_model**2)

    def saved_bytes_per_token(self, cfg, n_grad: int) -> int:
        return 4 * cfg.d_model * n_grad  # bf16 [s; e] of every pass with gradient

    def build(self, cfg):
        return huginn_module()(cfg.d_model)


FORM = HuginnForm()


@module_class("HuginnAdapter")
def huginn_module():
    import torch  # on first use: the spec above is read without torch (config, accounting, --help)

    class HuginnAdapter(SingleStream, random_start(), torch.nn.Linear):
        """u = W [s; e], s_0 like-init from the module's own streams (form.random_start). (An nn.Linear, whose
        constructor calls the reset_parameters below.)"""

        def __init__(self, d_model: int):
            super().__init__(2 * d_model, d_model, bias=False)
            self.seed_draws(torch.initial_seed())  # the run's seed (form.DRAW_SEED_SALT)

        def reset_parameters(self) -> None:
            std = adapter_std(self.out_features)
            torch.nn.init.trunc_normal_(self.weight, mean=0.0, std=std, a=-3 * std, b=3 * std)

        def start(self, e):
            return self.initial_state(e, STATE_STD)

        def read(self, s, e, i: int):
            return self(torch.cat((s.to(e.dtype), e), dim=-1)), s

    return HuginnAdapter


__getattr__ = huginn_module.find  # HuginnAdapter, defined on first use, for pickle
