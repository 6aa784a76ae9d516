"""A fit record's blocks as dataclasses, one JSON form each: `FitResult`'s settings, group, bootstrap, profile_phi,
holdout, noise and joint (its "conditioning" is `verdict_record.Conditioning`). A class's fields are the block's
JSON keys, in the order a new block writes them, with the same meaning as in the record (docs/design.md, "Fitting").

A key absent from the JSON is ABSENT in the dataclass and stays absent when written; a key the class does not name
(a record from another version) is kept and written back; a block read from JSON is written with its keys in the
order it was read, so an old record is written key for key (tests/unit/test_fit_record_blocks.py). The package
reads fields; `block["key"]` and `block.get("key")` read a field by its JSON key, for code written against the JSON.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar, NotRequired, TypedDict

from loopscale.errors import InputError
from loopscale.fit.verdict_record import JsonKeys


class _Absent:
    """The value of a field whose key the JSON does not have (falsy; one instance, kept by pickle and copy)."""

    def __repr__(self) -> str:
        return "ABSENT"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()


class JsonBlock(JsonKeys):
    """A block whose dataclass fields are its JSON keys, in the order a new block writes them (module docstring)."""

    KEY: ClassVar[str] = "block"  # its key in the fit record, for the refusal of a block that is no object
    NESTED: ClassVar[dict[str, Callable]] = {}  # field -> the reader of its JSON value (a block, or a dict of blocks)

    def _lookup(self, key: str):
        return getattr(self, key) if key in self.__dataclass_fields__ else self._extra.get(key, ABSENT)

    def __getitem__(self, key: str):
        value = self._lookup(key)
        if value is ABSENT:
            raise KeyError(key)
        return value

    def get(self, key: str, default=None):
        value = self._lookup(key)
        return default if value is None or value is ABSENT else value

    def __bool__(self) -> bool:  # a block read from {} is as empty as the dict was
        return bool(self._fields_json() or self._extra)

    _extra: ClassVar[dict] = {}  # set on an instance by from_json: the keys the class does not name
    _keys: ClassVar[tuple] = ()  # ... and the order of the keys read

    def _fields_json(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not ABSENT}

    def to_json(self) -> dict:
        out = {k: _json(v) for k, v in {**self._fields_json(), **self._extra}.items()}
        return {**{k: out[k] for k in self._keys if k in out}, **out}

    @classmethod
    def _from_fields(cls, d: Mapping) -> dict:
        """The init arguments from the JSON object: the keys the class names, nested blocks read."""
        names = {f.name for f in fields(cls)}
        return {k: cls.NESTED[k](v) if k in cls.NESTED else v for k, v in d.items() if k in names}

    @classmethod
    def from_json(cls, d):
        """The block read back (itself when it is one already); one line (InputError) when it is no JSON object."""
        if isinstance(d, cls):
            return d
        if not isinstance(d, Mapping):
            raise InputError(f"the fit's {cls.KEY} must be an object; got {type(d).__name__}")
        block = cls(**cls._from_fields(d))
        _remember(block, cls._unread(d), tuple(d))
        return block

    @classmethod
    def _unread(cls, d: Mapping) -> dict:
        """The keys of the JSON object the class does not name."""
        names = {f.name for f in fields(cls)}
        return {k: v for k, v in d.items() if k not in names}

    def replace(self, **changes):
        """A copy with `changes` (new keys are written after the ones read), keeping the keys the class does not
        name and their order."""
        new = dataclasses.replace(self, **changes)
        _remember(new, self._extra, self._keys)
        return new


def _remember(block: JsonBlock, extra: dict, keys: tuple) -> None:
    object.__setattr__(block, "_extra", extra)
    object.__setattr__(block, "_keys", keys)


def _json(value):
    if isinstance(value, JsonKeys):
        return value.to_json()
    if isinstance(value, Mapping):
        return {k: _json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json(v) for v in value]
    return value


def _blocks_of(cls):
    """The reader of {name: block JSON} as {name: cls}."""
    return lambda d: {k: cls.from_json(v) for k, v in d.items()} if isinstance(d, Mapping) else d


@dataclass(frozen=True)
class Settings(JsonBlock):
    """How the law was fitted: the loss, the optimiser and its options, and (fit_table, fit_joint) the uncertainty
    steps asked for."""

    KEY: ClassVar[str] = "settings"

    loss: str = ABSENT  # "huber" or "l2"
    delta: float | None = ABSENT  # Huber's delta (None for l2)
    n_refine: int = ABSENT
    optimizer: str = ABSENT
    lbfgsb_ftol: float = ABSENT
    lbfgsb_gtol: float = ABSENT
    lbfgsb_maxiter: int = ABSENT
    lbfgsb_maxfun: int = ABSENT
    lbfgsb_maxls: int = ABSENT
    n_bootstrap: int = ABSENT
    cluster: str | None = ABSENT
    law: str = ABSENT
    holdout_largest: bool = ABSENT  # a single fit's
    joint_column: str = ABSENT  # a joint fit's: the column naming the recipe
    curve_start: float = ABSENT  # a curve law's: each run's evaluations before this share of its steps left out
    curve_sigma: str = ABSENT  # a curve law's: "position", its residuals weighed by position along the run


@dataclass(frozen=True)
class Group(JsonBlock):
    """The group of `loopscale fit --group COL` this fit is of; shared_r1: a recipe's view of a joint fit
    (`plots.views`), whose r = 1 rows are shared by every recipe."""

    KEY: ClassVar[str] = "group"

    column: str | None = ABSENT
    value: Any = ABSENT
    shared_r1: bool = ABSENT


@dataclass(frozen=True)
class FitData(JsonBlock):
    """What a fit saw (`result.data_summary`): the distinct model shapes [r, N_once, N_rec], the [min, max] of N, D
    (tokens) and C (FLOPs) where the table had them, and a joint fit's shapes per recipe."""

    KEY: ClassVar[str] = "data summary"

    shapes: list[list[float]] = ABSENT
    N: list[float] = ABSENT
    D: list[float] = ABSENT
    C: list[float] = ABSENT
    shapes_by_recipe: dict[str, list[list[float]]] = ABSENT


