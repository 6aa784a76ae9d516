"""The record of one fitted law, and what reads it without the optimiser.

`FitResult` is what `loopscale fit` writes as JSON (docs/design.md, "Fitting"): the law, its parameters,
the optimiser's diagnostics and, when they were run, the bootstrap replicates, the phi profile and the
held-out check. Plots, the report and the conditioning numbers read such records; so do `predict_loss`
(the fitted law at the stored parameters) and `compare_param` (a difference between two fits from their
stored bootstrap replicates). Nothing here fits anything, so reading a record never imports the optimiser
(`loopscale.fit.optimize`) or scipy.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from loopscale.atomic import json_safe, json_text
from loopscale.errors import InputError
from loopscale.fit.laws.registry import predict_loss as law_prediction
from loopscale.fit.record_blocks import BLOCKS, Bootstrap, FitData, Group, Holdout, Joint, Noise, Profile, Settings
from loopscale.fit.verdict_record import Conditioning, JsonKeys, as_conditioning
from loopscale.provenance import library_versions

MAX_FIT_BYTES = 64 * 2**20  # a fit JSON larger than this is refused unread (read_fit_json)
MAX_FIT_VALUES = 4_000_000  # ... and one with more JSON values than this, before parsing


@dataclass
class FitResult:
    """One fitted law. JSON keys (stable; plots and `compare` read them):

    law, params (name -> estimate: E, A, alpha, B, beta, phi / k_<r>), ci95 (name -> [low, high]
    when bootstrapped), bootstrap ({"params": {name: [replicates]}, "objective": [...],
    "n_replicates", "cluster"} when run), profile_phi ({"phi", "objective", "interval", "threshold",
    ...} when computed), holdout (when run), objective, grad_norm, n_starts (screened), n_refined,
    n_best_basin, settings, seed, input (path, sha256, n_rows, columns), versions, warnings, group,
    joint (`loopscale.fit.joint`: recipes, delta_phi per recipe, shared_check, separate fits), data (the fitted
    rows' model shapes and ranges, `data_summary`; a joint fit's also each recipe's shapes, "shapes_by_recipe";
    absent from records written before it existed),
    conditioning (the checks that say whether phi / delta-phi is measured, `loopscale.fit.verdict`), noise (the
    seed noise model: `loopscale.fit.noise.noise_block`). Each block's dataclass and JSON form:
    `loopscale.fit.record_blocks`."""

    law: str
    params: dict[str, float]
    objective: float
    grad_norm: float
    n_starts: int
    n_refined: int
    n_best_basin: int
    settings: Settings
    seed: int | None = None
    n_rows: int = 0
    ci95: dict[str, list[float]] = field(default_factory=dict)
    bootstrap: Bootstrap | None = None
    profile_phi: Profile | None = None
    holdout: Holdout | None = None
    input: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    group: Group | None = None
    residual_rms_log: float | None = None
    joint: Joint | None = None  # looped-joint: recipes, delta-phi tests, shared-parameter check
    data: FitData | None = None  # what was fitted: model shapes (r, N_once, N_rec), ranges of N, D, C
    # is phi (delta-phi) measured? the checks and the verdict (`loopscale.fit.verdict`; its JSON form:
    # `verdict_record.Conditioning`; absent from records written before it existed)
    conditioning: Conditioning | None = None
    # the seed noise (`loopscale.fit.noise.noise_block`): replicates, the sigma model of log L and sigma per r,
    # how the fit used it; without seed repeats its `statement` says the intervals omit seed noise
    noise: Noise | None = None

    def __setattr__(self, name: str, value) -> None:
        """A block set as its JSON object (a record read back, a test's dict) is read into its dataclass
        (`record_blocks`; the conditioning: `verdict_record`), refused in one line when it is no object."""
        if name == "conditioning":
            value = as_conditioning(value)
        elif name in BLOCKS and value is not None:
            value = BLOCKS[name].from_json(value)
        super().__setattr__(name, value)

    def to_json_dict(self) -> dict[str, Any]:
        """The record's JSON object: every field under its name, each block in its JSON form."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        return json_safe({k: v.to_json() if isinstance(v, JsonKeys) else v for k, v in out.items()})

    def write_json(self, path) -> None:
        Path(path).write_text(json_text(self.to_json_dict()) + "\n")

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FitResult:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in d.items() if k in known})

    @classmethod
    def from_json(cls, path) -> FitResult:
        return cls.from_dict(read_fit_json(path))


def load_fit(fit) -> FitResult:
    """A FitResult from a FitResult, the dict of its JSON, or a path to that JSON (read within the limits of
    `read_fit_json`)."""
    if isinstance(fit, FitResult):
        return fit
    d = dict(fit) if isinstance(fit, Mapping) else read_fit_json(fit)
    if not isinstance(d, dict) or "law" not in d or "params" not in d:
        raise InputError(
            f"{fit if not isinstance(fit, Mapping) else 'fit'} is not a loopscale fit record (needs 'law' and 'params')"
        )
    return FitResult.from_dict(d)


