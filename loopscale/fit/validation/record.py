"""A validation record as data: what `run.validate` returns, `loopscale validate --out` writes and the report reads
back (`analysis/report_inputs.py`), with one JSON form (the keys the records have always had, in their order):

    fit: {"law", "params", "path", "phi_interval", "interval_source", "json"?}   # the fit validated
    n_rows, forms: [{"label", "law", "loss", "reference", "k", "reason"}], folds: [{"kind", "label", "n_test",
    "reason"}], results: [one per (form, fold): "form", "fold", "ok", "reason", "params", ...],
    approach2, lr_confound, conventions (each None when not run), verdict (`Verdict`), jobs, elapsed_s, versions,
    and from `loopscale validate`: tables, table_check, seed_repeats, warnings.

The rows of forms, folds and results and the three sections stay the objects their modules write (`run`,
`approach2`, `lr_confound`, `conventions`); `record["key"]` reads a field by its JSON key (`record_blocks.JsonBlock`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

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


@dataclass(frozen=True)
class ValidationRecord(JsonBlock):
    """One `loopscale validate` record (module docstring)."""

    KEY: ClassVar[str] = "validation record"
    NESTED: ClassVar[dict[str, Any]] = {"verdict": Verdict.from_json}

    fit: dict = ABSENT
    n_rows: int = ABSENT
    forms: list[dict] = ABSENT
    folds: list[dict] = ABSENT
    results: list[dict] = ABSENT
    approach2: dict | None = ABSENT
    lr_confound: dict | None = ABSENT
    conventions: dict | None = ABSENT
    verdict: Verdict = ABSENT
    jobs: int = ABSENT
    elapsed_s: float = ABSENT
    versions: dict[str, str] = ABSENT
    tables: list[str] = ABSENT
    table_check: dict = ABSENT
    seed_repeats: Any = ABSENT
    warnings: list[str] = ABSENT