@dataclass(frozen=True)
class Bootstrap(JsonBlock):
    """The bootstrap's replicates (`resample.bootstrap`): each parameter's values and the objective per replicate,
    and how they were drawn (cluster: the column resampled, None for rows; two_stage: the seeds' inner scheme)."""

    KEY: ClassVar[str] = "bootstrap"

    params: dict[str, list[float]] = ABSENT
    objective: list[float] = ABSENT
    n_replicates: int = ABSENT
    cluster: str | None = ABSENT
    seed: int = ABSENT
    n_starts_per_replicate: int = ABSENT
    replicates_per_task: int = ABSENT
    two_stage: str = ABSENT


@dataclass(frozen=True)
class Profile(JsonBlock):
    """The profile of the objective in one parameter (`uncertainty.profile_refit`, phi): the grid `x` (written
    under the parameter's name), the objective on it, the 95% interval (an end None: open), the threshold and its
    method and statistics (`stats`: mean_psi_sq, mean_psi_prime, ...), and the warning when it walked below the fit."""

    KEY: ClassVar[str] = "profile_phi"

    objective: list[float] = ABSENT
    interval: list = ABSENT
    threshold: float = ABSENT
    method: str = ABSENT
    param: str = ABSENT
    stats: dict[str, float] = dataclasses.field(default_factory=dict)
    warning: str = ABSENT
    x: list[float] = ABSENT

    def _lookup(self, key: str):
        """A statistic or the grid (under the parameter's name) too, as the JSON object has them."""
        if key in self.stats:
            return self.stats[key]
        return super()._lookup("x" if key == self.param else key)

    def _fields_json(self) -> dict:
        out = {k: v for k, v in super()._fields_json().items() if k not in ("stats", "x")}
        out = {**{k: v for k, v in out.items() if k != "warning"}, **self.stats}
        if self.warning is not ABSENT:
            out["warning"] = self.warning
        return out if self.x is ABSENT else {**out, self.param or "x": self.x}

    @classmethod
    def _from_fields(cls, d: Mapping) -> dict:
        named = {f.name for f in fields(cls)} - {"stats", "x"}
        grid = d.get("param") if d.get("param") in d else "x"
        stats = {k: v for k, v in d.items() if k not in named and k != grid}
        return {**{k: v for k, v in d.items() if k in named}, "stats": stats, "x": d.get(grid, ABSENT)}

    @classmethod
    def _unread(cls, d: Mapping) -> dict:
        return {}  # every key is a field, a statistic or the grid


