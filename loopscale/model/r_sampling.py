"""Variable-depth training: the number of passes drawn per optimizer step or per sequence (docs/design.md,
"Variable-depth training"), with its exact accounting. Pure numpy: no torch, no model.

Schemes (`model.r_sampling`), with r the config's r:
- fixed: n = r every step (every earlier run);
- poisson-lognormal (Huginn, Geiping et al. 2025): n = Poisson(lambda) + 1, lambda ~ LogNormal(ln r - sigma^2 / 2,
  sigma), so E[lambda] = r and E[n] = r + 1; `r_grad` bptt with bptt_k = 8 is Huginn's "gradients through the
  last 8 passes";
- uniform: n uniform over `r_set`.
Draws above `r_max` (default 4 r) run r_max passes: the distribution is finite and its expectation exact.
`r_sampling_per` sequence (Parcae, Prairie et al. 2026: r per sequence, backprop through ceil(n / 2): r_grad half)
draws one n for each sequence of a step.

Draws are keyed, not streamed: step s's draw is a function of (seed, s) and sequence j's of (seed, s, j), as the
data's `batch_at(seed, step, rank)` is. So the whole schedule of a run is known before it starts (`schedule`): its
steps are chosen so the FLOPs actually spent, sum_s B T F(n_s), meet the budget, and a resumed run draws exactly
what the stopped one would have (nothing but the step to restore). The ledger (`ledger`) states the expected and the
realised FLOPs per token and the pass histogram; training tallies what it ran and the record compares the two.

FLOPs per token at n passes (`train_flops_at`): `accounting.flops_per_token` of the same layout at n passes with
the gradient rule's passes (`grad_passes_at`): the published convention, 6x a pass with gradient, 2x one without.
The parameters are those of the config's r passes whatever is drawn: N_once, N_rec (and N_pass) unchanged.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import numpy as np

from loopscale.config.model import ModelConfig
from loopscale.errors import ConfigError
from loopscale.model.accounting import flops_per_token

SEED_TAG = 0x7E57  # keys the draws apart from any other use of (seed, step)
HERMITE_NODES = 96  # Gauss-Hermite nodes over ln lambda: the pmf to ~1e-12 at sigma <= 1


def is_sampled(cfg: ModelConfig) -> bool:
    return cfg.r_sampling != "fixed"


def r_cap(cfg: ModelConfig) -> int:
    """The most passes a draw runs: r_max (default 4 r; uniform: the largest of r_set)."""
    if cfg.r_sampling == "uniform":
        return max(cfg.r_set)
    return int(cfg.r_max) if cfg.r_max is not None else 4 * cfg.r


def pmf(cfg: ModelConfig) -> tuple[np.ndarray, np.ndarray]:
    """(pass counts, their probabilities) of one draw, exactly (poisson-lognormal by Gauss-Hermite quadrature over
    ln lambda; the mass above r_max at r_max)."""
    if cfg.r_sampling == "fixed":
        return np.array([cfg.r]), np.array([1.0])
    if cfg.r_sampling == "uniform":
        values = np.array(cfg.r_set)
        return values, np.full(len(values), 1.0 / len(values))
    cap = r_cap(cfg)
    x, w = np.polynomial.hermite.hermgauss(HERMITE_NODES)
    mu = math.log(cfg.r) - cfg.r_sigma**2 / 2
    lam = np.exp(mu + cfg.r_sigma * math.sqrt(2.0) * x)  # lambda at the nodes
    k = np.arange(cap - 1)  # n = k + 1 below the cap
    log_pois = k[:, None] * np.log(lam)[None, :] - lam[None, :] - np.array([math.lgamma(v + 1) for v in k])[:, None]
    probs = np.exp(log_pois) @ (w / math.sqrt(math.pi))
    values = np.arange(1, cap + 1)
    return values, np.append(probs, max(0.0, 1.0 - probs.sum()))


def grad_passes_at(cfg: ModelConfig, n: int) -> int:
    """Passes with gradient of a draw of n: half = ceil(n / 2) (Parcae); bptt = the last bptt_k (all when None)."""
    if cfg.r_grad == "half":
        return math.ceil(n / 2)
    return n if cfg.bptt_k is None else min(n, cfg.bptt_k)


def train_flops_at(cfg: ModelConfig, n: int) -> float:
    """Training FLOPs per token of a step run at n passes: the accounting's F of the same layout (a copy with r = n
    and the draw's gradient passes; n_prelude, n_rec, n_coda kept)."""
    at = copy.copy(cfg)
    at.r = int(n)
    k = grad_passes_at(cfg, n)
    at.bptt_k = None if k == n else k
    return flops_per_token(at)


