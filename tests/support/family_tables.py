"""Runs tables shaped exactly like a real sweep of one experiment, for fitting with the real `loopscale fit`:
every row's N_once, N_rec and F come from `loopscale.model.accounting` on the model the experiment trains
(`loopscale-train experiment=NAME model.d_model=d model.r=r`), D = C / F, and L from the looped law with
multiplicative noise. What `loopscale collect` would write, without training (the advice tests read fits
of these tables the way users read fits of their sweeps)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from omegaconf import OmegaConf

from loopscale.config.dirs import compose
from loopscale.config.model import ModelConfig
from loopscale.model.accounting import flops_per_token, param_counts

TRUTH = {"E": 1.57, "A": 28.0, "alpha": 0.20, "B": 916.0, "beta": 0.37}


def experiment_rows(
    experiment: str,
    widths: Sequence[int],
    budgets: Sequence[float],
    r_values: Sequence[int],
    phi: float = 0.46,
    params: Mapping[str, float] = TRUTH,
    noise: float = 0.003,
    seed: int = 0,
    overrides: Sequence[str] = (),
) -> pd.DataFrame:
    """One row per (budget, width, r) of `experiment`'s model: r, N_once, N_rec, N, D, C, L, recipe, width."""
    composed = compose([f"experiment={experiment}", *overrides])
    fields = OmegaConf.to_container(composed.model, resolve=True)
    fields["vocab_size"] = int(composed.data.vocab_size)
    rng = np.random.default_rng(seed)
    rows = []
    for C in budgets:
        for d in widths:
            for r in r_values:
                cfg = ModelConfig(**{**fields, "d_model": int(d), "r": int(r)})
                counts, F = param_counts(cfg), flops_per_token(cfg)
                D = C / F
                n_eff = counts.N_once + r**phi * counts.N_rec
                L = params["E"] + params["A"] * n_eff ** -params["alpha"] + params["B"] * D ** -params["beta"]
                row = {"r": r, "N_once": counts.N_once, "N_rec": counts.N_rec, "N": counts.N, "D": D, "C": C}
                rows.append({**row, "L": L * (1 + noise * rng.standard_normal()), "recipe": cfg.recipe, "width": d})
    return pd.DataFrame(rows)
