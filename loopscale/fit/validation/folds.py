"""The folds of `loopscale validate`: the whole table, leave-one-budget-out (each compute budget predicted by
a refit on the others) and leave-one-r-out (each r > 1 predicted by a refit on the other r: does r^phi predict
an r it has not seen?); for a law of loss curves (`Law.reads_curves`) also whole runs held out (in RUN_GROUPS
groups), every run's final evaluation, the end of its cooldown, predicted from the curves without them, and each
run's first EARLY_SHARE of its steps left out (does phi rest on the early transient, the loss falling from its
first values, which a law of the asymptotic regime need not describe? `flags.early_shift`).

A fold that cannot be done is kept with the reason (`Fold.reason`), so a table with few budgets or few r gets a
sentence, not a crash. Budgets are grouped as everywhere else (`runs_table.budgets`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from loopscale.fit.laws.looped_curve import SCHEDULE_COLUMNS, rows_from_start
from loopscale.fit.runs_table import budgets as budget_labels

FULL, BUDGET, R, RUN, FINAL, EARLY = "full", "budget", "r", "run", "final", "early"
RUN_GROUPS = 5  # a curves table's runs are held out in this many groups (every run once)
# the early fold drops each run's evaluations before (the fit's curve start + EARLY_SHARE) of its steps: on the CPU
# demo's 361-step runs the loss is still leaving its unigram plateau at 7% of the steps (docs/results.md)
EARLY_SHARE = 0.1
MIN_TRAIN_BUDGETS = 2  # a refit on one budget cannot separate N from D


@dataclass(frozen=True)
class Fold:
    """kind: FULL, BUDGET or R; label: what is held out ("C = 1e+18", "r = 8", "all rows"); test: the held-out
    rows (none for FULL); reason: why the fold cannot be done, None when it can."""

    kind: str
    label: str
    test: np.ndarray
    reason: str | None = None

    @property
    def train(self) -> np.ndarray:
        return ~self.test


def full_fold(n_rows: int) -> Fold:
    return Fold(FULL, "all rows", np.zeros(n_rows, bool))


def budget_folds(table, n_params: int) -> list[Fold]:
    """One fold per compute budget. Cannot be done when the table has fewer than MIN_TRAIN_BUDGETS + 1
    budgets, or when the other budgets hold fewer than 2 x n_params rows."""
    labels = budget_labels(table)
    budgets = np.unique(labels)
    if len(budgets) < MIN_TRAIN_BUDGETS + 1:
        why = (
            f"the table has {len(budgets)} compute budget(s): leaving one out needs at least "
            f"{MIN_TRAIN_BUDGETS + 1} (a refit on one budget cannot separate N from D)"
        )
        return [Fold(BUDGET, "every budget", np.zeros(len(labels), bool), why)]
    folds = []
    for budget in budgets:
        test = labels == budget
        n_train = int((~test).sum())
        why = None
        if n_train < 2 * n_params:
            why = f"the other budgets hold {n_train} rows, fewer than {2 * n_params} (twice the law's parameters)"
        folds.append(Fold(BUDGET, f"C = {budget:.3g}", test, why))
    return folds


def r_folds(table, n_params: int) -> list[Fold]:
    """One fold per r > 1. Cannot be done without two or more r > 1 beside r = 1 (dropping the only r > 1
    leaves phi unidentified), without r = 1 runs (they anchor N_eff = N at r = 1), or with too few rows left."""
    if "r" not in table.columns:
        return [Fold(R, "every r", np.zeros(len(table), bool), "the table has no r column (a dense law)")]
    r = table["r"].to_numpy(dtype=float)
    looped = np.unique(r[r > 1])
    if len(looped) == 0:
        return [Fold(R, "every r", np.zeros(len(r), bool), "the table has runs at r = 1 only")]
    folds = []
    for value in looped:
        test = r == value
        left = np.unique(r[~test])
        why = None
        if 1.0 not in left:
            why = "the table has no r = 1 runs to anchor N_eff = N"
        elif len(left) < 2:
            why = f"dropping it leaves runs at r = {', '.join(f'{v:g}' for v in left)} only: phi is not identified"
        elif int((~test).sum()) < 2 * n_params:
            why = f"the other r hold {int((~test).sum())} rows, fewer than {2 * n_params}"
        folds.append(Fold(R, f"r = {value:g}", test, why))
    return folds


def curve_folds(table, n_params: int, curve_start: float = 0.0) -> list[Fold]:
    """A curves table's folds: its runs in RUN_GROUPS groups (each group's curves predicted by a refit on the
    others), one fold holding out every run's last evaluation (the cooldown's end: the point a final-point
    fit would read) so that each is predicted from the curves without any of them, and one holding out each
    run's evaluations before curve_start + EARLY_SHARE of its steps (`rows_from_start`; curve_start: the fit's
    `--curve-start`, from where the table's rows already start)."""
    runs = table["run"].astype(str).to_numpy()
    names = np.unique(runs)
    folds = []
    if len(names) < 2:
        folds.append(Fold(RUN, "whole runs", np.zeros(len(runs), bool), "the table has one run"))
    else:
        for g in range(min(RUN_GROUPS, len(names))):
            held = names[g :: min(RUN_GROUPS, len(names))]
            test = np.isin(runs, held)
            why = None if int((~test).sum()) >= 2 * n_params else "too few rows left to refit"
            folds.append(Fold(RUN, f"runs {g + 1} of {min(RUN_GROUPS, len(names))} ({len(held)})", test, why))
    step = table["step"].to_numpy(dtype=float)
    last = np.zeros(len(runs), bool)
    for name in names:
        rows = np.flatnonzero(runs == name)
        last[rows[np.argmax(step[rows])]] = True
    folds.append(Fold(FINAL, "every run's final evaluation", last))
    return folds + [early_fold(table, n_params, curve_start)]


def early_fold(table, n_params: int, curve_start: float) -> Fold:
    """Each run's evaluations before curve_start + EARLY_SHARE of its steps held out (the refit sees the rest). A
    forked parent's stable-phase rows are judged by its shortest branch, as `--curve-start` keeps them
    (`rows_from_start`): a long branch keeps its parent's rows past the short branch's share."""
    share = curve_start + EARLY_SHARE
    label = f"each run's evaluations before {share:.0%} of its steps"
    none = np.zeros(len(table), bool)
    if share >= 1:
        return Fold(EARLY, label, none, f"the fit starts each curve at {curve_start:.0%}")
    if not all(c in table.columns for c in SCHEDULE_COLUMNS):
        return Fold(EARLY, label, none, "the table has no schedule terms (a curve law's canonical table has them)")
    test = ~rows_from_start(table, share)
    why = None
    if not test.any():
        why = "no run has evaluations there"
    elif int((~test).sum()) < 2 * n_params:
        why = f"the rest holds {int((~test).sum())} rows, fewer than {2 * n_params}"
    return Fold(EARLY, label, test, why)


def folds_for(table, n_params: int, dense: bool, curves: bool, curve_start: float = 0.0) -> list[Fold]:
    """Every fold `validate` runs: the whole table, each budget, each r > 1 (not for a dense law) and, for a law
    of loss curves, whole runs, every cooldown's end and the early evaluations (`curve_folds`)."""
    folds = [full_fold(len(table)), *budget_folds(table, n_params)]
    folds += [] if dense else r_folds(table, n_params)
    return folds + (curve_folds(table, n_params, curve_start) if curves else [])
