"""Curves tables drawn from a curve law with known parameters: the schedules the published comparisons use
(constant, cosine, warmup-stable-decay, step), each with a linear warmup, evaluated every `every` steps, with
optional log-normal noise. What the curve-law tests and benchmarks recover and predict."""

from __future__ import annotations

import numpy as np
import pandas as pd

from loopscale.fit.curves.law import CurveLaw
from loopscale.fit.curves.table import Curve, warmup_end


def schedule(kind: str, steps: int, peak: float, warmup: int, final: float = 0.1, decay: float = 0.2) -> np.ndarray:
    """(steps + 1,) the lr at steps 0..steps: a linear warmup to `peak`, then `kind`: constant; cosine to
    final x peak; wsd (stable, then a linear decay over the last `decay` share to final x peak); step (final x
    peak from the last `decay` share on)."""
    t = np.arange(steps + 1, dtype=float)
    after = np.clip((t - warmup) / max(steps - warmup, 1), 0.0, 1.0)
    tail = np.clip((t - (1 - decay) * steps) / (decay * steps), 0.0, 1.0)
    shapes = {
        "constant": np.ones_like(t),
        "cosine": final + (1 - final) * 0.5 * (1 + np.cos(np.pi * after)),
        "wsd": 1 - (1 - final) * tail,
        "step": np.where(tail > 0, final, 1.0),
    }
    if kind not in shapes:
        raise ValueError(f"unknown schedule {kind!r}; known: {', '.join(shapes)}")
    return peak * np.where(t < warmup, t / max(warmup, 1), shapes[kind])


def draw_curves(
    law: CurveLaw,
    params: dict[str, float],
    schedules: dict[str, np.ndarray],
    every: int,
    noise: float = 0.0,
    seed: int = 0,
) -> pd.DataFrame:
    """A curves table (run, step, lr, val_loss): each schedule evaluated every `every` steps from its warmup's
    end (and at its last step), loss = the law's value times exp(noise z), z standard normal."""
    rng = np.random.default_rng(seed)
    frames = []
    for run, eta in schedules.items():
        w = warmup_end(eta)
        steps = np.unique(np.concatenate([np.arange(w, len(eta), every), [len(eta) - 1]]))
        curve = Curve(run, eta, w, steps, np.ones(len(steps)))
        loss = law.predict(params, curve) * np.exp(noise * rng.standard_normal(len(steps)))
        rows = pd.DataFrame({"run": run, "step": steps, "lr": eta[steps], "val_loss": loss})
        # the schedule's corners as rows without a loss: the table reads the lr between rows linearly, so
        # these place it exactly (as loopscale's own runs record them); the fit skips them
        corners = np.setdiff1d(schedule_corners(eta), steps)
        knots = pd.DataFrame({"run": run, "step": corners, "lr": eta[corners], "val_loss": np.nan})
        frames.append(pd.concat([knots, rows]).sort_values("step"))
    return pd.concat(frames, ignore_index=True)


def schedule_corners(eta: np.ndarray) -> np.ndarray:
    """Step 0, the last step and every step where the lr's slope changes by more than 1e-6 of its peak: with
    these as rows, linear interpolation between rows gives the schedule back (exactly for piecewise-linear
    ones; a cosine's slope changes by ~1e-7 of its peak a step at 3000 steps and is sampled closely enough)."""
    bend = np.abs(np.diff(eta, 2)) > 1e-6 * eta.max()
    return np.unique(np.concatenate([[0, len(eta) - 1], np.flatnonzero(bend) + 1, np.flatnonzero(bend) + 2]))


def wsd_multipliers(steps: int, warmup: int, decay_frac: float = 0.2, final: float = 0.0) -> np.ndarray:
    """(steps + 1,) the lr relative to its peak after each step 0..steps of loopscale's wsd schedule
    (loopscale/train/optim/schedule.py): row k holds the multiplier of the update step k made."""
    k = np.arange(steps + 1, dtype=float)
    start = steps - round(decay_frac * steps)
    cool = 1 - (1 - final) * np.clip((k - 1 - start) / max(steps - start, 1), 0, 1)
    return np.where(k <= warmup, k / max(warmup, 1), np.where(k - 1 < start, 1.0, cool))


def looped_curves(
    runs: pd.DataFrame,
    law,
    params: dict[str, float],
    batch_tokens: int,
    eval_steps,
    seed_sigma: float = 0.0,
    eval_sigma: float = 0.0,
    rho: float = 0.0,
    seed: int = 0,
) -> pd.DataFrame:
    """A curves table of a runs table (r, N_once, N_rec, D per run) trained with loopscale's wsd schedule
    (2% warmup, 20% cooldown to 0) and evaluated after `eval_steps(steps, warmup, cooldown_start)` (what
    loopscale evaluates: `loopscale.data.heldout.curve_steps` with the run's corners, which this layer may
    not import):
    loss = the looped curve law `law` at `params` times exp(noise), noise = the run's seed offset (seed_sigma,
    shared by its whole curve) + an AR(1) series along its evaluations (eval_sigma, lag-1 correlation rho)."""
    rng = np.random.default_rng(seed)
    frames = []
    for i, run in runs.reset_index(drop=True).iterrows():
        steps = max(10, int(round(run["D"] / batch_tokens)))
        warmup = max(1, round(0.02 * steps))
        cooldown = steps - round(0.2 * steps)
        at = np.array(eval_steps(steps, warmup, cooldown))
        mult = wsd_multipliers(steps, warmup)
        frame = pd.DataFrame(
            {
                "run": f"run{i}",
                **{c: run[c] for c in ("r", "N_once", "N_rec", "C", "width") if c in run},
                "D": steps * batch_tokens,
                "step": at,
                "tokens": at * batch_tokens,
                "lr_multiplier": mult[at],
            }
        )
        z = np.empty(len(at))
        z[0] = rng.standard_normal()
        for j in range(1, len(at)):
            z[j] = rho * z[j - 1] + np.sqrt(1 - rho * rho) * rng.standard_normal()
        frame["noise"] = seed_sigma * rng.standard_normal() + eval_sigma * z
        frames.append(frame)
    table = pd.concat(frames, ignore_index=True)
    clean = type(law).predict_table(params, table)
    table["val_loss"] = clean * np.exp(table.pop("noise"))
    table["L_clean"] = clean
    return table
