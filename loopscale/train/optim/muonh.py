"""MuonH: Muon on the hyperball, the published recipe's optimizer for the block and injection matrices.

Per matrix W (docs/design.md, "The published recipe", Optimizer), with c = ||W_0||_F taken at the first step:

    buf <- lerp(buf, g, 1 - mu)                 Nesterov momentum, mu = 0.95
    g   <- lerp(g, buf, mu)
    X   <- g / (1.02 ||g||_F + 1e-6)            so every singular value starts below 1
    X   <- a_i X + (b_i A + c_i A^2) X,  A = X X^T,   i = 1..5 (Polar Express; the Gram matrix on the small side)
    U   <- X * c / ||X||_F                      the update has the matrix's own norm
    W   <- W - lr U
    W   <- W * c / ||W||_F                      back onto the sphere of radius c

so W never leaves its initial Frobenius norm and lr is the relative size of a step. c lives in the optimizer
state ("norm"), so a resumed run keeps projecting onto the radius of the run's first step.

A matrix that starts at zero (c = 0) sits on a sphere of radius 0, a single point: its update is rescaled to
norm 0 and the projection keeps it at 0, so it never moves (no NaN: the divisions are guarded). Zero halves
of a matrix are fine: the injection's [I | 0] has c = ||I||_F = sqrt(d) and both halves move.

Parameter groups with `adamw=True` are stepped by torch's own functional AdamW instead (the embedding, head,
norm gains and hyper-connection scalars of the recipe), so one Optimizer object carries the whole model and
Lightning's gradient accumulation, checkpointing and LambdaLR schedule work unchanged.

The orthogonalisation runs in `ortho_dtype`: bf16 as published on CUDA; fp32 on CPU, where bf16 matmuls are
~10x slower (see `resolve_ortho_dtype`). The norms, the rescale and the weight update are always fp32 (or
the parameter's dtype).
"""

from __future__ import annotations

import torch
from torch.optim.adamw import adamw as adamw_step

from loopscale.errors import ConfigError

# Polar Express coefficients (a, b, c) of the five iterations, as published (docs/design.md).
POLAR_EXPRESS_COEFFS = (
    (8.156554524902461, -22.48329292557795, 15.878769915207462),
    (4.042929935166739, -2.808917465908714, 0.5000178451051316),
    (3.8916678022926607, -2.772484153217685, 0.5060648178503393),
    (3.285753657755655, -2.3681294933425376, 0.46449024233003106),
    (2.3465413258596377, -1.7097828382687081, 0.42323551169305323),
)
NORM_SAFETY = 1.02  # X = g / (1.02 ||g||_F + 1e-6): the spectral norm is <= the Frobenius norm, plus margin
NORM_EPS = 1e-6
TINY = 1e-30  # guards c / ||.|| when a norm is exactly zero
ORTHO_DTYPES = ("auto", "bf16", "fp32")


TORCH_DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}


def resolve_ortho_dtype(option: str, device_type: str) -> str:
    """optim.ortho_dtype -> 'bf16' | 'fp32': auto is bf16 on CUDA (as published) and fp32 elsewhere."""
    if option not in ORTHO_DTYPES:
        raise ConfigError(f"ortho_dtype={option!r} is not allowed; choose one of {', '.join(map(repr, ORTHO_DTYPES))}")
    if option == "auto":
        return "bf16" if device_type == "cuda" else "fp32"
    return option


def polar_express(g: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Approximate orthogonal polar factor of g ([..., m, n]): every singular value is pushed towards 1.

    Returned in `dtype`; the caller rescales it. A wide matrix keeps A = X X^T ([m, m], m < n); a tall one
    is transposed first so A is again the small Gram matrix."""
    tall = g.shape[-2] > g.shape[-1]
    x = g.mT if tall else g
    norm = torch.linalg.matrix_norm(x.float(), keepdim=True)  # Frobenius norm over the last two dims
    x = (x.float() / (NORM_SAFETY * norm + NORM_EPS)).to(dtype)
    for a, b, c in POLAR_EXPRESS_COEFFS:
        A = x @ x.mT
        B = b * A + c * (A @ A)
        x = a * x + B @ x
    return x.mT if tall else x


class MuonH(torch.optim.Optimizer):
    """MuonH for groups of matrices, torch's AdamW for groups marked `adamw=True`.

    Group keys: lr; for MuonH groups momentum (0.95) and ortho_dtype ('bf16' | 'fp32'); for AdamW groups
    betas, eps, weight_decay (0 in the recipe). No weight decay on MuonH groups: the hyperball fixes the norm.
    """

    def __init__(
        self,
        params,
        lr: float = 0.02,
        momentum: float = 0.95,
        ortho_dtype: str = "fp32",
        betas: tuple[float, float] = (0.8, 0.95),
        eps: float = 1e-10,
        weight_decay: float = 0.0,
    ):
        if ortho_dtype not in TORCH_DTYPES:
            raise ValueError(
                f"ortho_dtype={ortho_dtype!r} must be one of {sorted(TORCH_DTYPES)} (resolve 'auto' first)"
            )
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"momentum={momentum!r} must be in [0, 1)")
        defaults = dict(
            lr=lr,
            momentum=momentum,
            ortho_dtype=ortho_dtype,
            betas=betas,
            eps=eps,
            weight_decay=weight_decay,
            adamw=False,
        )
        super().__init__(params, defaults)
        for group in self.param_groups:
            if not group["adamw"]:
                bad = [tuple(p.shape) for p in group["params"] if p.dim() != 2]
                if bad:
                    raise ValueError(
                        f"MuonH groups take 2-D matrices only; group {group.get('name', '?')!r} has "
                        f"shapes {bad} (put them in an adamw=True group)"
                    )

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            if group["adamw"]:
                self._adamw(group)
            else:
                self._muonh(group)
        return loss

    def _muonh(self, group: dict) -> None:
        mu, lr, dtype = group["momentum"], group["lr"], TORCH_DTYPES[group["ortho_dtype"]]
        for p in group["params"]:
            if p.grad is None:
                continue
            state = self.state[p]
            if not state:
                state["norm"] = torch.linalg.matrix_norm(p.float())  # c = ||W_0||_F, fixed for the run
                state["momentum_buffer"] = torch.zeros_like(p)
            c, buf = state["norm"].float(), state["momentum_buffer"]
            buf.lerp_(p.grad, 1 - mu)
            g = p.grad.lerp(buf, mu)  # Nesterov: look ahead along the momentum
            u = polar_express(g, dtype).float()
            u.mul_(c / torch.linalg.matrix_norm(u).clamp_min(TINY))
            w = p.float() - lr * u
            w.mul_(c / torch.linalg.matrix_norm(w).clamp_min(TINY))
            p.copy_(w)

    def _adamw(self, group: dict) -> None:
        params, grads, exp_avgs, exp_avg_sqs, steps = [], [], [], [], []
        for p in group["params"]:
            if p.grad is None:
                continue
            state = self.state[p]
            if not state:  # the same state torch.optim.AdamW keeps
                state["step"] = torch.tensor(0.0)
                state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            params.append(p)
            grads.append(p.grad)
            exp_avgs.append(state["exp_avg"])
            exp_avg_sqs.append(state["exp_avg_sq"])
            steps.append(state["step"])
        if not params:
            return
        beta1, beta2 = group["betas"]
        adamw_step(
            params,
            grads,
            exp_avgs,
            exp_avg_sqs,
            [],
            steps,
            amsgrad=False,
            beta1=beta1,
            beta2=beta2,
            lr=group["lr"],
            weight_decay=group["weight_decay"],
            eps=group["eps"],
            maximize=False,
        )