@dataclass(frozen=True)
class Holdout(JsonBlock):
    """The refit without the largest compute budget (`uncertainty.holdout_largest`) and its errors on the held-out
    runs: L_hat / L - 1 per row (rows: their indices in the fitted table)."""

    KEY: ClassVar[str] = "holdout"

    held_out_budget: float = ABSENT
    n_train: int = ABSENT
    n_holdout: int = ABSENT
    params: dict[str, float] = ABSENT
    rows: list[int] = ABSENT
    observed: list[float] = ABSENT
    predicted: list[float] = ABSENT
    rel_error: list[float] = ABSENT
    mean_abs_rel_error: float = ABSENT
    max_abs_rel_error: float = ABSENT
    mean_rel_error: float = ABSENT


class Tails(TypedDict):
    """The residuals' tails (`noise_scale.residual_tails`): the excess kurtosis, its se under normality, and the
    Student-t degrees of freedom with that kurtosis (None: Gaussian)."""

    excess_kurtosis: float
    se: float
    t_dof: float | None


class Scale(TypedDict):
    """The noise scale bounded by the scatter about the law (`noise_scale.scale_to_scatter`): the lack of fit S^2
    and its dof, the seed sigma's dof, the groups and rows, the scale applied (1: the seed sigma stands), its
    source and the profile's reference dof; with point ids, the law's misfit at a point in log L."""

    lack_of_fit: float
    scatter_dof: int
    seed_dof: int
    groups: int
    rows: int
    scale: float
    source: str
    reference_dof: int
    misfit_log: NotRequired[float | None]


class Units(TypedDict):
    """The unit-variance residual pools `loopscale power` resamples (`noise_scale.residual_units`): the seed- and
    point-level pools (None where too few values) and how many values each came from."""

    seed: list[float] | None
    point: list[float] | None
    n_seed: int
    n_point: int


class CurveNoise(TypedDict):
    """A curve law's residuals split into a run-level offset and an AR(1) along the curve (`curve_worth.curve_noise`,
    what `power` reads to count a curve toward the MDE): the two sigmas in log L, the AR(1) rho, the runs and
    their mean fitted evaluations, and the share of the noise independent between evaluations."""

    sigma_run_log: float
    sigma_eval_log: float
    rho: float
    n_runs: int
    evaluations_per_run: float
    eval_share: float