def read_fit_json(path) -> Any:
    """The parsed JSON of a fit record, refused in one line (InputError) when it is beyond what a fit record
    holds, before it can exhaust memory: a file over MAX_FIT_BYTES, over MAX_FIT_VALUES JSON values (counted
    as separators and brackets, an upper bound, before parsing: parsed values cost up to ~70 bytes each), or
    nested deeper than the parser's recursion limit. A fit with 100,000 bootstrap replicates of a joint law
    is ~25 MB and ~1.2 million values, within both."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_FIT_BYTES:
            raise InputError(
                f"{path} is {size / 2**20:.0f} MiB: a fit record holds at most {MAX_FIT_BYTES / 2**20:.0f} MiB "
                "(refit with fewer bootstrap replicates)"
            )
        raw = path.read_bytes()
    except OSError as err:
        raise InputError(f"cannot read fit JSON {path}: {err}") from err
    n_values = raw.count(b",") + raw.count(b"[") + raw.count(b"{")
    if n_values > MAX_FIT_VALUES:
        raise InputError(f"{path} holds ~{n_values:,} JSON values: a fit record holds at most {MAX_FIT_VALUES:,}")
    try:
        return json.loads(raw)
    except RecursionError:
        raise InputError(f"cannot read fit JSON {path}: nested too deep for a fit record") from None
    except ValueError as err:
        raise InputError(f"cannot read fit JSON {path}: {err}") from err


def predict_loss(fit, table) -> np.ndarray:
    """The fitted law's loss L_hat for each row of `table` (a DataFrame or dict of arrays with the columns
    the law reads, e.g. r, N_once, N_rec, D): `laws.registry.predict_loss` at the fit's parameters. `fit` is a
    FitResult, the dict of its JSON or a path to that JSON."""
    fit = load_fit(fit)
    return law_prediction(fit.law, fit.params, table, (fit.joint or {}).get("column", "recipe"))


def data_summary(table) -> FitData:
    """What a fit saw, for readers that must know its model family and range (`loopscale advise`): the
    distinct model shapes [r, N_once, N_rec] of the rows and the [min, max] of N = N_once + N_rec, D
    (tokens) and C (FLOPs) when the table has them. `table`: a canonical runs table (`runs_table.canonical_table`)."""
    cols = {k: np.asarray(table[k], dtype=float) for k in ("r", "N_once", "N_rec", "N", "D", "C") if k in table}
    if "N_once" not in cols:  # a chinchilla table: one dense model per row
        cols.update(r=np.ones_like(cols["N"]), N_once=cols["N"], N_rec=np.zeros_like(cols["N"]))
    shapes = np.unique(np.stack([cols["r"], cols["N_once"], cols["N_rec"]], axis=1), axis=0)
    n_unique = cols["N_once"] + cols["N_rec"]
    ranges = {k: [float(cols[k].min()), float(cols[k].max())] for k in ("D", "C") if k in cols}
    return FitData(shapes.tolist(), [float(n_unique.min()), float(n_unique.max())], **ranges)


def versions() -> dict[str, str]:
    return library_versions(("numpy", "scipy", "pandas", "loopscale"))


def file_sha256(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def recorded_tables(fit: FitResult) -> list[dict[str, Any]]:
    """The tables the fit records it was made from, each {path, sha256, ...} (`input`; a joint fit's `input.tables`),
    those that carry a sha256; [] for a fit that records none."""
    record = fit.input if isinstance(fit.input, dict) else {}
    tables = record.get("tables") if isinstance(record.get("tables"), list) else [record]
    return [t for t in tables if isinstance(t, dict) and isinstance(t.get("sha256"), str)]


@dataclass(frozen=True)
class ParamDifference(JsonKeys):
    """delta = b - a of one parameter of two fits (`compare_param`) with its paired-bootstrap percentile CI, se
    and replicate count (None unless both fits have replicates)."""

    param: str
    a: float
    b: float
    delta: float
    ci: list[float] | None = None
    se: float | None = None
    n_replicates: int | None = None


def compare_param(a: FitResult, b: FitResult, name: str = "phi", level: float = 0.95, seed: int = 0) -> ParamDifference:
    """delta = b.name - a.name with a percentile CI from the two fits' bootstrap replicates.

    The fits are of different data (e.g. recipes), so their replicates are independent;
    delta replicates pair them at random (the shorter set sets the count).
    """
    for label, f in (("first", a), ("second", b)):
        if name not in f.params:
            raise InputError(f"{label} fit ({f.law}) has no parameter {name!r}")
    out = ParamDifference(name, a.params[name], b.params[name], b.params[name] - a.params[name])
    reps = []
    for f in (a, b):
        cols = (f.bootstrap or {}).get("params", {})
        reps.append(np.asarray(cols.get(name, []), dtype=float))
    if min(len(reps[0]), len(reps[1])) >= 2:
        rng = np.random.default_rng(seed)
        k = min(len(reps[0]), len(reps[1]))
        d = rng.permutation(reps[1])[:k] - rng.permutation(reps[0])[:k]
        tail = 100 * (1 - level) / 2
        ci = [float(np.percentile(d, tail)), float(np.percentile(d, 100 - tail))]
        return replace(out, ci=ci, se=float(np.std(d, ddof=1)), n_replicates=k)
    return out
