"""Which schedule term the looped curve law should carry (issue 55): forms fitted to every evaluation but each
run's last (the end of its cooldown), that last one predicted; mean and worst relative error per form.

    .venv/bin/python benchmarks/bench_curve_forms.py --synthetic      # curves whose drop is the multi-power law's
    .venv/bin/python benchmarks/bench_curve_forms.py --table runs_curves.csv [--loss-col val_loss]

Forms: `looped-curve` with the annealing memory lambda in {0, 0.9 (the default), 0.99, 0.999} (subclasses of
the registered law, not registered), and the schedule-blind looped law (each evaluation a run of `tokens`
tokens at its peak lr: the final-point law applied along the curve). --synthetic: the CPU demo's 44 branches,
wsd, 12 evaluations each, loss = E + A N_eff^-alpha + B S1^-beta - LD(t) with the multi-power law's drop
(B_d = 50 per unit lr: a full anneal worth 0.15 nats, about the published 400M fit's; C = 2, beta_d = 0.6,
gamma = 0.6 at a peak lr of 3e-3) times 0.2% log-normal noise: a law of another shape than any form fitted.
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from loopscale.data.heldout import curve_steps
from loopscale.fit.curves.drops import drop_atoms
from loopscale.fit.curves.multipower import loss_drop
from loopscale.fit.curves.synthetic import looped_curves
from loopscale.fit.curves.table import CurveColumns, read_curves
from loopscale.fit.laws.looped_curve import LoopedCurve
from loopscale.fit.laws.registry import make_law
from loopscale.fit.objective import Loss
from loopscale.fit.optimize import fit_law
from loopscale.fit.runs_table import canonical_table
from loopscale.fit.synthetic import DEMO_BATCH_TOKENS, DEMO_DENSE, DEMO_PHI, demo_grid

PEAK_LR = 3e-3
DROP = {"B": 50.0, "C": 2.0, "beta": 0.6, "gamma": 0.6}


def variant(decay: float):
    return type(f"LoopedCurve{decay}", (LoopedCurve,), {"decay": decay})


def mpl_curves(seed: int) -> pd.DataFrame:
    """Looped curves whose data term is B S1^-beta and whose drop is the multi-power law's."""
    truth = {**DEMO_DENSE, "phi": DEMO_PHI, "K": 1e-12}  # no annealing term: the drop is added below
    table = looped_curves(
        demo_grid(),
        make_law("looped-curve"),
        truth,
        DEMO_BATCH_TOKENS,
        lambda s, w, c: curve_steps(s, 12, (w, c), c),
        seed=seed,
    )
    rows = table.assign(lr=table["lr_multiplier"] * PEAK_LR, loss=1.0)
    drop = np.zeros(len(table))
    for curve in read_curves(rows, CurveColumns("run", "step", "lr", "loss"), include_warmup=True):
        at = np.flatnonzero(table["run"].to_numpy() == curve.run)
        atoms = drop_atoms(curve.eta, curve.warmup_end, table["step"].to_numpy()[at])
        drop[at] = DROP["B"] * loss_drop(atoms, DROP["C"] * PEAK_LR ** (DROP["gamma"] - 1), DROP["beta"], DROP["gamma"])
    noise = np.exp(0.002 * np.random.default_rng(seed + 100).standard_normal(len(table)))
    return table.assign(val_loss=(table["L_clean"] - drop) * noise)


def held_out_finals(table: pd.DataFrame, law_cls, name: str) -> tuple[float, float, float]:
    """Fit on every evaluation but each run's last; (mean, worst) relative error of the last ones and phi."""
    canon = canonical_table(table.rename(columns={"val_loss": "L"}), "looped-curve")
    last = canon.groupby("run")["step"].transform("max").eq(canon["step"]).to_numpy()
    law = law_cls.bind(r=canon["r"].to_numpy())
    data = law.data_from_table(canon)
    _, state = fit_law(data.subset(~last), law, Loss(), 0, n_refine=4)
    pred = np.exp(law.log_predict(state.best.theta, data.subset(last)))
    rel = np.abs(pred - data.L[last]) / data.L[last]
    phi = law.to_user(state.best.theta)["phi"]
    print(
        f"  {name:<34} held-out cooldown ends: mean {100 * rel.mean():.3f}%  worst {100 * rel.max():.3f}%  "
        f"phi {phi:.3f}"
    )
    return float(rel.mean()), float(rel.max()), phi


def blind_table(table: pd.DataFrame) -> pd.DataFrame:
    """Each evaluation after the warmup as a run at its peak lr: the lr column flat, so S1 = tokens, S2 = 0."""
    return LoopedCurve.rows_to_fit(table).assign(lr_multiplier=1.0)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--synthetic", action="store_true")
    src.add_argument("--table")
    p.add_argument("--loss-col", default="val_loss")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.synthetic:
        table = mpl_curves(args.seed)
    else:
        table = pd.read_csv(args.table).rename(columns={args.loss_col: "val_loss"})
        table = table.drop(columns=[c for c in ("L",) if c in table.columns])
    print(f"{table['run'].nunique()} runs, {len(table)} evaluations")
    for decay in (0.0, 0.9, 0.99, 0.999):
        held_out_finals(table, variant(decay), f"looped-curve, lambda = {decay}")
    held_out_finals(blind_table(table), variant(0.9), "schedule-blind (S1 = tokens, no S2)")


if __name__ == "__main__":
    main()
