"""The looped law at every evaluation of every run's loss curve (issue 55): the data term reads the lr schedule.

    L(t) = E + A N_eff^-alpha + B S1(t)^-beta - K S2(t),     N_eff = N_once + r^phi N_rec
                                                             (params E, A, alpha, B, beta, phi, K; lambda held)

S1(t) = sum_{k<=t} (eta_k / eta_peak) x tokens per step: the tokens seen, each weighted by its lr relative to
the run's peak (= D at a constant lr: the final-point law's data term, D, is S1 of a run that never decays), the
multi-power and LR-annealing laws' "forward area" in tokens. S2(t) = (1 - lambda) sum_{k<=t} m_k,
m_k = lambda m_{k-1} + (eta_{k-1} - eta_k) / eta_peak: the LR-annealing law's (Tissue et al. 2024) annealing
area with its momentum lambda per step, scaled so a drop of the whole peak, held long enough, gives S2 = 1 (K is
then the loss a full anneal takes off, in nats). lambda = 0 by default: S2(t) = (peak - eta_t) / peak after the
warmup, the loss drop following the lr at once. On curves whose drop is the multi-power law's (its G saturates
within tens of steps, Luo et al. 2025) each cooldown's end was predicted from the rest of the curves to 0.23%
with lambda = 0, 0.42% at 0.9, 1.5% at 0.99, 1.9% at 0.999 and 2.2% by the schedule-blind law
(benchmarks/bench_curve_forms.py, docs/results.md, issue 55). A variant is a subclass with its own `decay`,
recorded as the parameter `lambda`.

The table is a curves table (`loopscale collect`'s runs_curves.csv): one row per (run, evaluation) with the
run's model (N_once, N_rec, r), its name (`run`), `step`, `tokens` and the lr (`lr_multiplier`, else `lr`);
the loss is --loss-col val_loss. Each run's schedule is read from its rows (`loopscale.fit.curves.table`: linear
between rows, which are the schedule's corners in loopscale's curves). A forked branch's rows up to its fork
(`from_parent`) are its parent's stable phase, the same rows in every branch: `rows_to_fit` keeps them once; a
table scored across r (an `r_eval` column, trainer.curve_r_eval) is read at each run's trained r.
The fit is `fit_table`'s (multi-start, phi profiled, the bootstrap clustered by parent run or --cluster run: the
points of one curve are not independent draws; the residuals' autocorrelation along each curve is recorded).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd

from loopscale.errors import InputError
from loopscale.fit.curves.drops import annealing_area
from loopscale.fit.curves.table import CurveColumns, read_curves, trained_r_rows
from loopscale.fit.laws.form import LawData, user_value
from loopscale.fit.laws.looped import Looped
from loopscale.fit.laws.lse import lse_and_weights
from loopscale.fit.laws.registry import register

DEFAULT_DECAY = 0.0
# loopscale's wsd run (loopscale/train/optim/schedule.py, optim=wsd): a 20% linear cooldown to 0, so the lr's
# area at the end is 1 - 0.2 / 2 = 0.9 of the tokens (the short warmup left out), and the cooldown, hundreds of
# steps long, takes its whole anneal (lambda = 0: S2 = 1 - eta_end / peak, 1 - 1 / cooldown steps): S2 = 1 at the end
WSD_AREA_SHARE = 0.9
WSD_FINAL_ANNEAL = 1.0
K_BOUNDS = (-20.0, 5.0)  # ln K: K from ~0 to ~150 nats per full anneal
# the schedule's terms of each fitted row, written by `rows_to_fit` from the run's whole schedule, with the lambda
# they were summed at (S1 in tokens, S2 in units of the peak lr)
S1_COLUMN, S2_COLUMN, DECAY_COLUMN = "S1_tokens", "S2_anneal", "S2_lambda"
SCHEDULE_COLUMNS = (S1_COLUMN, S2_COLUMN, DECAY_COLUMN)


def schedule_features(table, decay: float) -> tuple[np.ndarray, np.ndarray]:
    """(S1, S2) per row of a curves table (any order): each run's schedule from its rows, the lr relative to
    its peak; S1 in tokens, S2 in units of the peak lr (module docstring)."""
    for need in ("run", "step", "tokens"):
        if need not in table:
            raise InputError(f"the looped-curve law reads a curves table: it has no column {need!r}")
    lr = "lr_multiplier" if "lr_multiplier" in table else "lr"
    if lr not in table:
        raise InputError("the looped-curve law reads a curves table: it has no column 'lr_multiplier' or 'lr'")
    frame = pd.DataFrame({k: np.asarray(table[k]) for k in ("run", "step", "tokens", lr)})
    frame["loss"] = 1.0  # every row is an evaluation to place: the features are the law's, the loss the fit's
    curves = read_curves(frame, CurveColumns("run", "step", lr, "loss"), include_warmup=True)
    S1, S2 = np.empty(len(frame)), np.empty(len(frame))
    runs = frame["run"].astype(str).to_numpy()
    steps = frame["step"].to_numpy(dtype=np.int64)
    for curve in curves:
        rows = np.flatnonzero(runs == curve.run)
        at = steps[rows]
        per_step = np.asarray(frame["tokens"], dtype=float)[rows] / np.maximum(at, 1)
        eta = curve.eta / curve.eta.max()
        S1[rows] = np.cumsum(eta)[at] * per_step
        S2[rows] = (1.0 - decay) * annealing_area(eta, curve.warmup_end, at, decay) if decay < 1 else 0.0
    return S1, S2


def rows_from_start(table: pd.DataFrame, share: float) -> np.ndarray:
    """(rows,) which rows of a curve law's canonical table `fit --curve-start SHARE` keeps: each run's evaluations
    from `share` of its steps on (step >= share x the run's last evaluated step; a forked parent's shared row by
    its shortest branch, so the rows kept do not depend on the table's order). The rows keep the S1 and S2 that
    `rows_to_fit` summed over the whole schedule from step 0, so dropping a row leaves the others' terms as they
    were. Refused where a table lacks them (the terms would be read from the kept rows alone) or a share outside
    [0, 1)."""
    if not 0 <= share < 1:
        raise InputError(f"--curve-start {share}: a share of each run's steps, in [0, 1)")
    if share == 0:
        return np.ones(len(table), dtype=bool)
    if not all(c in table.columns for c in SCHEDULE_COLUMNS):
        raise InputError("--curve-start reads a curves table (run, step, tokens and the lr per evaluation)")
    last = table.groupby(table["run"].astype(str).to_numpy())["step"].transform("max")
    if "from_parent" in table.columns and "parent" in table.columns:
        # a parent's stable-phase row is kept once, under whichever branch came first (`rows_to_fit`): it is the
        # parent's, so it stays where ANY of the parent's branches keeps it (the shortest branch's start), the
        # same rows whatever the table's order
        shortest = last.groupby(table["parent"].astype(str).to_numpy()).transform("min")
        last = last.where(~table["from_parent"].astype(bool), shortest)
    return (table["step"] >= share * last).to_numpy(dtype=bool)


@register
@dataclass(frozen=True)
class LoopedCurve(Looped):
    name = "looped-curve"
    formula = "L(t) = E + A (N_once + r^phi N_rec)^-alpha + B S1(t)^-beta - K S2(t)"
    rival = None
    has_hessian = False
    compute_optimal = False  # a point of the curve has no budget of its own
    point_columns = ("run", "step")
    reads_curves = True

    decay: ClassVar[float] = DEFAULT_DECAY  # lambda, held: a variant is a subclass with its own
    # the final-point law a run's last evaluation follows (`final_point_params`): what `curve_worth` weighs the
    # curves against and `power` simulates
    final_law: ClassVar[str] = Looped.name

    @classmethod
    def rows_to_fit(cls, table):
        """The rows the law describes: each run's at its trained r (`trained_r_rows`: a curves table scored across
        r holds other pass counts too), from the end of each run's warmup on (the first row at its peak lr;
        the warmup's rows are read only as the schedule's start, a linear rise from 0); and a forked branch's
        rows up to its fork, its parent's stable phase repeated in every branch of that parent (`from_parent`),
        kept once (the first branch's). Each kept row carries its S1 and S2 (`SCHEDULE_COLUMNS`), summed over its
        run's whole schedule BEFORE any row is dropped: read from the kept rows alone, a later branch whose shared
        stable phase went to the first branch would start at its first own row with the lr rising from 0 there,
        and its S1 would be up to 2x too small (273 of the tuned demo's 635 fitted rows, by 1.0-2.0x). A table
        that already carries them (this method run twice) keeps them."""
        table = trained_r_rows(table).reset_index(drop=True)
        lr = "lr_multiplier" if "lr_multiplier" in table.columns else "lr"
        if not {"run", "step", lr} <= set(table.columns):
            return table
        if not cls._has_schedule_columns(table) and "tokens" in table.columns:
            S1, S2 = schedule_features(table, cls.decay)
            table = table.assign(**{S1_COLUMN: S1, S2_COLUMN: S2, DECAY_COLUMN: cls.decay})
        order = table.sort_values(["run", "step"], kind="stable")
        peak = order.groupby("run")[lr].transform("max")
        reached = (order[lr] >= peak * (1 - 1e-9)).groupby(order["run"]).cummax()
        keep = reached.reindex(table.index).to_numpy(dtype=bool).copy()
        if "from_parent" in table.columns and "parent" in table.columns:
            shared = table["from_parent"].astype(bool).to_numpy()
            key = table["parent"].astype(str) + "@" + table["step"].astype(str)
            keep &= ~(shared & key.duplicated().to_numpy())
        return table.loc[keep].reset_index(drop=True)

    @classmethod
    def data_from_table(cls, table) -> LawData:
        """From a curves table, S1 and S2 of each row's schedule; from a runs table (no `run` / `step`: what a
        figure or advice asks at given N and D), each row a run at its peak lr to its end: S1 = D, S2 = 0."""
        base = Looped.data_from_table(table)
        if not ("run" in table and "step" in table):
            return LawData(base.N_once, base.N_rec, base.r, base.D, base.L, extra={"S2": np.zeros(len(base))})
        if cls._has_schedule_columns(table):  # summed over each run's whole schedule by `rows_to_fit`
            S1, S2 = (np.asarray(table[c], dtype=float) for c in (S1_COLUMN, S2_COLUMN))
        else:
            S1, S2 = schedule_features(table, cls.decay)
        return LawData(base.N_once, base.N_rec, base.r, S1, base.L, extra={"S2": S2})

    @classmethod
    def _has_schedule_columns(cls, table) -> bool:
        """Whether the table carries S1 and S2 from `rows_to_fit` at this law's lambda (a variant with its own
        lambda sums its own S2)."""
        if not all(c in table for c in SCHEDULE_COLUMNS):
            return False
        decay = np.asarray(table[DECAY_COLUMN], dtype=float)
        return bool(len(decay)) and bool(np.all(decay == cls.decay))

    def final_point_params(self, params) -> dict:
        """The final loss of loopscale's wsd run of D tokens as the looped law: B S1^-beta - K S2 at the end
        is B (0.9 D)^-beta - K, so E' = E - K and B' = B 0.9^-beta (what `advise` and `power` read)."""
        out = dict(params)
        beta = np.asarray(params["beta"], dtype=float)
        out["E"] = np.asarray(params["E"], dtype=float) - WSD_FINAL_ANNEAL * np.asarray(params["K"], dtype=float)
        out["B"] = np.asarray(params["B"], dtype=float) * WSD_AREA_SHARE**-beta
        return out

    def extra_internal_names(self) -> tuple[str, ...]:
        return ("phi", "k")

    def extra_user_names(self) -> tuple[str, ...]:
        return ("phi", "K")

    def extra_bounds(self) -> list[tuple[float, float]]:
        return [*super().extra_bounds(), K_BOUNDS]

    def extras_to_user(self, x: np.ndarray) -> dict[str, float]:
        return {"phi": float(x[0]), "K": float(np.exp(x[1])), "lambda": self.decay}

    def extras_from_user(self, params) -> list[float]:
        return [user_value(self.name, params, "phi", log=False), user_value(self.name, params, "K", log=True)]

    def classic_axes(self) -> list[np.ndarray]:
        return [*super().classic_axes(), np.log([0.01, 0.3, 3.0])]

    def projected_axes(self, values: np.ndarray) -> list[np.ndarray]:
        return [values, np.log([0.01, 0.3, 3.0])]

    def log_predict_batch(self, thetas: np.ndarray, data: LawData) -> np.ndarray:
        return self._terms(np.atleast_2d(np.asarray(thetas, dtype=float)), data, jac=False)[0]

    def log_predict_and_jac_batch(self, thetas: np.ndarray, data: LawData):
        return self._terms(np.atleast_2d(np.asarray(thetas, dtype=float)), data, jac=True)

    def _terms(self, thetas: np.ndarray, data: LawData, jac: bool):
        """log L_hat = log(P - K S2), P = exp(LSE(a - alpha l_N, b - beta log S1, e)), l_N = log N_eff with the
        law's multiplier (`log_n_eff_batch`: r^phi here, a variant's own), ln K the last coordinate; with jac,
        d log L_hat = (P / L_hat) d log P for the LSE's parameters and the multiplier's, -K S2 / L_hat for ln K.
        A prediction <= 0 (a drop larger than the rest) is floored at 1e-9 P, which the objective sees as a far
        miss."""
        e, a, alpha, b, beta = (thetas[:, i : i + 1] for i in range(5))
        k = thetas[:, -1:]
        l_n, dl_n = self.log_n_eff_batch(thetas, data, jac=jac)  # (M, rows), (M, rows, multiplier's extras)
        log_p, (w1, w2, w3) = lse_and_weights(a - alpha * l_n, b - beta * data.log_D, e)
        P = np.exp(log_p)
        drop = np.exp(k) * data.extra.get("S2", np.zeros(len(data)))
        L_hat = np.maximum(P - drop, 1e-9 * P)
        log_pred = np.log(L_hat)
        if not jac:
            return log_pred, None
        ratio = P / L_hat
        J = np.empty((len(thetas), len(data), self.n_params))
        J[:, :, 0] = ratio * w3
        J[:, :, 1] = ratio * w1
        J[:, :, 2] = -ratio * w1 * l_n
        J[:, :, 3] = ratio * w2
        J[:, :, 4] = -ratio * w2 * data.log_D
        J[:, :, 5:-1] = (-ratio * alpha * w1)[:, :, None] * dl_n
        J[:, :, -1] = -drop / L_hat
        return log_pred, J
