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