def expected_flops(cfg: ModelConfig) -> float:
    """E[F] = sum_n p(n) F(n) over one draw."""
    values, probs = pmf(cfg)
    return float(sum(p * train_flops_at(cfg, int(n)) for n, p in zip(values, probs)))


def _draw(cfg: ModelConfig, rng: np.random.Generator, size: int) -> np.ndarray:
    if cfg.r_sampling == "fixed":
        return np.full(size, cfg.r)
    if cfg.r_sampling == "uniform":
        return rng.choice(np.array(cfg.r_set), size)
    lam = rng.lognormal(math.log(cfg.r) - cfg.r_sigma**2 / 2, cfg.r_sigma, size)
    return np.minimum(rng.poisson(lam) + 1, r_cap(cfg))


def draw_step(cfg: ModelConfig, seed: int, step: int) -> int:
    """Step `step`'s pass count (r per step)."""
    return int(_draw(cfg, np.random.default_rng([SEED_TAG, seed, step]), 1)[0])


def draw_sequences(cfg: ModelConfig, seed: int, step: int, batch_size: int) -> np.ndarray:
    """The pass count of each of step `step`'s batch_size sequences (r per sequence), by their index in the step."""
    return _draw(cfg, np.random.default_rng([SEED_TAG, seed, step, 1]), batch_size).astype(int)


def step_draws(cfg: ModelConfig, seed: int, step: int, batch_size: int) -> np.ndarray:
    """Every sequence's pass count at step `step`: one draw for all (per step) or one each (per sequence)."""
    if cfg.r_sampling_per == "sequence":
        return draw_sequences(cfg, seed, step, batch_size)
    return np.full(batch_size, draw_step(cfg, seed, step))


@dataclass(frozen=True)
class Schedule:
    """A sampled-r run's steps and what they spend: the pass counts of each step's sequences (steps x batch_size)
    and the FLOPs per token of each step (the mean over its sequences of F(n))."""

    draws: np.ndarray
    step_flops: np.ndarray  # F per token of each step

    @property
    def steps(self) -> int:
        return len(self.step_flops)


def schedule(
    cfg: ModelConfig,
    seed: int,
    batch_size: int,
    steps: int | None = None,
    compute_flops: float | None = None,
    batch_tokens: int | None = None,
) -> Schedule:
    """The draws of `steps` steps, or, for a compute budget, of the number of steps whose realised FLOPs
    (batch_tokens x the sum of the steps' F) come closest to it (at least one)."""
    if (steps is None) == (compute_flops is None):
        raise ConfigError("schedule: give steps or a compute budget")
    cache: dict[int, float] = {}

    def flops(n: int) -> float:
        if n not in cache:
            cache[n] = train_flops_at(cfg, n)
        return cache[n]

    draws, per_step, spent = [], [], 0.0
    s = 0
    while True:
        if steps is not None and s >= steps:
            break
        d = step_draws(cfg, seed, s, batch_size)
        f = float(np.mean([flops(int(n)) for n in d]))
        if compute_flops is not None and s >= 1:
            after = spent + f * batch_tokens
            if abs(after - compute_flops) >= abs(spent - compute_flops):  # one more step would overshoot more
                break
        draws.append(d)
        per_step.append(f)
        spent += f * (batch_tokens or 0)
        s += 1
    return Schedule(np.array(draws), np.array(per_step))


def ledger(cfg: ModelConfig, sched: Schedule, batch_tokens: int) -> dict:
    """The run's FLOPs ledger: expected (per draw) and realised (this schedule) FLOPs per token and passes, the
    compute realised and the histogram of pass counts over sequences."""
    values, probs = pmf(cfg)
    counts = np.bincount(sched.draws.ravel(), minlength=int(values.max()) + 1)
    return {
        "r_sampling": cfg.r_sampling,
        "per": cfg.r_sampling_per,
        "r_grad": cfg.r_grad,
        "r_max": r_cap(cfg),
        "passes_expected": float(values @ probs),
        "passes_realised": float(sched.draws.mean()),
        "F_expected": expected_flops(cfg),
        "F_realised": float(sched.step_flops.mean()),
        "C_realised": float(sched.step_flops.sum() * batch_tokens),
        "histogram": {int(n): int(c) for n, c in enumerate(counts) if c},
    }
