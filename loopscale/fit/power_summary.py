"""What simulated sweeps of a design give (`loopscale.fit.power`): per quantity (phi, delta-phi) its `Precision`
-- the estimates' se and bias, the median width of the verdict's interval with its Monte-Carlo error, its coverage,
phi's share of sweeps within the verdict's width rule, delta-phi's MDE (`verdict_mde`) and the share called real --
and the normal-approximation helpers `loopscale power` sizes designs with (`power_at`, `seeds_needed`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from loopscale.fit.record_blocks import ABSENT, JsonBlock
from loopscale.fit.verdict import MDE_FACTOR, PHI_CI_WIDTH_MAX, POWER, Z_LEVEL
from loopscale.fit.verdict_record import JsonKeys


@dataclass(frozen=True)
class Precision(JsonBlock):
    """What simulated sweeps give one quantity (phi or delta-phi): the truth, the mean estimate, its bias and se,
    the median width of the verdict's interval, its coverage and the share left open, the sweeps and failed fits;
    delta-phi's also the difference planted, the share called real, sigma's interval and the MDE (`verdict_mde`);
    both the median width's Monte-Carlo error (`width95_mc_se`); phi's the share of sweeps whose interval meets the
    verdict's width rule (closed and at most PHI_CI_WIDTH_MAX wide: "phi measured" by that rule) with its error.
    Its JSON form is what `loopscale power` writes per design (`record_blocks.JsonBlock`)."""

    KEY: ClassVar[str] = "power summary"

    true: float = ABSENT
    mean: float = ABSENT
    bias: float = ABSENT
    se: float = ABSENT
    width95: float = ABSENT
    coverage: float | None = ABSENT
    open_share: float = ABSENT
    n_sims: int = ABSENT
    n_failed: int = ABSENT
    planted: float = ABSENT
    detected_share: float = ABSENT
    sigma_interval: list[float] = ABSENT
    mde: float = ABSENT
    mde_point: float = ABSENT
    mde_upper: float = ABSENT
    mde_mc_se: float = ABSENT
    width95_mc_se: float = ABSENT
    within_rule: float = ABSENT
    within_rule_mc_se: float = ABSENT


@dataclass(frozen=True)
class Simulation(JsonKeys):
    """`simulate_design`'s result: the design's runs, each quantity's Precision (None when not asked) and the
    simulated sweeps' estimates and [low, high] intervals (arrays, by quantity)."""

    n_runs: int
    phi: Precision | None = None
    delta_phi: Precision | None = None
    estimates: dict[str, np.ndarray] = field(default_factory=dict)
    intervals: dict[str, np.ndarray] = field(default_factory=dict)


def summarise(sims: np.ndarray, true_value: float) -> Precision:
    """se, bias and the verdict's interval over simulated sweeps (rows of estimate, interval low, high, scale
    draw; NaN estimates: failed fits, counted): the median width of the profile interval (`width95`: what one
    sweep's interval spans), its coverage of the truth and the share left open."""
    est, lo, hi = sims[:, 0], sims[:, 1], sims[:, 2]
    ok = np.isfinite(est)
    se = float(np.std(est[ok], ddof=1)) if ok.sum() >= 2 else float("nan")
    closed = ok & np.isfinite(lo) & np.isfinite(hi)
    return Precision(
        true=float(true_value),
        mean=float(np.mean(est[ok])) if ok.any() else float("nan"),
        bias=float(np.mean(est[ok]) - true_value) if ok.any() else float("nan"),
        se=se,
        width95=float(np.median(hi[closed] - lo[closed])) if closed.any() else float("nan"),
        coverage=float(np.mean((lo[closed] <= true_value) & (true_value <= hi[closed]))) if closed.any() else None,
        open_share=float(1 - closed.sum() / max(ok.sum(), 1)),
        n_sims=int(len(est)),
        n_failed=int((~ok).sum()),
    )


def bootstrap_se(values: np.ndarray, statistic, n_boot: int = 200) -> float:
    """The Monte-Carlo standard error of statistic(values) over simulated sweeps: its sd over n_boot resamples of
    the sweeps (generator 0: reproducible)."""
    if len(values) < 2:
        return float("nan")
    rng = np.random.default_rng(0)
    draws = [statistic(values[rng.integers(0, len(values), len(values))]) for _ in range(n_boot)]
    draws = [d for d in draws if np.isfinite(d)]
    return float(np.std(draws, ddof=1)) if len(draws) > 1 else float("nan")


