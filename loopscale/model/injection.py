"""How the prelude output e enters every pass of the recurrent block (docs/design.md, "Injection"): one interface
that drives the loop for every form, so the loop itself never asks which form it runs.

    state = inj.start(e)                 before the first pass
    u, state = inj.read(state, e, i)     the block input of pass i (0-based)
    state = inj.update(state, s, i)      after the pass, s = RMSNorm(block(u))
    x = inj.finish(state)                the coda's input

Forms (model.injection):
    passthrough  u = s, s_0 = e (the r = 1 model)
    additive     u = s + e, s_0 = 0 (so the first pass sees e)
    linear       u = W_e e + W_s s, s_0 = e; W_e e computed once per forward; W_e = I, W_s = 0 at init
    concat       u = W [e; s], s_0 = e; one Linear(2d -> d), W = [I | 0] at init (published)
    hyper        K residual lanes (hyper.py: HyperConnections implements the same four methods)
At init every form gives u = e on the first pass. The state of the four single-stream forms is s itself.
"""

from __future__ import annotations

import torch
from torch import nn

from loopscale.config.model import ModelConfig
from loopscale.model.hyper import HyperConnections


class Passthrough(nn.Module):
    """u = s, s_0 = e: no parameters."""

    def start(self, e: torch.Tensor) -> torch.Tensor:
        return e

    def read(self, s: torch.Tensor, e: torch.Tensor, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return s, s

    def update(self, state: torch.Tensor, s: torch.Tensor, i: int) -> torch.Tensor:
        return s

    def finish(self, s: torch.Tensor) -> torch.Tensor:
        return s


class Additive(Passthrough):
    """u = s + e, s_0 = 0: no parameters."""

    def start(self, e: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(e)

    def read(self, s: torch.Tensor, e: torch.Tensor, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return s + e, s


class LinearInjection(Passthrough):
    """u = W [e; s] with W = [W_e | W_s] ([d, 2d]) split in two so W_e e is computed once per forward.
    The state is (W_e e, s)."""

    def __init__(self, d_model: int):
        super().__init__()
        self.from_e = nn.Linear(d_model, d_model, bias=False)  # W_e, init I
        self.from_s = nn.Linear(d_model, d_model, bias=False)  # W_s, init 0

    def reset_parameters(self) -> None:
        nn.init.eye_(self.from_e.weight)
        nn.init.zeros_(self.from_s.weight)

    def start(self, e: torch.Tensor):
        return self.from_e(e), e  # W_e e, with gradient, once

    def read(self, state, e: torch.Tensor, i: int):
        e_proj, s = state  # each term in the stream's dtype before the sum, as the stream itself
        return e_proj.to(e.dtype) + self.from_s(s).to(e.dtype), state

    def update(self, state, s: torch.Tensor, i: int):
        return state[0], s

    def finish(self, state) -> torch.Tensor:
        return state[1]


class ConcatInjection(nn.Linear):
    """u = W [e; s]: one bias-free Linear(2d -> d) on the concatenation, W = [I | 0] at init so u = e.
    The published form; MuonH sees one [d, 2d] matrix (split in two, the W_s half would start at norm 0).
    (An nn.Linear, so building it draws from the RNG as it always did: the model's init stays bit-identical.)"""

    start, update, finish = Passthrough.start, Passthrough.update, Passthrough.finish

    def __init__(self, d_model: int):
        super().__init__(2 * d_model, d_model, bias=False)

    def reset_parameters(self) -> None:
        with torch.no_grad():
            self.weight.zero_()
            self.weight[:, : self.out_features].copy_(torch.eye(self.out_features))

    def read(self, s: torch.Tensor, e: torch.Tensor, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self(torch.cat((e, s), dim=-1)), s  # the full 2d -> d matmul on every pass


def make_injection(cfg: ModelConfig) -> nn.Module:
    """The injection module of `cfg` (every one has start / read / update / finish)."""
    d = cfg.d_model
    if cfg.injection == "linear":
        return LinearInjection(d)
    if cfg.injection == "concat":
        return ConcatInjection(d)
    if cfg.injection == "hyper":
        fp32_lanes = cfg.precision == "fp32_stream"
        return HyperConnections(d, cfg.r, cfg.hyper_lanes, cfg.hyper_dynamic, cfg.norm_eps, fp32_lanes=fp32_lanes)
    return Additive() if cfg.injection == "additive" else Passthrough()
