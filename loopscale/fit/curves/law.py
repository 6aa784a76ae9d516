"""What a curve law is: the loss of one model along its lr schedule, L(t) at every evaluation t.

A curve law is one class (a subclass of `CurveLaw`, registered by `registry.register`): its parameters (user
names, internal coordinates in which the fitter searches, the box), what it precomputes from a curve once
(`features`: the sums over the schedule it reads, e.g. S1 and the drop atoms), its prediction with the
analytic Jacobian in internal coordinates (`predict_and_jac`) and its starts (`starts`). Positive scales
are searched as logs, exponents as they are. The fitter (`loopscale.fit.curves.fit`) asks nothing else.

Starts by variable projection: every law here is linear in (L0, and its amplitudes) once its exponents are
fixed, so a grid over the exponents with those solved by least squares gives starts near the data at the
cost of one prediction each (`linear_starts`).
"""

from __future__ import annotations

from itertools import product

import numpy as np

from loopscale.fit.curves.table import Curve


class CurveLaw:
    """Base of the curve laws; a subclass sets the class attributes and the four methods below."""

    name: str = ""
    formula: str = ""
    params: tuple[str, ...] = ()  # user names, in the order of the internal vector
    log_params: frozenset[str] = frozenset()  # searched as ln(value): positive scales
    lr_scale: float = 1.0  # the peak lr of the curves fitted (`bind`): a law may search its scales relative to it

    def bind(self, curves: list[Curve]) -> CurveLaw:
        """This law with `lr_scale` set to the curves' peak lr (before `starts` and a fit)."""
        self.lr_scale = max(float(c.eta.max()) for c in curves)
        return self

    def features(self, curve: Curve):
        """What the law reads from a curve, computed once per curve (any object `predict_and_jac` takes)."""
        raise NotImplementedError

    def bounds(self, curves: list[Curve]) -> list[tuple[float, float]]:
        """The box in internal coordinates."""
        raise NotImplementedError

    def predict_and_jac(self, theta: np.ndarray, feats) -> tuple[np.ndarray, np.ndarray]:
        """(L_hat (E,), d L_hat / d theta (E, P)) at internal `theta` for one curve's features."""
        raise NotImplementedError

    def starts(self, curves: list[Curve], feats: list) -> np.ndarray:
        """(M, P) internal starting vectors, the fitter screens them by objective."""
        raise NotImplementedError

    # ------------------------------------------------------------------------------------------
    def to_user(self, theta) -> dict[str, float]:
        return {n: float(np.exp(v) if n in self.log_params else v) for n, v in zip(self.params, theta)}

    def from_user(self, values: dict[str, float]) -> np.ndarray:
        missing = [n for n in self.params if n not in values]
        if missing:
            raise KeyError(f"law {self.name!r} needs parameter(s) {missing}")
        return np.array([np.log(values[n]) if n in self.log_params else values[n] for n in self.params], float)

    def predict(self, values: dict[str, float], curve: Curve) -> np.ndarray:
        """L_hat at the curve's evaluations from user parameters."""
        return self.predict_and_jac(self.from_user(values), self.features(curve))[0]


def linear_starts(
    curves: list[Curve],
    columns,
    grid: dict[str, np.ndarray],
    assemble,
    keep: int = 64,
) -> np.ndarray:
    """Starts by variable projection: for every point of `grid` (exponent name -> values), the columns the
    law is linear in (`columns(point, curve) -> (E, m)`, the first one multiplying L0 = 1) solved by least
    squares on relative residuals over all curves; the `keep` best points with amplitudes >= 0 become
    internal vectors by `assemble(point, coefficients)`."""
    names = list(grid)
    loss = np.concatenate([c.loss for c in curves])
    scored = []
    for values in product(*(grid[n] for n in names)):
        point = dict(zip(names, values))
        X = np.concatenate([columns(point, c) for c in curves], axis=0)
        if not np.isfinite(X).all():
            continue
        coef, *_ = np.linalg.lstsq(X / loss[:, None], np.ones_like(loss), rcond=None)
        coef = np.maximum(coef, 0.0)  # a negative amplitude is outside the box: clip, refine from there
        coef[1:] = np.maximum(coef[1:], 1e-12)
        rel = X @ coef / loss - 1.0
        scored.append((float(np.sum(rel * rel)), point, coef))
    scored.sort(key=lambda s: s[0])
    return np.array([assemble(point, coef) for _, point, coef in scored[:keep]])