def width_rule(sims: np.ndarray) -> dict[str, float]:
    """The median width of the verdict's interval with its Monte-Carlo error, and the share of sweeps whose
    interval is closed and at most PHI_CI_WIDTH_MAX wide (the verdict's width rule; an open interval or a failed fit
    misses it) with the share's binomial error."""
    width = sims[:, 2] - sims[:, 1]  # NaN: open or failed
    closed = width[np.isfinite(width)]
    within = np.where(np.isfinite(width), width <= PHI_CI_WIDTH_MAX, False)
    share = float(np.mean(within)) if len(within) else float("nan")
    return {
        "width95_mc_se": bootstrap_se(closed, np.median),
        "within_rule": share,
        "within_rule_mc_se": float(math.sqrt(share * (1 - share) / len(within))) if len(within) else float("nan"),
    }


def verdict_mde(sims: np.ndarray, planted: float, upper_factor: float = 1.0, n_boot: int = 200) -> dict[str, float]:
    """The smallest |delta-phi| the verdict calls "real" in POWER of sweeps, from simulated sweeps at the planted
    value: moving the truth by m moves a sweep's interval by m, so the truth must pass planted - low (upwards) or
    high - planted (downwards) for the interval to exclude 0; the MDE is the POWER quantile of that distance, the
    larger of the two directions (an open end or a failed fit: never). `mde` draws sigma per sweep from its
    uncertainty (what a pilot's design delivers on average), `mde_point` holds sigma at the pilot's value,
    `mde_upper` at the upper end of sigma's 95% interval (`upper_factor` x the point value; the distance scales
    with the noise); `mde_mc_se`: the Monte-Carlo standard error of `mde` (a bootstrap over the sweeps)."""
    est, lo, hi, f = sims.T
    up = np.where(np.isfinite(est) & np.isfinite(lo), planted - lo, np.inf)
    down = np.where(np.isfinite(est) & np.isfinite(hi), hi - planted, np.inf)

    def mde_of(u, d):
        return float(max(np.quantile(u, POWER), np.quantile(d, POWER)))

    rng = np.random.default_rng(0)
    draws = [mde_of(up[i], down[i]) for i in (rng.integers(0, len(up), len(up)) for _ in range(n_boot))]
    point = mde_of(up / f, down / f)
    return {
        "mde": mde_of(up, down),
        "mde_point": point,
        "mde_upper": point * upper_factor,
        "mde_mc_se": float(np.std([d for d in draws if np.isfinite(d)], ddof=1)) if n_boot > 1 else float("nan"),
    }


def power_at(delta: float, se: float) -> float:
    """The probability that a two-sided 5% test of delta = 0 rejects when the truth is `delta` and the estimate
    is normal with standard error se: Phi(delta / se - z) + Phi(-delta / se - z)."""
    if not se > 0:
        return float("nan")
    z = delta / se
    return float(0.5 * (math.erfc(-(z - Z_LEVEL) / math.sqrt(2)) + math.erfc(-(-z - Z_LEVEL) / math.sqrt(2))))


def detected_share(sims: np.ndarray) -> float:
    """The share of simulated sweeps whose verdict interval excludes 0 (the verdict says "real")."""
    lo, hi = sims[:, 1], sims[:, 2]
    return float(np.mean((lo > 0) | (hi < 0))) if len(sims) else float("nan")


def seeds_needed(se: float, seeds: int, target: float, max_seeds: int = 64) -> int | None:
    """Seeds per point that bring MDE = 2.80 se down to `target`, at se ~ 1 / sqrt(seeds) (each point's mean
    over k seeds has noise sigma / sqrt(k)); None beyond max_seeds."""
    if not (se > 0 and target > 0):
        return None
    k = math.ceil(seeds * (MDE_FACTOR * se / target) ** 2 - 1e-9)
    k = max(k, 1)
    return k if k <= max_seeds else None


def mde_formula() -> str:
    return (
        "MDE = the smallest |Δφ| whose verdict interval (the profile interval the verdict reads) excludes 0 in 80% "
        "of simulated sweeps, each drawn with the pilot's seed noise, misfit and tails and sigma drawn from its "
        "uncertainty; beside it, the MDE with sigma at its estimate and at the upper end of its 95% interval"
    )
