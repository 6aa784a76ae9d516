"""What `loopscale advise` reads from a fit record, checked before any number is computed: a record that is
not what `loopscale fit` writes is refused in one line (InputError, exit 2) instead of a traceback, NaN
advice or a confident verdict drawn from impossible parameters.

- params: a number per parameter the law needs, each finite and inside the fitter's box
  (`law_sets.parameter_box`: E, A, B > 0, 0 <= alpha, beta <= 5, -1 <= phi <= 3, ...);
- bootstrap replicates: one list per parameter, all of one length, at most MAX_REPLICATES, each value a
  number or null (dropped later) and inside the box;
- data: at most MAX_SHAPES model shapes [r, N_once, N_rec] (r a whole number >= 1, N_once > 0, N_rec >= 0),
  ranges [low, high] of positive numbers;
- the verdict (`conditioning`): a dict with a text verdict, and the other blocks objects (refused as the record is
  read: `verdict_record.Conditioning.from_json`, `record_blocks.JsonBlock.from_json`).

The limits keep the work bounded (the replicates are evaluated in chunks, `optimum.CHUNK_SETS`); the file
itself was bounded when it was read (`loopscale.fit.result.read_fit_json`).
"""

from __future__ import annotations

import math
from numbers import Real

import numpy as np

from loopscale.analysis.advise.law_sets import parameter_box
from loopscale.errors import InputError
from loopscale.fit.result import FitResult

MAX_REPLICATES = 100_000  # bootstrap replicates advise evaluates (a fit's --bootstrap is typically 200-1000)
MAX_SHAPES = 10_000  # distinct fitted models (the published grid has 116 runs)
BOX_TOLERANCE = 1e-6  # relative: a value this close to its bound is on it (the fitter's own tolerance)


def check_record(fit: FitResult) -> None:
    """Refuse (InputError, one line) a record advise cannot read; see the module docstring."""
    if not isinstance(fit.params, dict) or not fit.params:
        raise InputError(f"the fit's params must be a dict of numbers; got {type(fit.params).__name__}")
    box = parameter_box(fit)
    for name in box:
        if name not in fit.params:
            raise InputError(f"the {fit.law} fit has no parameter {name!r} (its params: {sorted(fit.params)})")
        _check_value(f"parameter {name}", fit.params[name], box[name])
    _check_replicates(fit.bootstrap, box)
    _check_data(fit.data)
    if fit.input is not None and not isinstance(fit.input, dict):  # the blocks are refused as the record is read
        raise InputError(f"the fit's 'input' must be a dict; got {type(fit.input).__name__}")


def _is_number(value) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool)


def _check_value(what: str, value, box: tuple[float, float]) -> None:
    if not _is_number(value):
        raise InputError(f"{what} must be a number; got {value!r:.40}")
    if not math.isfinite(value):
        raise InputError(f"{what} = {value} is not finite")
    lo, hi = box
    if not lo - BOX_TOLERANCE * abs(lo) <= value <= hi + BOX_TOLERANCE * abs(hi):
        raise InputError(f"{what} = {value:.6g} is outside the fitter's bounds [{lo:.6g}, {hi:.6g}]")


def _check_replicates(bootstrap, box: dict[str, tuple[float, float]]) -> None:
    if bootstrap is None:
        return
    stored = bootstrap.get("params")
    if stored is None:
        return
    if not isinstance(stored, dict):
        raise InputError(f"the fit's bootstrap replicates must be a dict of lists; got {type(stored).__name__}")
    lengths = set()
    for name in box:
        if name not in stored:
            continue
        column = stored[name]
        if not isinstance(column, list):
            raise InputError(f"bootstrap replicates of {name} must be a list; got {type(column).__name__}")
        if len(column) > MAX_REPLICATES:
            raise InputError(
                f"the fit holds {len(column):,} bootstrap replicates; advise reads at most {MAX_REPLICATES:,}"
            )
        if not all(v is None or _is_number(v) for v in column):
            bad = next(v for v in column if not (v is None or _is_number(v)))
            raise InputError(f"bootstrap replicates of {name} must be numbers or null; got {bad!r:.40}")
        values = np.array([np.nan if v is None else v for v in column], dtype=float)
        lo, hi = box[name]
        finite = values[np.isfinite(values)]
        outside = (finite < lo - BOX_TOLERANCE * abs(lo)) | (finite > hi + BOX_TOLERANCE * abs(hi))
        if outside.any():
            raise InputError(
                f"a bootstrap replicate of {name} = {finite[outside][0]:.6g} is outside the fitter's bounds "
                f"[{lo:.6g}, {hi:.6g}]"
            )
        lengths.add(len(column))
    if len(lengths) > 1:
        raise InputError(f"the fit's bootstrap replicates have unequal lengths {sorted(lengths)}: one per parameter")


def _check_data(data) -> None:
    if data is None:  # a record whose data summary is no object was refused as it was read (FitData.from_json)
        return
    groups = {"shapes": data.get("shapes")}
    by_recipe = data.get("shapes_by_recipe")
    if by_recipe is not None:
        if not isinstance(by_recipe, dict):
            raise InputError("the fit's shapes_by_recipe must be a dict of recipe -> shapes")
        groups.update({f"shapes of recipe {g}": shapes for g, shapes in by_recipe.items()})
    for what, shapes in groups.items():
        _check_shapes(what, shapes)
    for name in ("N", "D", "C"):
        if name in data:
            span = data[name]
            if not (isinstance(span, list) and len(span) == 2 and all(_is_number(v) for v in span)):
                raise InputError(f"the fit's range of {name} must be [low, high]; got {span!r:.60}")
            lo, hi = span
            if not (math.isfinite(lo) and math.isfinite(hi) and 0 < lo <= hi):
                raise InputError(f"the fit's range of {name} must be 0 < low <= high, finite; got {span}")


def _check_shapes(what: str, shapes) -> None:
    if shapes is None:
        return
    if not isinstance(shapes, list):
        raise InputError(f"the fit's {what} must be a list of [r, N_once, N_rec]; got {type(shapes).__name__}")
    if len(shapes) > MAX_SHAPES:
        raise InputError(f"the fit records {len(shapes):,} model shapes; advise reads at most {MAX_SHAPES:,}")
    for shape in shapes:
        if not (isinstance(shape, list) and len(shape) == 3 and all(_is_number(v) for v in shape)):
            raise InputError(f"each of the fit's {what} must be [r, N_once, N_rec]; got {shape!r:.60}")
        r, n_once, n_rec = shape
        if not (math.isfinite(n_once) and math.isfinite(n_rec) and r >= 1 and float(r).is_integer()):
            raise InputError(f"the fit's {what} hold an impossible model {shape}: r a whole number >= 1")
        if not (n_once > 0 and n_rec >= 0):
            raise InputError(f"the fit's {what} hold an impossible model {shape}: N_once > 0, N_rec >= 0")
