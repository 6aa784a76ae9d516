"""A form refitted to its table with some values changed (the lr grid's best-lr losses, a counting convention's
N), from the whole table's best optima: the fast path of the folds (`optimize.multistart` from a few warm
starts, no screening). The changes move the optimum a little; the warm starts find it in a few steps."""

from __future__ import annotations

import numpy as np

from loopscale.fit.bounds import clip_to_bounds
from loopscale.fit.laws.form import LawData
from loopscale.fit.optimize import multistart
from loopscale.fit.validation.forms import Form


def refit(form: Form, data: LawData, starts) -> dict[str, float]:
    """The form's user parameters on `data`, from `starts` (internal vectors of the form's law)."""
    with np.errstate(all="ignore"):
        best, _ = multistart(form.law, data, form.loss, clip_to_bounds(np.array(starts), form.law))
    return form.law.to_user(best.theta)