@dataclass(frozen=True)
class Noise(JsonBlock):
    """The seed noise (`noise.noise_block`): the seeds (n_points ... seed_column: `Replicates.summary`), the
    residuals' tails, the sigma model of log L and its candidates, sigma per r, how the fit and its bootstrap used
    it, and the statement when the intervals omit seed noise. The sigma model and per_r stay the objects
    `loopscale.fit.noise` writes; tails, scale, units and curve are typed (Tails, Scale, Units, CurveNoise)."""

    KEY: ClassVar[str] = "noise"

    sigma_of: str = ABSENT
    n_points: int = ABSENT
    n_replicated_points: int = ABSENT
    seeds_per_point: dict[str, int] = ABSENT
    n_duplicate_rows: int = ABSENT
    dof: int = ABSENT
    seed_column: str | None = ABSENT
    tails: Tails | None = ABSENT
    model: dict | None = ABSENT
    candidates: list[dict] = ABSENT
    rule: str = ABSENT
    sigma_log: float = ABSENT
    sigma_L_nats: float = ABSENT
    per_r: dict = ABSENT
    weights: str = ABSENT
    bootstrap: str | None = ABSENT
    statement: str | None = ABSENT
    lack_of_fit: float | None = ABSENT
    scale: Scale | None = ABSENT
    sigma_log_measured: float = ABSENT  # --noise off with seed repeats: the sigma the fit did not use
    parent_share: float = ABSENT  # a forked table: the share of a run's noise its job's branches share (power draws it)
    parent_share_se: float = ABSENT  # its standard error (power draws the share per simulated sweep)
    units: Units | None = ABSENT  # the standardised residuals, seed- and point-level pools (power resamples them)
    position_sigma: dict | None = ABSENT  # `fit --curve-sigma position`: the sigma model by position (position_sigma)
    curve: CurveNoise | None = ABSENT  # a curve law's residuals split run-level / along the curve (power reads it)


@dataclass(frozen=True)
class DeltaPhi(JsonBlock):
    """delta-phi of one recipe against the reference (`joint._delta_phi`): the estimate, its bootstrap CI, se and
    replicates, its profile interval and profile, the LR test of delta-phi = 0, and the separate fits' delta."""

    KEY: ClassVar[str] = "delta_phi"

    estimate: float = ABSENT
    bootstrap_ci: list[float] = ABSENT
    se: float = ABSENT
    n_replicates: int = ABSENT
    profile_interval: list = ABSENT
    profile: dict = ABSENT
    lr_test: dict = ABSENT
    separate: dict = ABSENT


@dataclass(frozen=True)
class SeparateFit(JsonBlock):
    """One recipe's law fitted alone (with the r = 1 runs), as the joint fit records it beside its own."""

    KEY: ClassVar[str] = "separate"

    params: dict[str, float] = ABSENT
    ci95: dict[str, list[float]] = ABSENT
    objective: float = ABSENT
    n_rows: int = ABSENT
    n_best_basin: int = ABSENT
    n_refined: int = ABSENT
    warnings: list[str] = ABSENT


@dataclass(frozen=True)
class SharedCheck(JsonBlock):
    """Do the recipes share the dense model (`joint.shared_parameter_check`)? The joint law's objective on the
    stacked recipe tables against the separate fits' sum, the robust LR statistic, its degrees of freedom and
    p-value, and the method."""

    KEY: ClassVar[str] = "shared_check"

    objective_joint: float = ABSENT
    objective_separate_sum: float = ABSENT
    statistic: float = ABSENT
    df: int = ABSENT
    p_value: float = ABSENT
    method: str = ABSENT


@dataclass(frozen=True)
class Joint(JsonBlock):
    """A joint fit over recipes (`loopscale.fit.joint`): the recipe column, the recipes (the first the reference),
    delta-phi per other recipe, the rows per recipe, and with separate fits their summaries and the
    shared-parameter check."""

    KEY: ClassVar[str] = "joint"
    NESTED: ClassVar[dict[str, Callable]] = {
        "delta_phi": _blocks_of(DeltaPhi),
        "separate": _blocks_of(SeparateFit),
        "shared_check": SharedCheck.from_json,
    }

    column: str = ABSENT
    recipes: list[str] = ABSENT
    reference: str = ABSENT
    delta_phi: dict[str, DeltaPhi] = ABSENT
    n_rows_by_recipe: dict[str, int] = ABSENT
    separate: dict[str, SeparateFit] = ABSENT
    shared_check: SharedCheck = ABSENT


BLOCKS: dict[str, type[JsonBlock]] = {
    "settings": Settings,
    "group": Group,
    "data": FitData,
    "bootstrap": Bootstrap,
    "profile_phi": Profile,
    "holdout": Holdout,
    "noise": Noise,
    "joint": Joint,
}
