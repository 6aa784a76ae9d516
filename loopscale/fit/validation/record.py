"""A validation record as data: what `run.validate` returns, `loopscale validate --out` writes and the report reads
back (`analysis/report_inputs.py`), with one JSON form (the keys the records have always had, in their order):

    fit: {"law", "params", "path", "phi_interval", "interval_source", "json"?}   # the fit validated
    n_rows, forms: [{"label", "law", "loss", "reference", "k", "reason"}], folds: [{"kind", "label", "n_test",
    "reason"}], results: [`FoldResult`, one per (form, fold) fitted],
    approach2, lr_confound, once, conventions (each None when not run), verdict (`Verdict`), jobs, elapsed_s, versions,
    and from `loopscale validate`: tables, table_check, seed_repeats, warnings.

The rows of forms and folds stay the objects `run` writes; Approach 2's, the lr confound's and the conventions'
sections are typed (Approach2, LrSection, Conventions); `record["key"]` reads a field by its JSON key
(`record_blocks.JsonBlock`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, NotRequired, TypedDict

from loopscale.atomic import json_text
from loopscale.fit.record_blocks import ABSENT, JsonBlock


@dataclass(frozen=True)
class Verdict(JsonBlock):
    """The one verdict line, what is flagged, whether the law holds (nothing flagged), the mean and worst held-out
    |error| over the budget and the r folds, the largest phi shift and the interval's half-width (`flags.verdict`)."""

    KEY: ClassVar[str] = "verdict"

    line: str = ABSENT
    flags: list[str] = ABSENT
    holds: bool = ABSENT
    budget_error: tuple[float, float] | None = ABSENT
    r_error: tuple[float, float] | None = ABSENT
    phi_shift: float | None = ABSENT
    half_width: float | None = ABSENT


@dataclass
class FoldResult(JsonBlock):
    """Form `form` on fold `fold` (0: the whole table): whether it could be fitted and why not, the parameters and
    objective, the training rows and their residual RMS, and either the AICc row (`information`, the whole table;
    `starts` until the folds have used them) or the held-out errors, rows, predictions and measured losses
    (`held_out` ...; `noise_ratio`: held-out RMS over the training RMS, set by `flags.held_out_summary`); a fit
    weighed by position also the sigma model these rows chose (`position_sigma`)."""

    KEY: ClassVar[str] = "result"

    form: int = ABSENT
    fold: int = ABSENT
    ok: bool = ABSENT
    reason: str | None = ABSENT
    params: dict[str, float] = ABSENT
    objective: float = ABSENT
    n_train: int = ABSENT
    train_rms_log: float = ABSENT
    information: dict = ABSENT
    held_out: dict = ABSENT
    rows: list[int] = ABSENT
    predicted: list[float] = ABSENT
    observed: list[float] = ABSENT
    starts: list = ABSENT
    noise_ratio: float = ABSENT
    position_sigma: dict | None = ABSENT  # a position-weighted fit's: the sigma model these rows chose (None: ~0)


class LrSection(TypedDict, total=False):
    """The lr confound's section (`lr_section`): the grid step, each (r, recipe) group's lrs, losses and best lr
    (BestLr's keys, its shared-lr L and penalty, its move from r = 1's in grid steps), the flags, and phi refitted
    with each r at its best lr; or only the reason it was not read."""

    groups: list[dict[str, Any]]
    flags: list[str]
    phi_shared: float | None
    reason: str | None
    step: float | None
    phi_best_points: float | None
    phi_penalty_all: float | None


class Approach2Budget(TypedDict):
    """One budget of Approach 2 (`approach2.iso_flop_exponent`): its C (the geometric mean of its runs'), its sizes,
    the window about the lowest loss ([N_lo, N_hi] and its point count), N* with its bootstrap 95% interval and
    the se of ln N*; N* None with the reason where the budget has no bracketed minimum."""

    C: float
    n_sizes: int
    window: list[float] | None
    n_window: int
    N_star: float | None
    interval: list[float] | None
    log_se: float | None
    reason: str | None


class Approach2(TypedDict):
    """Approach 2's section (`approach2.iso_flop_exponent`, its module docstring the method): the budgets, the
    exponent a of N* ~ C^a with its se and 95% interval (None, with the reason, below two budgets with an N*), the
    law's beta / (alpha + beta), the per-budget rule, the sigma of log L and its source; with per-budget se, the
    line's chi2 / dof and the between-budget tau in ln N*; the interpolation rule's exponent (a record from before
    it has none)."""

    budgets: list[Approach2Budget]
    a: float | None
    a_se: float | None
    a_interval: list[float] | None
    a_law: float | None
    reason: str | None
    method: str
    sigma_log: float | None
    sigma_source: str | None
    a_chi2_dof: NotRequired[float | None]
    tau_log: NotRequired[float]
    a_interp: NotRequired[float | None]


class ConventionRow(TypedDict, total=False):
    """One convention recounted: phi and the N*(C) exponent a refitted, their moves, whether either moves beyond
    its interval's half-width; or the reason it cannot be recounted."""

    convention: str
    change: str
    phi: float | None
    delta_phi: float | None
    a: float | None
    delta_a: float | None
    flagged: bool
    reason: str | None


class Conventions(TypedDict):
    """The conventions' section (`convention_table`): the first row is the table as recorded."""

    rows: list[ConventionRow]
    flags: list[str]
    phi_half_width: float | None


@dataclass(frozen=True)
class ValidationRecord(JsonBlock):
    """One `loopscale validate` record (module docstring)."""

    KEY: ClassVar[str] = "validation record"
    NESTED: ClassVar[dict[str, Callable]] = {
        "verdict": Verdict.from_json,
        "results": lambda rows: [FoldResult.from_json(r) for r in rows] if isinstance(rows, list) else rows,
    }

    fit: dict = ABSENT
    n_rows: int = ABSENT
    forms: list[dict] = ABSENT
    folds: list[dict] = ABSENT
    results: list[FoldResult] = ABSENT
    approach2: Approach2 | None = ABSENT
    lr_confound: LrSection | None = ABSENT
    once: dict | None = ABSENT  # once.OnceSection: the looped runs against their block run once, equal D
    conventions: Conventions | None = ABSENT
    verdict: Verdict = ABSENT
    jobs: int = ABSENT
    elapsed_s: float = ABSENT
    versions: dict[str, str] = ABSENT
    tables: list[str] = ABSENT
    table_check: dict = ABSENT
    seed_repeats: Any = ABSENT
    warnings: list[str] = ABSENT

    def write_json(self, path) -> None:
        """The record as `loopscale validate --out X.json` writes it: plain JSON (numpy values plain, NaN null)."""
        Path(path).write_text(json_text(self.to_json()) + "\n")

    def with_inputs(
        self, fit_json: str, tables: list[str], check: dict, repeats, warnings: list[str]
    ) -> ValidationRecord:
        """The record with what `loopscale validate` read: the fit file it validates (report --validation checks
        it), the tables, their check against the fit's (`inputs.table_check`; "allowed": validated though they
        changed), the seed repeats averaged (`inputs.point_means`) and the table's warnings."""
        fit, checked = {**self.fit, "json": fit_json}, {**check, "allowed": bool(check["changed"])}
        return self.replace(fit=fit, tables=tables, table_check=checked, seed_repeats=repeats, warnings=warnings)
