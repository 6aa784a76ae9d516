"""parcae: Parcae's diagonal "LTI" injection (Prairie et al. 2026, arXiv 2604.12946; sandyresearch/parcae,
parcae_lm/modules/injection.py, DiagonalInjection; inits in parcae_lm/models/parcae/init.py):

    u_i = a (.) s_i + softplus(dt) (.) (B e_n),   a = exp(-softplus(dt) (.) exp(A_log)),   e_n = RMSNorm(e)

with A_log and dt vectors of size d, B a d x d matrix, and a norm on the prelude's output (their
`prelude_norm`, True in every released Parcae config). Every component of the decay factor a lies in (0, 1)
by construction (softplus(dt) > 0, exp(A_log) > 0), so the state's own recurrence is a contraction; the
largest component is logged at every evaluation (`evaluation_metrics`: design/max_decay).

Published facts carried over: A_log = 0 at init (A = 1), dt set so that a = sqrt(1/5) (their default
`ssm_decay`: softplus(dt) = ln sqrt(5) = 0.805), B = I; no weight decay on A_log, dt and B (their
`_no_weight_decay`); the initial state drawn "like-init" (a truncated normal, their `state_init` of the
released configs; here from the module's own generators, saved in the checkpoint: injections/form.py,
random_start) with std `parcae_state_std` (default sqrt(2/5), the std Huginn's like-init gives an
embedding of unit-scale width; Parcae's own std comes from its init strategy).
Where loopscale differs: its pass norm closes every pass (s = RMSNorm(block(u)), as for every form), and
the coda reads the last state directly (Parcae adds a d x d projection C, identity at init: left out).

softplus(dt) (.) B e_n is computed once per forward (e does not change across passes): B e_n is one d x d matmul
a forward, always with gradient; per pass the decay multiplies s (d elementwise, counted like a norm gain).
At r = 1 it is not the baseline: u = 0.45 s_0 + 0.80 e_n with a random s_0.
"""

from __future__ import annotations

import math

from loopscale.errors import ConfigError
from loopscale.injections.form import (
    NORM,
    SCALAR,
    InjectionForm,
    Param,
    module_class,
    option,
    pass_flops,
    random_start,
)

DECAY_INIT = math.sqrt(1.0 / 5.0)  # Parcae's default ssm_decay: the decay factor at init
STATE_STD = math.sqrt(2.0 / 5.0)  # like-init std of the initial state (model.options.parcae_state_std)


class ParcaeForm(InjectionForm):
    name = "parcae"
    options = ("parcae_state_std",)

    def params(self, cfg) -> tuple[Param, ...]:
        d = cfg.d_model
        return (
            Param("A_log", (d,), SCALAR, zero_init=True),
            Param("dt", (d,), SCALAR),
            Param("B", (d, d), decay=False),  # a matrix (MuonH on its sphere of radius sqrt(d)), never decayed
            Param("prelude_norm.weight", (d,), NORM),
        )

    def matmul_flops_per_token(self, cfg, n_grad: int) -> int:
        return 6 * cfg.d_model**2  # B e_n once a forward, with gradient

    def elementwise_flops_per_token(self, cfg, n_grad: int) -> int:
        d = cfg.d_model
        return 6 * 2 * d + pass_flops(cfg, n_grad, d)  # the norm gain and softplus(dt) once; the decay every pass

    def forward_flops_per_token(self, cfg) -> int:
        return 2 * cfg.d_model**2  # B e_n once

    def saved_bytes_per_token(self, cfg, n_grad: int) -> int:
        # measured (tests/unit/test_memory_forms_exact.py): the prelude norm's fp32 input, its fp32 x * rsqrt and the
        # rsqrt itself (one fp32 scalar a token, saved twice in one storage), B's bf16 input (linear keeps no output),
        # the fp32 B e_n that softplus(dt) multiplies, and per pass with gradient the fp32 s the decay multiplies
        d = cfg.d_model
        return (4 + 4 + 2 + 4) * d + 4 + 4 * d * n_grad

    def weight_copy_bytes(self, cfg) -> int:
        # B's bf16 copy, and the fp32 vectors made from dt and A_log once a forward (softplus(dt) twice, exp(A_log),
        # their product), kept for backward
        return 2 * cfg.d_model**2 + 4 * 4 * cfg.d_model

    def check(self, cfg) -> None:
        """The like-init std a finite number > 0 (a negative one failed at model build with a traceback)."""
        value = (getattr(cfg, "options", None) or {}).get("parcae_state_std", STATE_STD)
        try:
            std = float(value)
        except (TypeError, ValueError):
            std = math.nan
        if not (math.isfinite(std) and std > 0):
            raise ConfigError(f"model.options.parcae_state_std={value!r} must be a finite number > 0 (s_0's std)")

    def build(self, cfg):
        return parcae_module()(cfg.d_model, cfg.norm_eps, option(cfg, "parcae_state_std", STATE_STD))


FORM = ParcaeForm()


@module_class("ParcaeInjection")
def parcae_module():
    import torch  # on first use: the spec above is read without torch (config, accounting, --help)

    F = torch.nn.functional

    class ParcaeInjection(random_start(), torch.nn.Module):
        """The state is (a, softplus(dt) (.) B e_n, s): the decay and the drive computed once a forward, and the
        stream."""

        def __init__(self, d_model: int, eps: float, state_std: float):
            super().__init__()
            self.eps, self.state_std = eps, state_std
            self.A_log = torch.nn.Parameter(torch.empty(d_model))
            self.dt = torch.nn.Parameter(torch.empty(d_model))
            self.B = torch.nn.Parameter(torch.empty(d_model, d_model))
            self.prelude_norm = torch.nn.Module()
            self.prelude_norm.weight = torch.nn.Parameter(torch.empty(d_model))
            self.reset_parameters()
            self.seed_draws(torch.initial_seed())  # s_0's streams (form.random_start), from the run's seed

        def reset_parameters(self) -> None:
            """A_log = 0, softplus(dt) = -ln(DECAY_INIT), B = I, the norm gain 1 (no draw from the RNG)."""
            step = -math.log(DECAY_INIT)
            with torch.no_grad():
                self.A_log.zero_()
                self.dt.fill_(step + math.log(-math.expm1(-step)))  # the inverse of softplus
                self.B.copy_(torch.eye(self.B.shape[0]))
                self.prelude_norm.weight.fill_(1.0)

        def decay(self):
            """a = exp(-softplus(dt) exp(A_log)), each component in (0, 1)."""
            return torch.exp(-F.softplus(self.dt) * torch.exp(self.A_log))

        def start(self, e):
            e_n = F.rms_norm(e, (e.shape[-1],), self.prelude_norm.weight, self.eps)
            drive = F.softplus(self.dt) * F.linear(e_n, self.B).to(e.dtype)
            return self.decay(), drive, self.initial_state(e, self.state_std)

        def read(self, state, e, i: int):
            decay, drive, s = state
            return decay * s + drive, state

        def update(self, state, s, i: int):
            return state[0], state[1], s

        def finish(self, state):
            return state[2]

        def evaluation_metrics(self) -> dict[str, float]:
            """design/max_decay: the largest decay factor, < 1 by construction (Parcae's get_spectral_norm)."""
            with torch.no_grad():
                return {"max_decay": float(self.decay().max())}

    return ParcaeInjection


__getattr__ = parcae_module.find  # ParcaeInjection, defined on first use, for pickle
