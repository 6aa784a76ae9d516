"""Which r, which width, how many tokens: the loss-minimising model of a family under a compute, memory and
inference budget, for many law parameter sets at once (docs/design.md, "Advice"). Pure numpy.

For recurrence r the family fixes N_once(d), N_rec(d), the training FLOPs per token F(d) and the forward
FLOPs per token F_infer(d) as quadratics in the width d (`loopscale.analysis.advise.family`). The predicted loss is
the fitted law (docs/design.md, "The science"):

    L(d) = E + A n(d)^-alpha + B D(d)^-beta,   n(d) = N_once(d) + m_r N_rec(d)     (m_r = r^phi)   (1)

with the tokens set by the compute budget C. Loss falls with D, so the training budget binds:

    F(d) D = C                         ->  D(d) = C / F(d)                                            (2)
    F(d) D + F_infer(d) T_inf = C      ->  D(d) = (C - F_infer(d) T_inf) / F(d)   (lifetime cost, T_inf
                                                      tokens served at 2 N_active = F_infer FLOPs each) (2')

The other constraints bound the width: unique parameters N_once(d) + N_rec(d) <= M and F_infer(d) <= I
(each quantity increases with d, so each is d <= its root), and d >= one head. Over that interval the
continuous optimum is found on a log-width grid and refined by bisection on the analytic slope

    dL/dln d = -alpha A n^-alpha d n'/n + beta B D^-beta d (F'/F + T_inf F_infer'/(C - T_inf F_infer))   (3)

to machine precision (64 halvings of a bracket two grid cells wide); a slope of one sign across the bracket
puts the optimum on the bound (a binding constraint). L is unimodal in d along these families, so the best
valid width (a multiple of the family's width step) is the better of the two around the continuous optimum:
that is the snapped advice. Everything here is vectorised over parameter sets (the rows of `LawSets`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from loopscale.analysis.advise.family import Family, positive_root
from loopscale.analysis.advise.law_sets import LawSets
from loopscale.errors import InputError

N_GRID = 512  # log-width grid of the global search
N_BISECT = 64  # halvings of the bracket around the best grid point
CHUNK_SETS = 2048  # parameter sets searched at once: each grid array is CHUNK_SETS x N_GRID floats (8 MiB)


@dataclass(frozen=True)
class Constraints:
    """compute_flops: training FLOPs C (with inference_tokens: the lifetime budget, eq. 2');
    max_unique_params: M; max_inference_flops: I per token; inference_tokens: T_inf served."""

    compute_flops: float
    max_unique_params: float | None = None
    max_inference_flops: float | None = None
    inference_tokens: float | None = None

    def __post_init__(self) -> None:
        for name in ("compute_flops", "max_unique_params", "max_inference_flops", "inference_tokens"):
            value = getattr(self, name)
            if value is not None and not (np.isfinite(value) and value > 0):
                raise InputError(f"{name} must be a positive number; got {value!r}")

    def without_cap(self) -> Constraints:
        return replace(self, max_unique_params=None)


# ----------------------------------------------------------------------------------------------------
# the loss along a family (eqs. 1-3)


def tokens(family: Family, r: int, d, cons: Constraints):
    """D(d) of eq. 2 (or 2' with inference tokens); <= 0 where serving alone spends the budget."""
    spend = cons.compute_flops
    if cons.inference_tokens:
        spend = spend - cons.inference_tokens * family.value("F_infer", r, d)
    return spend / family.value("F", r, d)


def multiplier_at(sets: LawSets, family: Family, r: int, d) -> tuple[np.ndarray, np.ndarray | float]:
    """(m, dm/dd) of eq. 1 per set (rows) at widths d: m_r, or for a law whose m reads the size m_ref (N_c /
    N_ref)^s with N_c = N_once + r N_rec (`LawSets.scaling`; looped-logn: s = psi ln r), so dm/dd = m s N_c' / N_c."""
    m = sets.multiplier[r][:, None]
    if r not in sets.scaling:
        return m, 0.0
    exponent = sets.scaling[r][:, None]
    n_c = family.value("N_once", r, d) + r * family.value("N_rec", r, d)
    m = m * (n_c / sets.N_ref) ** exponent
    return m, m * exponent * (family.slope("N_once", r, d) + r * family.slope("N_rec", r, d)) / n_c


def loss(sets: LawSets, family: Family, r: int, d, cons: Constraints) -> np.ndarray:
    """L(d) of eq. 1 for every parameter set (rows) at widths d (broadcast against (sets, 1)); inf where D <= 0."""
    d = np.asarray(d, dtype=float)
    n = family.value("N_once", r, d) + multiplier_at(sets, family, r, d)[0] * family.value("N_rec", r, d)
    D = tokens(family, r, d, cons)
    with np.errstate(divide="ignore", invalid="ignore"):
        data_term = np.where(D > 0, sets.column("B") * np.abs(D) ** -sets.column("beta"), np.inf)
    return sets.column("E") + sets.column("A") * n ** -sets.column("alpha") + data_term


def loss_slope(sets: LawSets, family: Family, r: int, d, cons: Constraints) -> np.ndarray:
    """dL / d ln d of eq. 3, same shapes as `loss`."""
    d = np.asarray(d, dtype=float)
    m, dm = multiplier_at(sets, family, r, d)
    n_rec = family.value("N_rec", r, d)
    n = family.value("N_once", r, d) + m * n_rec
    dn = family.slope("N_once", r, d) + m * family.slope("N_rec", r, d) + dm * n_rec
    log_slope_D = family.slope("F", r, d) / family.value("F", r, d)  # -(d ln D / dd), eq. 2
    if cons.inference_tokens:
        served = cons.inference_tokens * family.value("F_infer", r, d)
        log_slope_D = log_slope_D + cons.inference_tokens * family.slope("F_infer", r, d) / (
            cons.compute_flops - served
        )
    D = tokens(family, r, d, cons)
    alpha, beta = sets.column("alpha"), sets.column("beta")
    model_term = -alpha * sets.column("A") * n**-alpha * d * dn / n
    return model_term + beta * sets.column("B") * np.abs(D) ** -beta * d * log_slope_D


# ----------------------------------------------------------------------------------------------------
# the optimum per r


@dataclass(frozen=True)
class Domain:
    """The widths [lo, hi] that meet the constraints at one r; `binding` names the constraint that sets hi
    (max_unique_params, max_inference_flops, one_step: at least one optimizer step of training after
    serving, or the search ceiling)."""

    lo: float
    hi: float
    binding: str


def width_domain(family: Family, r: int, cons: Constraints) -> Domain | str:
    """The feasible widths of eq. 2 under the constraints, or a one-line reason why there are none."""
    lo = float(family.width_step)
    limits = {"search_ceiling": family.max_width}
    if cons.max_unique_params is not None:
        limits["max_unique_params"] = float(family.width_for("N_unique", r, cons.max_unique_params))
    if cons.max_inference_flops is not None:
        limits["max_inference_flops"] = float(family.width_for("F_infer", r, cons.max_inference_flops))
    # D >= one optimizer step in eq. 2 / 2': b F(d) + T_inf F_infer(d) <= C (b tokens per step)
    one_step = family.batch_tokens * family.coeffs("F", r) + (cons.inference_tokens or 0.0) * family.coeffs(
        "F_infer", r
    )
    limits["one_step"] = float(positive_root(one_step, cons.compute_flops))
    binding = min(limits, key=limits.get)
    hi = limits[binding]
    if hi < lo:
        return f"r = {r}: no width meets {binding}: {_too_big(family, r, cons, binding)}"
    return Domain(lo, hi, binding)


def _too_big(family: Family, r: int, cons: Constraints, binding: str) -> str:
    """What the smallest model (one head wide) costs against the constraint it breaks."""
    d = family.width_step
    if binding == "max_unique_params":
        return f"the smallest model (d = {d:g}) has {float(family.value('N_unique', r, d)):.4g} unique parameters"
    served = float(family.value("F_infer", r, d))
    if binding == "max_inference_flops":
        return f"the smallest model (d = {d:g}) needs {served:.4g} FLOPs per token"
    step_flops = family.batch_tokens * float(family.value("F", r, d))
    serving = f" after serving {cons.inference_tokens:.4g} tokens" if cons.inference_tokens else ""
    return (
        f"C = {cons.compute_flops:.4g} FLOPs does not buy one optimizer step ({family.batch_tokens} tokens, "
        f"{step_flops:.4g} FLOPs) of the smallest model (d = {d:g}){serving}"
    )


def continuous_optimum(sets: LawSets, family: Family, r: int, cons: Constraints, domain: Domain) -> np.ndarray:
    """d* per parameter set minimising eq. 1 over [domain.lo, domain.hi]: the best point of a log grid, then
    bisection of the slope (eq. 3) over the two cells around it (a bound when the slope keeps one sign).
    Many sets (bootstrap replicates) are searched CHUNK_SETS at a time, so memory stays bounded."""
    if len(sets) > CHUNK_SETS:
        chunks = (sets.take(slice(i, i + CHUNK_SETS)) for i in range(0, len(sets), CHUNK_SETS))
        return np.concatenate([continuous_optimum(chunk, family, r, cons, domain) for chunk in chunks])
    x = np.linspace(np.log(domain.lo), np.log(domain.hi), N_GRID)
    best = np.argmin(loss(sets, family, r, np.exp(x)[None, :], cons), axis=1)
    lo, hi = x[np.maximum(best - 1, 0)], x[np.minimum(best + 1, N_GRID - 1)]
    for _ in range(N_BISECT):
        mid = 0.5 * (lo + hi)
        rising = loss_slope(sets, family, r, np.exp(mid)[:, None], cons)[:, 0] > 0
        hi, lo = np.where(rising, mid, hi), np.where(rising, lo, mid)
    return np.exp(0.5 * (lo + hi))


def snapped_optimum(sets: LawSets, family: Family, r: int, cons: Constraints, domain: Domain, d_star: np.ndarray):
    """(d, L) per parameter set at the best valid width: the better of the multiples of the width step just
    below and above d*, kept inside the domain (L is unimodal in d). (None, None) when no valid width fits."""
    step = family.width_step
    first, last = step * np.ceil(domain.lo / step), step * np.floor(domain.hi / step)
    if first > last:
        return None, None
    below = np.clip(step * np.floor(d_star / step), first, last)
    above = np.clip(below + step, first, last)
    candidates = np.stack([below, above], axis=1)
    losses = loss(sets, family, r, candidates, cons)
    pick = np.argmin(losses, axis=1)
    rows = np.arange(len(sets))
    return candidates[rows, pick], losses[rows, pick]


def solve(sets: LawSets, family: Family, r: int, cons: Constraints):
    """(domain, d*, d_snapped, L_snapped) for every set, or a one-line reason why r is infeasible."""
    domain = width_domain(family, r, cons)
    if isinstance(domain, str):
        return domain
    d_star = continuous_optimum(sets, family, r, cons, domain)
    d_snap, L_snap = snapped_optimum(sets, family, r, cons, domain, d_star)
    if d_snap is None:
        return f"r = {r}: no multiple of {family.width_step} lies between widths {domain.lo:.4g} and {domain.hi:.4g}"
    return domain, d_star, d_snap, L_snap
