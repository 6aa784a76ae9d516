"""The box the fitter searches, in the laws' internal coordinates (docs/design.md, "Fitting").

The internal coordinates are e = log E, a = log A, b = log B, the exponents alpha, beta, phi, and per law
log k_r (looped-free) or dphi[<recipe>] (looped-joint); see `loopscale.fit.laws.Law.internal_names`. The box
is wide: it only keeps exp() finite and the exponents meaningful. It lives apart from the optimiser so
that readers of a fit record (`loopscale.analysis.conditioning`: is E on its bound?) need not import it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from loopscale.fit.laws import Law

# Box for the internal coordinates (wide; only keeps exp() finite and exponents meaningful).
BOUNDS = {
    "e": (-10.0, 5.0),
    "a": (-10.0, 60.0),
    "b": (-10.0, 60.0),
    "alpha": (0.0, 5.0),
    "beta": (0.0, 5.0),
    "phi": (-1.0, 3.0),
}
LOG_K_BOUNDS = (-5.0, 5.0)
DPHI_BOUNDS = (-3.0, 3.0)  # phi_g - phi of the reference recipe (looped-joint)


def bounds_for(law: Law) -> list[tuple[float, float]]:
    """(low, high) for each internal coordinate of the law, in `Law.internal_names` order."""
    return [BOUNDS.get(name, DPHI_BOUNDS if name.startswith("dphi[") else LOG_K_BOUNDS) for name in law.internal_names]


def clip_to_bounds(thetas: np.ndarray, law: Law) -> np.ndarray:
    """Parameter vectors (..., n_params) clipped into the law's box."""
    lo, hi = np.array(bounds_for(law)).T
    return np.clip(thetas, lo, hi)
