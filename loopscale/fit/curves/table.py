"""A curves table read into one schedule per run: the lr at every step, the warmup's end, the evaluations.

A curves table has one row per (run, evaluation): the run's name, the step, the learning rate at that step and
the loss measured there (`loopscale collect` writes one beside the runs table; the multi-power law's public
curves have the same shape: schedule, step, lr, loss). The laws need the lr at EVERY step (the area S1 and
each step's drop), the table gives it at its rows only: between two rows it is interpolated linearly, which
is exact for the linear pieces of warmup-stable-decay and linear-decay schedules when their corners are rows
(loopscale's own runs evaluate at them) and close for smooth ones (a cosine sampled every 128 steps is within
1e-4 of itself). Before a run's first row the lr is taken to rise linearly from 0 at step 0 (a linear warmup,
`warmup_from_zero`; the public curves start at the warmup's end) or to hold the first row's value.

A curves table scored across r (`loopscale collect` with trainer.curve_r_eval: an `r_eval` column beside the run's
trained `r`) holds each run's curve once per r_eval; a curve law describes the run trained, so only its rows at
the trained r are read (`trained_r_rows`), never a mix of pass counts.

Rows whose loss is missing still place the schedule (a corner between evaluations); they are not fitted.
Rows whose lr is missing take it from the schedule the other rows place (a wandb export logs the lr with the
training loss, every 50 steps, and the validation loss at other steps, every 200: a table of both, one row per
logged step, is read as one curve).
Rows before the warmup's end (the first step at which the lr stops rising) are not fitted by default: the
laws describe the loss after warmup (Luo et al. 2025, S_W is the warmup's area; Tissue et al. 2024).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from loopscale.errors import InputError


@dataclass(frozen=True)
class CurveColumns:
    """The curves table's column names (defaults: what `loopscale collect` writes)."""

    run: str = "run"
    step: str = "step"
    lr: str = "lr"
    loss: str = "val_loss"


@dataclass(frozen=True)
class Curve:
    """One run's schedule and evaluations.

    eta:        (T + 1,) the lr at every step 0..T (T: the run's last row)
    warmup_end: the first step at which the lr stops rising (0 for a schedule with no warmup)
    steps:      (E,) the evaluated steps, ascending, each >= warmup_end when fitted
    loss:       (E,) the loss measured at them
    """

    run: str
    eta: np.ndarray
    warmup_end: int
    steps: np.ndarray
    loss: np.ndarray

    @property
    def area(self) -> np.ndarray:
        """(T + 1,) P[t] = sum_{tau <= t} eta_tau: the lr area up to and including step t (S1 + S_W)."""
        return np.cumsum(self.eta)

    def restricted(self, keep: np.ndarray) -> Curve:
        """The same schedule with only the evaluations `keep` (a boolean mask over `steps`)."""
        return Curve(self.run, self.eta, self.warmup_end, self.steps[keep], self.loss[keep])


