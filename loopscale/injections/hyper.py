"""hyper: hyper-connection lanes around the recurrent block (Zhu et al. 2024, "Hyper-Connections"), per
docs/design.md. The published probe (model.recipe=hyper, K = 2). Options: model.options.hyper_lanes (K, default
2) and model.options.hyper_dynamic (default false).

K residual lanes replace the single state s. All lanes start as the prelude output e. Pass i (0-based):

    u      = sum_n alpha_i[n] lane_n                      read-out, the block input
    s      = RMSNorm(block(u))                            (done by the model)
    lane_n <- sum_m M_i[n, m] lane_m + beta_i[n] s        lane update
and after the r passes the coda gets sum_n lane_n.

Init alpha_i = one-hot(i mod K), M_i = I, beta_i = 1. Every pass has its own (alpha, M, beta), so the module
holds r * (K^2 + 2 K) scalars, all counted in N_once and all excluded from weight decay (AdamW at lr_hyper).

Identity at init: with M = I and beta = 1 every lane receives every s, so all K lanes stay equal to
e + s_1 + ... + s_i whatever alpha picks; the block input of pass i + 1 is that running sum and the coda
gets K * (e + s_1 + ... + s_r). (For r = 2 the block inputs are e and e + s_1, the same as `additive`.)

Dynamic variant (option `hyper_dynamic`, Zhu et al.'s DHC): each coefficient gets an input-dependent correction
    alpha += s_a * tanh(norm(lane_n) . w_alpha),  beta += s_b * tanh(norm(lane_n) . w_beta),
    M[n, :] += s_m * tanh(norm(lane_n) @ W_M)
with one W_dyn = [w_alpha | w_beta | W_M] of shape [d, K + 2] per pass, initialised at zero (so at init the
dynamic module equals the static one) and scales (s_a, s_b, s_m) initialised at 0.01 so W_dyn gets a
gradient. norm is a parameter-free RMSNorm.

Refused, as published: r = 1 (one pass of lanes is the plain model with extra scalars), one lane, and truncated
backprop (the lane coefficients of a truncated pass would never get a gradient).
FLOPs per pass: the alpha read-out K d multiply-adds and the lane mix K^2 d (+ the dynamic projection K d (K + 2)),
always with gradient; F adds the beta write-in K d, as published, so the mixing costs (K^2 + 2 K) d a pass.
"""

from __future__ import annotations

import contextlib

from loopscale.errors import ConfigError
from loopscale.injections.form import SCALAR, InjectionForm, Param, module_class, option, pass_flops, truncated

DYNAMIC_SCALE_INIT = 0.01


def lanes(cfg) -> int:
    """K, the residual lanes (model.options.hyper_lanes)."""
    return option(cfg, "hyper_lanes", 2)


def dynamic(cfg) -> bool:
    """Input-dependent tanh corrections (model.options.hyper_dynamic; Zhu et al. 2024), zero-initialised."""
    return option(cfg, "hyper_dynamic", False)


class HyperForm(InjectionForm):
    name = "hyper"
    needs_loop = True
    truncatable = False
    looped_injection = False
    options = ("hyper_lanes", "hyper_dynamic")

    def params(self, cfg) -> tuple[Param, ...]:
        r, K, d = cfg.r, lanes(cfg), cfg.d_model
        static = Param("alpha", (r, K), SCALAR), Param("M", (r, K, K), SCALAR), Param("beta", (r, K), SCALAR)
        if not dynamic(cfg):
            return static
        return *static, Param("W_dyn", (r, d, K + 2), SCALAR, zero_init=True), Param("dyn_scale", (r, 3), SCALAR)

    def matmul_flops_per_token(self, cfg, n_grad: int) -> int:
        r, K, d = cfg.r, lanes(cfg), cfg.d_model
        always = r * K * K * d + (r * K * d * (K + 2) if dynamic(cfg) else 0)  # lane mix; normed lanes @ W_dyn
        return pass_flops(cfg, n_grad, K * d) + 6 * always  # the alpha read-out per pass

    def forward_flops_per_token(self, cfg) -> int:
        """One forward, every pass: the lane mix (and W_dyn) and the alpha read-out, 2 FLOPs a multiply-add (the
        matrix-group default counts no SCALAR parameter, so it would leave these out)."""
        r, K, d = cfg.r, lanes(cfg), cfg.d_model
        return 2 * r * (K * K * d + K * d + (K * d * (K + 2) if dynamic(cfg) else 0))

    def elementwise_flops_per_token(self, cfg, n_grad: int) -> int:
        return 6 * cfg.r * lanes(cfg) * cfg.d_model  # beta (x) s, every pass with gradient

    def saved_bytes_per_token(self, cfg, n_grad: int) -> int:
        K, d = lanes(cfg), cfg.d_model
        # fp32 lanes read / updated and the pass outputs for beta; the first pass reads the lanes as K views of
        # e's one storage, so K - 1 of those copies are never stored
        return ((2 * cfg.r - 1) * K - (K - 1)) * 4 * d + cfg.r * 4 * d

    def check(self, cfg) -> None:
        if lanes(cfg) < 2:
            raise ConfigError(f"hyper_lanes={lanes(cfg)!r}: hyper-connections need at least 2 lanes")
        if truncated(cfg):
            raise ConfigError(
                f"injection='hyper' needs full backprop (bptt_k={cfg.bptt_k} < r={cfg.r}): the lane "
                "coefficients of the truncated passes would never get a gradient"
            )

    def build(self, cfg):
        fp32_lanes = cfg.precision == "fp32_stream"
        return hyper_module()(cfg.d_model, cfg.r, lanes(cfg), dynamic(cfg), cfg.norm_eps, fp32_lanes)


