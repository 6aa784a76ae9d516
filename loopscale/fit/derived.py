"""Quantities derived from a fitted looped law.

- `n_eff`: N_eff = N_once + r^phi N_rec, the non-looped size with the same loss at the same D.
- `training_cost_size`: N_once + r N_rec, the non-looped size with the same training FLOPs per
  token (iso-depth: every pass costs its parameters again), the "cost-equivalent" size.
- `equivalent_sizes`: both, e.g. r = 4, N_once = 220M, N_rec = 190M, phi = 0.46 gives
  N_eff ~ 580M at the training cost of a ~1B non-looped model (docs/design.md, "The question"; published figures).
- `compute_optimal`: N*, D* at budget C for a given r (C = F D with F = f N_cost FLOPs per token,
  f = 6 by default or the model's exact count per parameter; Hoffmann et al. 2022, eq. 4 with
  N_eff = rho N_cost). `optimal_size` is the closed form it and the compute-optimal figure share.
The iso-FLOP curves' measured minima are `loopscale.fit.isoflop`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass

import numpy as np

from loopscale.errors import InputError
from loopscale.fit.laws.form import n_eff


def training_cost_size(N_once, N_rec, r):
    """Parameters a non-looped model needs to cost the same FLOPs per token: N_once + r N_rec."""
    return np.asarray(N_once, dtype=float) + np.asarray(r, dtype=float) * np.asarray(N_rec, float)


@dataclass(frozen=True)
class EquivalentSizes:
    """A looped model's unique parameters and its non-looped equivalents (all in parameters)."""

    r: float
    N_once: float
    N_rec: float
    phi: float
    N_unique: float  # N_once + N_rec: what the looped model stores
    N_eff: float  # non-looped size with the same loss at the same tokens
    N_cost: float  # non-looped size with the same training cost per token

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def equivalent_sizes(r: float, N_once: float, N_rec: float, phi: float) -> EquivalentSizes:
    """N_unique, N_eff and N_cost of a looped model with r recurrences at exponent phi."""
    if r < 1 or N_once < 0 or N_rec < 0 or N_once + N_rec <= 0:
        raise InputError(
            f"need r >= 1, N_once >= 0, N_rec >= 0, N_once + N_rec > 0; got r={r}, N_once={N_once}, N_rec={N_rec}"
        )
    return EquivalentSizes(
        r=float(r),
        N_once=float(N_once),
        N_rec=float(N_rec),
        phi=float(phi),
        N_unique=float(N_once + N_rec),
        N_eff=float(n_eff(N_once, N_rec, r, phi)),
        N_cost=float(training_cost_size(N_once, N_rec, r)),
    )


def isodepth_once_fraction(r: int, L_eff: int = 20, prelude: int = 2, coda: int = 2) -> float:
    """Share of unique block parameters run once on the iso-depth grid: (p + c) / (p + c + k)."""
    k = (L_eff - prelude - coda) / r
    return (prelude + coda) / (prelude + coda + k)


def eff_per_cost(r: float, phi: float, once_fraction: float) -> float:
    """N_eff / N_cost for a model whose unique parameters are a `once_fraction` run once."""
    f = once_fraction
    return (f + r**phi * (1 - f)) / (f + r * (1 - f))


@dataclass(frozen=True)
class ComputeOptimum:
    C: float  # budget in FLOPs
    r: float
    N_cost: float  # cost-counted parameters N_once + r N_rec
    N_eff: float
    D: float  # tokens
    L: float  # predicted loss

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def optimal_size(params: Mapping[str, float], C, eff_per_size: float, flops_per_size: float):
    """N* minimising L(N) = E + A (c N)^-alpha + B (C / (f N))^-beta at budget C, where the model
    family fixes N_eff = c N and the training FLOPs per token F = f N (c = `eff_per_size`,
    f = `flops_per_size`, for whatever size measure N is). Setting dL/dN = 0 gives
        N* = (alpha A c^-alpha / (beta B))^(1/(alpha+beta)) * (C / f)^(beta/(alpha+beta))
    (Hoffmann et al. 2022, eq. 4, with F = 6 N there). D* = C / (f N*)."""
    a, b = params["alpha"], params["beta"]
    G = (a * params["A"] * eff_per_size**-a / (b * params["B"])) ** (1 / (a + b))
    return G * (np.asarray(C, dtype=float) / flops_per_size) ** (b / (a + b))


def compute_optimal(
    params: Mapping[str, float], C: float, r: float = 1.0, once_fraction: float = 0.2, flops_per_param: float = 6.0
) -> ComputeOptimum:
    """Loss-minimising N and D at budget C for models with r recurrences.

    With C = F D, F = f N_cost the training FLOPs per token (`flops_per_param` = f: 6 for the
    standard estimate, or the model's exact F / (N_once + r N_rec) from `accounting.flops_per_token`,
    which adds the LM head and attention and counts truncated passes at 2x; it differs per r), and
    N_eff = rho N_cost (rho = `eff_per_cost`, fixed by the architecture's shape), the optimum is
    `optimal_size(params, C, rho, f)`. phi defaults to 1 when absent (chinchilla fits);
    `once_fraction` is N_once / (N_once + N_rec) (see `isodepth_once_fraction`).
    """
    if not flops_per_param > 0:
        raise InputError(f"flops_per_param must be > 0; got {flops_per_param}")
    E, A, B = params["E"], params["A"], params["B"]
    alpha, beta = params["alpha"], params["beta"]
    phi = params.get("phi", 1.0)
    rho = eff_per_cost(r, phi, once_fraction) if r != 1 else 1.0
    N_cost = float(optimal_size(params, C, rho, flops_per_param))
    D = C / (flops_per_param * N_cost)
    L = E + A * (rho * N_cost) ** -alpha + B * D**-beta
    return ComputeOptimum(
        C=float(C), r=float(r), N_cost=float(N_cost), N_eff=float(rho * N_cost), D=float(D), L=float(L)
    )


def optima_beside_dense(
    params: Mapping[str, float], C: float, sizes: EquivalentSizes, once_fraction: float, flops=None, dense_flops=None
) -> list[ComputeOptimum]:
    """The compute-optimal point at budget C of the r = 1 model and of the looped one (`sizes`: its r and N's), each
    with its own FLOPs per token per parameter: F / N_unique and F / N_cost when given (`flops`, `dense_flops`:
    `loopscale params`'s training FLOPs per token), else 6 (`loopscale equiv --budget`)."""
    per_param = {1.0: 6.0, sizes.r: 6.0}  # F / (N_once + r N_rec) per r: each r's own FLOPs per token
    for r, F, N in ((1.0, dense_flops, sizes.N_unique), (sizes.r, flops, sizes.N_cost)):
        if F is not None:
            if not F > 0:
                raise InputError(f"FLOPs per token must be > 0; got {F}")
            per_param[r] = F / N
    return [compute_optimal(params, C, r, frac, per_param[r]) for r, frac in ((1.0, 1.0), (sizes.r, once_fraction))]
