"""MuonH: Muon on the hyperball, the published recipe's optimizer for the block and injection matrices.

Per matrix W (docs/design.md, "The published recipe", Optimizer), with c = ||W_0||_F taken at the first step:

    buf <- lerp(buf, g, 1 - mu)                 Nesterov momentum, mu = 0.95
    g   <- lerp(g, buf, mu)
    X   <- g / (1.02 ||g||_F + 1e-6)            so every singular value starts below 1
    X   <- a_i X + (b_i A + c_i A^2) X,  A = X X^T,   i = 1..5 (Polar Express; the Gram matrix on the small side:
                                                A = X^T X and X <- a_i X + X (b_i A + c_i A^2) for a tall X)
    U   <- X * c / ||X||_F                      the update has the matrix's own norm
    W   <- W - lr U
    W   <- W * c / ||W||_F                      back onto the sphere of radius c

so W never leaves its initial Frobenius norm and lr is the relative size of a step. c lives in the optimizer
state ("norm"), so a resumed run keeps projecting onto the radius of the run's first step.

The matrices of a group that share a shape are stacked and orthogonalised by one batched Polar Express (as the
published optimizer does): one chain of ~25 batched ops per shape instead of one per matrix, which is what a
step of many small matrices costs on a CPU. Every matrix keeps its own c and momentum (the state stays per
parameter, so checkpoints are unchanged); the group's lr is every matrix's lr.

A matrix that starts at zero (c = 0) sits on a sphere of radius 0, a single point: its update is rescaled to
norm 0 and the projection keeps it at 0, so it never moves (no NaN: the divisions are guarded). Zero halves
of a matrix are fine: the injection's [I | 0] has c = ||I||_F = sqrt(d) and both halves move.

Parameter groups with `adamw=True` are stepped by torch's own functional AdamW instead (the embedding, head,
norm gains and hyper-connection scalars of the recipe), so one Optimizer object carries the whole model and
Lightning's gradient accumulation, checkpointing and LambdaLR schedule work unchanged.

The orthogonalisation runs in `ortho_dtype`: bf16 as published on CUDA; fp32 on CPU, where bf16 matmuls are
~10x slower (see `resolve_ortho_dtype`). Two arithmetics (`arithmetic`, from model.precision):
- "fp32_norms" (the default): g is normalised in fp32 before the cast to ortho_dtype, and the rescale, the lr
  product and the projection run in fp32;
- "published" (model.precision=published): the published code's operations in their order and dtypes, run
  eagerly: g cast to ortho_dtype before it is normalised, the update's rescale and the lr product in
  ortho_dtype (lr and mu as fp32 0-D values, as published), the projection in the parameter's dtype. With
  bf16 every matrix is then bit-identical to the published optimizer's (tests/unit/test_authors_golden.py);
  the two arithmetics differ by 2-5% of one step's update in bf16 and agree to fp32 rounding in fp32.
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
PUBLISHED_TINY = 1e-10  # the published code's guard (clamp_min) of the same divisions
ORTHO_DTYPES = ("auto", "bf16", "fp32")
ARITHMETICS = ("fp32_norms", "published")


TORCH_DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}


def resolve_ortho_dtype(option: str, device_type: str) -> str:
    """optim.ortho_dtype -> 'bf16' | 'fp32': auto is bf16 on CUDA (as published) and fp32 elsewhere."""
    if option not in ORTHO_DTYPES:
        raise ConfigError(f"ortho_dtype={option!r} is not allowed; choose one of {', '.join(map(repr, ORTHO_DTYPES))}")
    if option == "auto":
        return "bf16" if device_type == "cuda" else "fp32"
    return option


def arithmetic_for(model_precision: str) -> str:
    """MuonH's arithmetic for a model.precision: 'published' for published, else 'fp32_norms'."""
    return "published" if model_precision == "published" else "fp32_norms"


def polar_express(g: torch.Tensor, dtype: torch.dtype = torch.float32, published: bool = False) -> torch.Tensor:
    """Approximate orthogonal polar factor of g ([..., m, n], a stack of matrices of one shape): every singular
    value is pushed towards 1. Returned in `dtype`; the caller rescales it.

    The Gram matrix is the small one: A = X X^T for a wide X, A = X^T X for a tall one. published: g is cast to
    `dtype` before it is normalised (the published order); else it is normalised in fp32."""
    if published:
        x = g.to(dtype)
        x = x / (x.norm(dim=(-2, -1), keepdim=True) * NORM_SAFETY + NORM_EPS)
    else:
        x = g.float()
        x = (x / (NORM_SAFETY * torch.linalg.matrix_norm(x, keepdim=True) + NORM_EPS)).to(dtype)
    tall = g.shape[-2] > g.shape[-1]
    if published:  # the published operations, one by one
        for a, b, c in POLAR_EXPRESS_COEFFS:
            if tall:
                A = x.mT @ x
                x = a * x + x @ (b * A + c * (A @ A))
            else:
                A = x @ x.mT
                x = a * x + (b * A + c * (A @ A)) @ x
        return x
    # the same iteration with each scaled product fused into one kernel: b A + c A A and a X + B X (or X B)
    x3 = x.reshape(-1, *x.shape[-2:])
    for a, b, c in POLAR_EXPRESS_COEFFS:
        A = torch.bmm(x3.mT, x3) if tall else torch.bmm(x3, x3.mT)
        B = torch.baddbmm(A, A, A, beta=b, alpha=c)
        x3 = torch.baddbmm(x3, x3, B, beta=a) if tall else torch.baddbmm(x3, B, x3, beta=a)
    return x3.reshape(x.shape)