FORM = HyperForm()


@module_class("HyperConnections")
def hyper_module():
    """The module class; longer than 60 lines because it holds the whole class, defined here so that the form
    above is read without torch."""
    import torch  # on first use: the spec above is read without torch (config, accounting, --help)

    F = torch.nn.functional

    class HyperConnections(torch.nn.Module):
        """Per-pass lane coefficients and the read-out / update that use them. The state is (lanes, M, beta of
        the pass read last)."""

        def __init__(self, d_model: int, r: int, n_lanes: int, dynamic=False, eps=1e-6, fp32_lanes=True):
            super().__init__()
            K = n_lanes
            self.K, self.eps, self.fp32_lanes, self.dynamic = K, eps, fp32_lanes, dynamic
            self.alpha = torch.nn.Parameter(torch.empty(r, K))
            self.M = torch.nn.Parameter(torch.empty(r, K, K))
            self.beta = torch.nn.Parameter(torch.empty(r, K))
            if dynamic:
                self.W_dyn = torch.nn.Parameter(torch.empty(r, d_model, K + 2))
                self.dyn_scale = torch.nn.Parameter(torch.empty(r, 3))  # s_a, s_b, s_m
            self.reset_parameters()

        def reset_parameters(self) -> None:
            """alpha_i = one-hot(i mod K), M_i = I, beta_i = 1; W_dyn = 0 and the scales 0.01 (no draw)."""
            r, K = self.alpha.shape
            with torch.no_grad():
                self.alpha.copy_(F.one_hot(torch.arange(r) % K, K))
                self.M.copy_(torch.eye(K).repeat(r, 1, 1))
                self.beta.fill_(1.0)
                if self.dynamic:
                    self.W_dyn.zero_()
                    self.dyn_scale.fill_(DYNAMIC_SCALE_INIT)

        def start(self, e):
            """[B, T, d] -> lanes [B, T, K, d], every lane a copy of e."""
            return e.unsqueeze(-2).expand(*e.shape[:-1], self.K, e.shape[-1]), None, None

        def read(self, state, e, i: int):
            """The block input of pass i from the lanes; keeps the pass's M and beta for the update."""
            lanes = state[0]
            alpha, M, beta = self.coefficients(lanes, i)
            return self._read(lanes, alpha), (lanes, M, beta)

        def update(self, state, s, i: int):
            lanes, M, beta = state
            return self._update(lanes, s, M, beta), None, None

        def finish(self, state):
            """After the loop: sum of the lanes, [B, T, K, d] -> [B, T, d]."""
            return state[0].sum(-2)

        def coefficients(self, lanes, i: int):
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
        def _mixing(self, lanes):
            return torch.autocast(lanes.device.type, enabled=False) if self.fp32_lanes else contextlib.nullcontext()

        def _read(self, lanes, alpha):
            """u = sum_n alpha[n] lane_n: [B, T, K, d] -> [B, T, d]."""
            with self._mixing(lanes):
                return (alpha.unsqueeze(-2).to(lanes.dtype) @ lanes).squeeze(-2)  # [.., 1, K] @ [B, T, K, d]

        def _update(self, lanes, s, M, beta):
            """lane_n <- sum_m M[n, m] lane_m + beta[n] s: [B, T, K, d] -> [B, T, K, d]."""
            with self._mixing(lanes):
                dtype = lanes.dtype
                return M.to(dtype) @ lanes + beta.unsqueeze(-1).to(dtype) * s.unsqueeze(-2).to(dtype)

    return HyperConnections


__getattr__ = hyper_module.find  # HyperConnections, defined on first use, for pickle
