"""A test-time record as data (`loopscale fit-testtime`, `testtime.fit_testtime`), one JSON form: the keys the
records have always had, in their order (`record_blocks.JsonBlock`: `record["key"]` reads a field by its key).

    {"law", "formula", "shape", "per_model": {model: TestTimeFit}, "joint": TestTimeFit | None, "shapes" (both
     shapes' leave-one-out errors, `testtime.compare_shapes`), "models": {model: its curve and the gain of one more
     pass, `testtime.model_summary`}, "loss": {"kind", "delta"}, and from `loopscale fit-testtime`: "input",
     "testtime_phi"}
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, TypedDict

from loopscale.fit.record_blocks import ABSENT, JsonBlock
from loopscale.fit.verdict_record import Conditioning


@dataclass(frozen=True)
class TestTimeFit(JsonBlock):
    """The law fitted to one model's rows, or to all (the joint fit, one rate) (`testtime.fit_one`): the shape, the
    models, the parameters and those held, rows, free parameters and dof, the noise scale, the optimum's objective
    and basin, the residual RMS and predictions, the 95% profile intervals, the held-out largest r_eval and the
    conditioning (`testtime_checks.checks_record`)."""

    __test__ = False  # not a pytest class
    KEY: ClassVar[str] = "test-time fit"
    NESTED: ClassVar[dict[str, Callable]] = {"conditioning": Conditioning.from_json}

    shape: str = ABSENT
    models: list[str] = ABSENT
    params: dict[str, float] = ABSENT
    held: dict[str, float] = ABSENT
    n_rows: int = ABSENT
    n_free: int = ABSENT
    dof: int = ABSENT
    sigma_log: float | None = ABSENT
    objective: float = ABSENT
    n_best_basin: int = ABSENT
    n_refined: int = ABSENT
    residual_rms_log: float = ABSENT
    predicted: list[float] = ABSENT
    intervals: dict[str, list] = ABSENT
    holdout: dict | None = ABSENT
    conditioning: Conditioning = ABSENT


def _fits(d):
    return {m: TestTimeFit.from_json(f) for m, f in d.items()} if isinstance(d, dict) else d


class HeldOut(TypedDict):
    """Each model's largest r_eval left out and predicted by the refit on the rest (`testtime._holdout_largest`)."""

    n_rows: int
    mean_abs_rel_error: float
    r_eval: list[float]


class ShapeComparison(TypedDict):
    """Both shapes' leave-one-row-out errors per model (`testtime.compare_shapes`), and the better shape."""

    method: str
    rows: list  # the (model, r_eval) rows left out
    mean_abs_rel_error: dict[str, float | None]
    better: str | None
    abs_rel_error: dict[str, list[float]]


class ModelSummary(TypedDict):
    """A model's trained r, its fitted curve at r = 1, 2, ... and the gain of one more pass there
    (`testtime.model_summary`)."""

    trained: str
    r_scale: float
    quoted_r: float
    curve_r: list[float]
    curve_L: list[float]
    gain_next_pass: list[float]


@dataclass(frozen=True)
class TestTimeRecord(JsonBlock):
    """One `loopscale fit-testtime` record (module docstring)."""

    __test__ = False
    KEY: ClassVar[str] = "test-time record"
    NESTED: ClassVar[dict[str, Callable]] = {
        "per_model": _fits,
        "joint": lambda f: None if f is None else TestTimeFit.from_json(f),
    }

    law: str = ABSENT
    formula: str = ABSENT
    shape: str = ABSENT
    per_model: dict[str, TestTimeFit] = ABSENT
    joint: TestTimeFit | None = ABSENT
    shapes: ShapeComparison | None = ABSENT
    models: dict[str, ModelSummary] = ABSENT
    loss: dict = ABSENT
    input: dict = ABSENT
    testtime_phi: dict = ABSENT
