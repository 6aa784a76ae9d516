"""The curves the position sigma's tests fit (`fit --curve-sigma position`, loopscale/fit/position_sigma.py): the CPU
demo's forked design (16 jobs, 44 branches: `synthetic.demo_forked_design`) evaluated along its curves by the tuned
demo's looped-entry-curve law, with noise 10x larger in each job's first 10% of steps than after."""

from __future__ import annotations

import numpy as np
import pandas as pd

import loopscale.fit.curve_worth as cw
from loopscale.data.heldout import curve_steps
from loopscale.fit.laws.registry import make_law
from loopscale.fit.position_sigma import position_share
from loopscale.fit.runs_table import canonical_table
from loopscale.fit.synthetic import demo_forked_design as demo_design

# the tuned demo's looped-entry-curve fit (docs/results.md, "A curve's schedule terms from its whole run")
TRUTH = {"phi": 0.7066, "kappa": 0.4515, "E": 3.047, "A": 4.203, "alpha": 0.212, "B": 62.6, "beta": 0.4156, "K": 0.0946}
LAW = "looped-entry-curve"
EARLY_SD, LATE_SD, SPLIT = 0.02, 0.002, 0.1  # sd of log L before / after 10% of a job's steps


def twelve_evaluations(steps: int, warmup: int, cooldown: int | None) -> list[int]:
    """12 evaluations a run (`curve_steps`), the cooldown's start among them."""
    return curve_steps(steps, 12, (warmup, cooldown), cooldown)


def demo_curves() -> pd.DataFrame:
    """The demo design's curves, the law's loss without noise: the fitted rows (canonical)."""
    table = cw.design_curves(demo_design(), twelve_evaluations, TRUTH, make_law(LAW))
    return canonical_table(table.drop(columns=["job", "eval_depth", "fork_depth"]), LAW)


def two_level_sd(table: pd.DataFrame) -> np.ndarray:
    return np.where(position_share(table) < SPLIT, EARLY_SD, LATE_SD)


def noisy_curves(seed: int) -> pd.DataFrame:
    """`demo_curves` with independent log-normal noise of `two_level_sd`, drawn from `seed`."""
    table = demo_curves()
    noise = np.random.default_rng(seed).standard_normal(len(table)) * two_level_sd(table)
    return table.assign(L=table["L"] * np.exp(noise))