def trained_r_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of a curves table at each run's trained r: where it has both `r` and `r_eval` columns, those with
    r_eval = r (an empty r_eval, a row written before it, is the trained r); else the table as it is."""
    if not {"r", "r_eval"} <= set(table.columns):
        return table
    r_eval = pd.to_numeric(table["r_eval"], errors="coerce")
    keep = r_eval.isna() | (r_eval == pd.to_numeric(table["r"], errors="coerce"))
    return table.loc[keep.to_numpy(dtype=bool)]


def warmup_end(eta: np.ndarray) -> int:
    """The first step at which the lr stops rising: 0 for a schedule that starts at its peak."""
    rising = np.diff(eta) > 0
    if not rising.any() or not rising[0]:
        return 0
    falls = np.flatnonzero(~rising)
    return int(falls[0]) if len(falls) else len(eta) - 1


def schedule_from_rows(
    steps: np.ndarray, lrs: np.ndarray, warmup_from_zero: bool = True, last_step: int | None = None
) -> np.ndarray:
    """(T + 1,) the lr at every step 0..T (T: `last_step`, default the last row's) from (step, lr) rows
    (ascending steps): linear between rows; before the first row a linear rise from 0 at step 0
    (`warmup_from_zero`) or the first row's value held; after the last row its value held."""
    steps = np.asarray(steps, dtype=np.int64)
    lrs = np.asarray(lrs, dtype=float)
    if steps[0] > 0 and warmup_from_zero:
        steps, lrs = np.concatenate([[0], steps]), np.concatenate([[0.0], lrs])
    grid = np.arange(int(steps[-1] if last_step is None else last_step) + 1)
    return np.interp(grid, steps, lrs)


def read_curves(
    table: pd.DataFrame,
    columns: CurveColumns = CurveColumns(),
    warmup_from_zero: bool = True,
    include_warmup: bool = False,
    last_repeated: bool = False,
) -> list[Curve]:
    """One Curve per run of `table` (its rows at the trained r: `trained_r_rows`), in the order runs first appear.
    Refused with one line: a missing
    column, a step that is not a whole number >= 0 or repeats within a run, an lr that is not finite and
    >= 0 (or 0 everywhere), a loss that is not > 0 where given, a run with no evaluation left to fit; a step
    logged twice with two values, unless `last_repeated` (a resumed run's log: its last value read)."""
    table = trained_r_rows(table)
    missing = [c for c in (columns.run, columns.step, columns.lr, columns.loss) if c not in table.columns]
    if missing:
        raise InputError(
            f"the curves table has no column(s) {missing} (it has {list(table.columns)}; name them with "
            "--run-col, --step-col, --lr-col, --loss-col)"
        )
    step = pd.to_numeric(table[columns.step], errors="coerce").to_numpy(dtype=float)
    lr = pd.to_numeric(table[columns.lr], errors="coerce").to_numpy(dtype=float)
    loss = pd.to_numeric(table[columns.loss], errors="coerce").to_numpy(dtype=float)
    bad_step = ~np.isfinite(step) | (step < 0) | (step != np.round(step))
    if bad_step.any():
        raise InputError(f"column {columns.step!r}: rows {_rows(bad_step)} are not whole numbers >= 0")
    bad_lr = np.isinf(lr) | (lr < 0) | np.isnan(lr) & table[columns.lr].notna().to_numpy()
    if bad_lr.any():
        raise InputError(f"column {columns.lr!r}: rows {_rows(bad_lr)} are not finite numbers >= 0 (or empty)")
    bad_loss = np.isfinite(loss) & (loss <= 0) | np.isinf(loss)
    if bad_loss.any():
        raise InputError(f"column {columns.loss!r}: rows {_rows(bad_loss)} are not finite numbers > 0")
    runs = table[columns.run].astype(str).to_numpy()
    curves = []
    for run in pd.unique(runs):
        rows = np.flatnonzero(runs == run)
        s, run_lr, run_loss = _one_row_per_step(run, step[rows], lr[rows], loss[rows], last_repeated)
        placed = np.isfinite(run_lr)  # rows with an empty lr read it off the others' schedule
        if not (run_lr[placed] > 0).any():
            raise InputError(f"run {run!r}: its lr is 0 or empty at every row (no schedule to read)")
        eta = schedule_from_rows(s[placed], run_lr[placed], warmup_from_zero, last_step=int(s[-1]))
        w = warmup_end(eta)
        measured = np.isfinite(run_loss) & ((s >= w) | include_warmup)
        if not measured.any():
            raise InputError(f"run {run!r}: no loss measured at or after the warmup's end (step {w})")
        curves.append(Curve(str(run), eta, w, s[measured], run_loss[measured]))
    return curves


def _one_row_per_step(run, step: np.ndarray, lr: np.ndarray, loss: np.ndarray, last_repeated: bool = False):
    """(steps ascending, the lr at each, the loss at each) of one run's rows: rows at the same step merged, each
    value from the row that has it (a log of the lr with the training loss and one of the validation loss write
    the same step twice, each with one value); two different values of one step refused, or the last one read
    (`last_repeated`: a run resumed from a checkpoint logs again the steps since it)."""
    rows = pd.DataFrame({"step": step.astype(np.int64), "lr": lr, "loss": loss}).groupby("step", sort=True)
    low, high = (rows.last(), rows.last()) if last_repeated else (rows.min(), rows.max())  # empty values skipped
    clash = ((low != high) & low.notna()).any(axis=1).to_numpy()
    if clash.any():
        raise InputError(
            f"run {run!r}: step {int(low.index[np.flatnonzero(clash)[0]])} appears twice, with two different lr "
            "or loss values (a resumed run's log: --repeated-steps last reads the last)"
        )
    return low.index.to_numpy(dtype=np.int64), low["lr"].to_numpy(dtype=float), low["loss"].to_numpy(dtype=float)


def _rows(mask: np.ndarray) -> str:
    """The first few row numbers (0-based, as the table is read) where `mask` is true."""
    idx = np.flatnonzero(mask)
    more = f" (and {len(idx) - 5} more)" if len(idx) > 5 else ""
    return ", ".join(str(i) for i in idx[:5]) + more
