"""The curves of the `loopscale advise` figure (`loopscale.plots.advice`): the predicted loss against unique
parameters at the budget, per feasible r, with the bootstrap replicates' band and where each width meets the
inference constraints (docs/design.md, "Advice")."""

from __future__ import annotations

import numpy as np

from loopscale.analysis.advise.family import Family
from loopscale.analysis.advise.optimum import Constraints, loss, width_domain

N_WIDTHS = 160  # points per curve
WIDTHS_AT_ONCE = 16  # the band is evaluated this many widths at a time: replicates x 16 floats in memory


def advice_curves(point, reps, family: Family, per_r: list[dict], cons: Constraints, level: float) -> dict:
    """Loss against unique parameters at the budget per feasible r, over 1/30 to 30x the advised sizes, with
    the replicates' band and whether each width meets the inference constraints (the cap is drawn apart)."""
    advised = [rec["advised"]["N_unique"] for rec in per_r if rec["feasible"]]
    n_lo, n_hi = min(advised) / 30, max(advised) * 30
    out = {}
    for rec in per_r:
        if not rec["feasible"]:
            continue
        r = rec["r"]
        d_lo = max(float(family.width_for("N_unique", r, n_lo)), family.width_step)
        widths = np.geomspace(d_lo, max(float(family.width_for("N_unique", r, n_hi)), 2 * d_lo), N_WIDTHS)
        domain = width_domain(family, r, cons.without_cap())  # the cap is a line of the figure
        curve = {"N_unique": family.value("N_unique", r, widths), "L": loss(point, family, r, widths[None, :], cons)[0]}
        curve["feasible"] = widths <= domain.hi * (1 + 1e-9)
        if reps is not None:
            tail = 100 * (1 - level) / 2
            ends = []
            for part in np.split(widths, N_WIDTHS // WIDTHS_AT_ONCE):  # replicates x 16 floats at a time
                with np.errstate(invalid="ignore"):  # inf where serving leaves no training budget (eq. 2')
                    ends.append(np.percentile(loss(reps, family, r, part[None, :], cons), [tail, 100 - tail], axis=0))
            curve["L_lo"], curve["L_hi"] = np.concatenate(ends, axis=1)
        out[r] = curve
    return out
