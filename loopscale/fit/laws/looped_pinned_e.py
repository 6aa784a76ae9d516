"""The looped law with its asymptote E pinned (a rival form of `loopscale validate`): Marin's leave-future-out
validation pinned the asymptote and predicted its 1e21 run to 0.3% (docs/design.md, "Out of sample: loopscale
validate").

    L = E_pinned + A (N_once + r^phi N_rec)^-alpha + B D^-beta        (params E (held), A, alpha, B, beta, phi)

E is held by its box (low = high = log E_pinned), so the fitter, its starts and the uncertainty steps treat it
as any other coordinate; it counts as no free parameter (`validation.scores.free_params`). Built with its
value (`LoopedPinnedE(E_pinned=...)`); as a rival it pins the reference fit's E (or `validate --pin-E`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from loopscale.errors import InputError
from loopscale.fit.laws.looped import Looped
from loopscale.fit.laws.registry import register


@register
@dataclass(frozen=True)
class LoopedPinnedE(Looped):
    name = "looped-pinned-e"
    formula = "L = E_pinned + A (N_once + r^phi N_rec)^-alpha + B D^-beta   (E held)"
    rival = "E pinned"

    E_pinned: float | None = None

    @classmethod
    def from_params(cls, params) -> LoopedPinnedE:
        return cls(E_pinned=float(params["E"]))

    @classmethod
    def rival_law(cls, data, reference) -> LoopedPinnedE:
        return cls(E_pinned=float(reference["E"]))

    def bounds(self) -> list[tuple[float, float]]:
        if self.E_pinned is None or not self.E_pinned > 0:
            raise InputError(
                f"law {self.name!r} needs the value of E to pin (> 0): build LoopedPinnedE(E_pinned=...) "
                "or use `loopscale validate --pin-E E`"
            )
        e = float(np.log(self.E_pinned))
        return [(e, e), *super().bounds()[1:]]