def hyperball_step_(
    W: torch.Tensor, g: torch.Tensor, c: torch.Tensor, lr: float, dtype: torch.dtype, published: bool
) -> None:
    """One MuonH update of a stack of matrices W ([K, m, n], updated in place) from their Nesterov gradients g
    and radii c ([K, 1, 1], fp32): orthogonalise, rescale to c, step by lr, project back onto radius c."""
    X = polar_express(g, dtype, published)
    if published:  # the published dtypes: rescale and lr product in X's dtype, projection in W's
        lr_t = torch.tensor(lr, dtype=torch.float32).to(X.dtype)  # lr as the published fp32 0-D value
        X = X * (c.to(X.dtype) / X.norm(dim=(-2, -1), keepdim=True).clamp_min(PUBLISHED_TINY))
        W.sub_(lr_t * X)
        W.mul_(c.to(W.dtype) / W.norm(dim=(-2, -1), keepdim=True).clamp_min(PUBLISHED_TINY))
        return
    U = X.float()
    U.mul_(c / torch.linalg.matrix_norm(U, keepdim=True).clamp_min(TINY))
    W.sub_(U, alpha=lr)
    W.mul_(c / torch.linalg.matrix_norm(W, keepdim=True).clamp_min(TINY))


def same_shape_stacks(params: list[torch.Tensor]) -> list[list[int]]:
    """Indices of `params` grouped by shape, each group in the parameters' order, groups by first occurrence."""
    stacks: dict[tuple[int, ...], list[int]] = {}
    for i, p in enumerate(params):
        stacks.setdefault(tuple(p.shape), []).append(i)
    return list(stacks.values())


class MuonH(torch.optim.Optimizer):
    """MuonH for groups of matrices, torch's AdamW for groups marked `adamw=True`.

    Group keys: lr; for MuonH groups momentum (0.95), ortho_dtype ('bf16' | 'fp32') and arithmetic
    ('fp32_norms' | 'published', module docstring); for AdamW groups betas, eps, weight_decay (0 in the recipe).
    No weight decay on MuonH groups: the hyperball fixes the norm.
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
        arithmetic: str = "fp32_norms",
    ):
        if ortho_dtype not in TORCH_DTYPES:
            raise ValueError(
                f"ortho_dtype={ortho_dtype!r} must be one of {sorted(TORCH_DTYPES)} (resolve 'auto' first)"
            )
        if arithmetic not in ARITHMETICS:
            raise ValueError(f"arithmetic={arithmetic!r} must be one of {', '.join(ARITHMETICS)}")
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"momentum={momentum!r} must be in [0, 1)")
        defaults = dict(
            lr=lr,
            momentum=momentum,
            ortho_dtype=ortho_dtype,
            arithmetic=arithmetic,
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
        params = [p for p in group["params"] if p.grad is not None]
        if not params:
            return
        published = group["arithmetic"] == "published"
        dtype = TORCH_DTYPES[group["ortho_dtype"]]
        # published: mu as its fp32 value (the published 0-D tensor), so 1 - mu is that of fp32 too
        mu = float(torch.tensor(group["momentum"], dtype=torch.float32)) if published else group["momentum"]
        for stack in same_shape_stacks(params):
            new = [params[i] for i in stack if not self.state[params[i]]]
            if new:  # c = ||W_0||_F, fixed for the run; computed over the stack, as the published code does
                norms = torch.stack(new).float().norm(dim=(-2, -1))
                for p, norm in zip(new, norms.unbind(0)):
                    self.state[p]["norm"] = norm.clone()
                    self.state[p]["momentum_buffer"] = torch.zeros_like(p)
        bufs = [self.state[p]["momentum_buffer"] for p in params]
        grads = [p.grad for p in params]
        torch._foreach_lerp_(bufs, grads, 1 - mu)
        nesterov = torch._foreach_lerp(grads, bufs, mu)  # look ahead along the momentum
        for stack in same_shape_stacks(params):
            W = torch.stack([params[i] for i in stack]).float()
            g = torch.stack([nesterov[i] for i in stack])
            c = torch.stack([self.state[params[i]]["norm"].float() for i in stack]).view(-1, 1, 1)
            hyperball_step_(W, g, c, group["lr"], dtype, published)
            torch._foreach_copy_([params[i] for i in stack], list(W.unbind(0)))

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
