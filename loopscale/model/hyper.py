"""Hyper-connections around the recurrent block (Zhu et al. 2024, "Hyper-Connections"), per docs/design.md.

K residual lanes replace the single state s. All lanes start as the prelude output e. Pass i (0-based):

    u      = sum_n alpha_i[n] lane_n                      read-out, the block input
    s      = RMSNorm(block(u))                            (done by the model)
    lane_n <- sum_m M_i[n, m] lane_m + beta_i[n] s        lane update
and after the r passes the coda gets sum_n lane_n.

Init alpha_i = one-hot(i mod K), M_i = I, beta_i = 1. Every pass has its own (alpha, M, beta), so the module
holds r * (K^2 + 2 K) scalars, all counted in N_once and all excluded from weight decay.

Identity at init: with M = I and beta = 1 every lane receives every s, so all K lanes stay equal to
e + s_1 + ... + s_i whatever alpha picks; the block input of pass i + 1 is that running sum and the coda
gets K * (e + s_1 + ... + s_r). (For r = 2 the block inputs are e and e + s_1, the same as `additive`.)

Dynamic variant (`hyper_dynamic`, Zhu et al.'s DHC): each coefficient gets an input-dependent correction
    alpha += s_a * tanh(norm(lane_n) . w_alpha),  beta += s_b * tanh(norm(lane_n) . w_beta),
    M[n, :] += s_m * tanh(norm(lane_n) @ W_M)
with one W_dyn = [w_alpha | w_beta | W_M] of shape [d, K + 2] per pass, initialised at zero (so at init the
dynamic module equals the static one) and scales (s_a, s_b, s_m) initialised at 0.01 so W_dyn gets a
gradient. norm is a parameter-free RMSNorm.
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F
from torch import nn

DYNAMIC_SCALE_INIT = 0.01


class HyperConnections(nn.Module):
    """Per-pass lane coefficients and the read-out / update that use them."""

    def __init__(
        self, d_model: int, r: int, n_lanes: int, dynamic: bool = False, eps: float = 1e-6, fp32_lanes: bool = True
    ):
        super().__init__()
        K = n_lanes
        self.K, self.eps, self.fp32_lanes = K, eps, fp32_lanes
        self.alpha = nn.Parameter(F.one_hot(torch.arange(r) % K, K).float())  # [r, K]
        self.M = nn.Parameter(torch.eye(K).repeat(r, 1, 1))  # [r, K, K]
        self.beta = nn.Parameter(torch.ones(r, K))  # [r, K]
        self.dynamic = dynamic
        if dynamic:
            self.W_dyn = nn.Parameter(torch.zeros(r, d_model, K + 2))  # [r, d, K + 2]
            self.dyn_scale = nn.Parameter(torch.full((r, 3), DYNAMIC_SCALE_INIT))  # [r, 3]: s_a, s_b, s_m

    # the injection interface (loopscale/model/injection.py); the state is (lanes, M, beta of the pass read last)
    def start(self, e: torch.Tensor):
        """[B, T, d] -> lanes [B, T, K, d], every lane a copy of e."""
        return e.unsqueeze(-2).expand(*e.shape[:-1], self.K, e.shape[-1]), None, None

    def read(self, state, e: torch.Tensor, i: int):
        """The block input of pass i from the lanes; keeps the pass's M and beta for the update."""
        lanes = state[0]
        alpha, M, beta = self.coefficients(lanes, i)
        return self._read(lanes, alpha), (lanes, M, beta)

    def update(self, state, s: torch.Tensor, i: int):
        lanes, M, beta = state
        return self._update(lanes, s, M, beta), None, None

    def finish(self, state) -> torch.Tensor:
        """After the loop: sum of the lanes, [B, T, K, d] -> [B, T, d]."""
        return state[0].sum(-2)

    def coefficients(self, lanes: torch.Tensor, i: int):
        """alpha, M, beta of pass i: [K], [K, K], [K] (static) or [B, T, K], [B, T, K, K], [B, T, K]."""
        alpha, M, beta = self.alpha[i], self.M[i], self.beta[i]
        if not self.dynamic:
            return alpha, M, beta
        z = torch.tanh(F.rms_norm(lanes, (lanes.shape[-1],), eps=self.eps) @ self.W_dyn[i])  # [B, T, K, K+2]
        s_a, s_b, s_m = self.dyn_scale[i]
        return alpha + s_a * z[..., 0], M + s_m * z[..., 2:], beta + s_b * z[..., 1]

    # The lanes are the residual stream: with fp32_lanes (model.precision=fp32_stream) read and update run in
    # the lanes' dtype (fp32 under bf16 autocast, as the single stream at r = 1), not autocast's bf16; the K-wide
    # mixes are too small to matter for speed. Without it (precision=published) autocast decides, as published.
    def _mixing(self, lanes: torch.Tensor):
        return torch.autocast(lanes.device.type, enabled=False) if self.fp32_lanes else contextlib.nullcontext()

    def _read(self, lanes: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
        """u = sum_n alpha[n] lane_n: [B, T, K, d] -> [B, T, d]."""
        with self._mixing(lanes):
            return (alpha.unsqueeze(-2).to(lanes.dtype) @ lanes).squeeze(-2)  # [.., 1, K] @ [B, T, K, d]

    def _update(self, lanes: torch.Tensor, s: torch.Tensor, M: torch.Tensor, beta: torch.Tensor) -> torch.Tensor:
        """lane_n <- sum_m M[n, m] lane_m + beta[n] s: [B, T, K, d] -> [B, T, K, d]."""
        with self._mixing(lanes):
            dtype = lanes.dtype
            return M.to(dtype) @ lanes + beta.unsqueeze(-1).to(dtype) * s.unsqueeze(-2).to(dtype)
