"""The box the fitter searches, in the laws' internal coordinates (docs/design.md, "Fitting").

The internal coordinates are e = log E, a = log A, b = log B, the exponents alpha, beta, phi, and a law's own
(log k_r of looped-free, dphi[<recipe>] of looped-joint); each law states the box of its coordinates
(`loopscale.fit.laws.form.Law.bounds`) from the values here. The box is wide: it only keeps exp() finite and the
exponents meaningful. It lives apart from the optimiser so that readers of a fit record
(`loopscale.fit.verdict`: is E on its bound?) need not import it.
"""

from __future__ import annotations

import numpy as np

# Box for the internal coordinates (wide; only keeps exp() finite and exponents meaningful).
BOUNDS = {
    "e": (-10.0, 5.0),
    "a": (-10.0, 60.0),
    "b": (-10.0, 60.0),
    "alpha": (0.0, 5.0),
    "beta": (0.0, 5.0),
    "phi": (-1.0, 3.0),
}
LOG_K_BOUNDS = (-5.0, 5.0)  # log k_r of a free multiplier per r (looped-free)
DPHI_BOUNDS = (-3.0, 3.0)  # phi_g - phi of the reference recipe (looped-joint)
LOG_KAPPA_BOUNDS = (-3.0, 3.0)  # ln kappa, looped-entry's one-off price of looping: kappa in [0.05, 20]
PSI_BOUNDS = (-1.5, 1.5)  # d phi_r / d ln r (looped-logr): phi_r moves by at most 3.1 between r = 2 and r = 16


def bounds_for(law) -> list[tuple[float, float]]:
    """(low, high) for each internal coordinate of a law (`Law.bounds`), in `Law.internal_names` order."""
    return law.bounds()


def clip_to_bounds(thetas: np.ndarray, law) -> np.ndarray:
    """Parameter vectors (..., n_params) clipped into the law's box."""
    lo, hi = np.array(bounds_for(law)).T
    return np.clip(thetas, lo, hi)
