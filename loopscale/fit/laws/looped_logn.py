"""The looped law with an exponent that runs with the model's size: is a pass worth as much in a wide model as in a
narrow one?

    L = E + A (N_once + r^(phi + psi ln(N_c / N_ref)) N_rec)^-alpha + B D^-beta    (params E, A, alpha, B, beta,
    N_c = N_once + r N_rec                                                           phi, psi; N_ref held)

N_c is the parameters one token passes through (the N of C = 6 N D): an iso-depth sweep gives every r of one width
the same N_c, so phi_N = phi + psi ln(N_c / N_ref) is the exponent of that width, read the same for every r. psi = 0
is the looped law (r^phi); psi < 0 says a pass is worth less, in unique blocks, the larger the model. phi is the
exponent at N_ref, which the law holds: bound to a table (`for_data`: `fit --law looped-logn`, `validate`'s rival) it
is the geometric mean of the table's N_c to two significant figures, so phi is read inside the sizes the sweep
trained, not at a fixed size that one sweep's grid (1e4-1e5 on a CPU, 1e8 published) would sit far from; a fit
record keeps it with the parameters (`from_params`).

Why it is a rival: the CPU demo's r = 8 runs lose 0.05 nats to r = 1 at width 16 and 0.10 at width 48 (the same
tokens), where r^phi, whose N-term flattens with size, has the loss to r = 1 shrink as the width grows
(docs/results.md, "phi runs with the width"). log m = phi ln r + psi ln r ln(N_c / N_ref) is linear in (phi, psi), so
the looped law's exact Newton steps serve it too.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from loopscale.errors import InputError
from loopscale.fit.bounds import BOUNDS, PSI_BOUNDS
from loopscale.fit.laws.form import Law, LawData, cost_params, user_value
from loopscale.fit.laws.registry import register

SIZE_SPAN_MIN = 1.5  # the smallest N_c span psi is read across (one width's r differ by their injection only)
PSI_STARTS = np.array([-0.25, 0.0, 0.25])  # d phi / d ln N_c at the starts (the CPU demo's: -0.24 to -0.25)


def reference_size(data: LawData) -> float:
    """N_ref: the geometric mean of the rows' N_c, to two significant figures (a fold that drops a few rows reads
    phi at the same size)."""
    centre = float(np.exp(np.mean(np.log(cost_params(data.N_once, data.N_rec, data.r)))))
    return float(f"{centre:.2g}")


def log_size(N_once, N_rec, r, N_ref: float) -> np.ndarray:
    """ln(N_c / N_ref), N_c = N_once + r N_rec: the size term psi multiplies (with ln r) in every looped-logn form."""
    return np.log(cost_params(N_once, N_rec, r) / N_ref)


@register
@dataclass(frozen=True)
class LoopedLogN(Law):
    name = "looped-logn"
    formula = "L = E + A (N_once + r^(phi + psi ln(N_c/N_ref)) N_rec)^-alpha + B D^-beta,  N_c = N_once + r N_rec"
    profile_param = "phi"
    rival = "r^(phi + psi ln(N_c/N_ref))"
    departure = "phi runs with the size"
    looped_at = {"psi": 0.0}

    N_ref: float | None = None  # where phi is read; None: not bound to a table (validate's rival binds it)

    def with_data(self, data: LawData) -> LoopedLogN:
        """N_ref from the data (`reference_size`) unless the law holds one (a record's, a joint fit's)."""
        return self if self.N_ref is not None else replace(self, N_ref=reference_size(data))

    @classmethod
    def from_params(cls, params) -> LoopedLogN:
        return cls(N_ref=float(params["N_ref"]) if "N_ref" in params else None)

    @classmethod
    def check_table(cls, table) -> None:
        super().check_table(table)
        sizes = cost_params(table["N_once"], table["N_rec"], table["r"])  # N_c
        if not sizes.max() >= SIZE_SPAN_MIN * sizes.min():
            raise InputError(
                f"law {cls.name!r} needs runs at sizes N_once + r N_rec at least {SIZE_SPAN_MIN:g}x apart (psi is "
                f"the slope of phi across them); the table's span {sizes.min():.4g} to {sizes.max():.4g}"
            )

    def _ref(self) -> float:
        if self.N_ref is None or not self.N_ref > 0:
            raise InputError(
                f"law {self.name!r} reads phi at a reference size N_ref, which only a table gives: `fit --law "
                f"{self.name}` and `validate` bind it (N_ref = the geometric mean of the table's N_once + r N_rec)"
            )
        return float(self.N_ref)

    def bounds(self) -> list[tuple[float, float]]:
        self._ref()
        return super().bounds()

    def extra_internal_names(self) -> tuple[str, ...]:
        return ("phi", "psi")

    def extra_user_names(self) -> tuple[str, ...]:
        return ("phi", "psi")

    def extra_bounds(self) -> list[tuple[float, float]]:
        return [BOUNDS["phi"], PSI_BOUNDS]

    def extras_to_user(self, x: np.ndarray) -> dict[str, float]:
        return {"phi": float(x[0]), "psi": float(x[1])}

    def to_user(self, theta: np.ndarray) -> dict[str, float]:
        """The user parameters and N_ref, the size phi is read at (held, not fitted: a record rebuilds the law
        from it, `from_params`)."""
        return {**super().to_user(theta), "N_ref": self._ref()}

    def extras_from_user(self, params) -> list[float]:
        return [user_value(self.name, params, name, log=False) for name in ("phi", "psi")]

    def multiplier(self, params, r: float, recipe: str | None = None) -> np.ndarray:
        """None of r alone: m reads the size too (`effective_size`, `multiplier_scaling`)."""
        raise InputError(
            f"law {self.name!r} has no multiplier of r alone: m = r^(phi + psi ln(N_c / N_ref)) reads the size too"
        )

    def multiplier_scaling(self, params, r: float, recipe: str | None = None):
        """r^(phi + psi ln(N_c / N_ref)) = r^phi (N_c / N_ref)^(psi ln r): a power of N_c with exponent psi ln r."""
        phi, psi = (np.asarray(params[k], dtype=float) for k in ("phi", "psi"))
        return np.power(float(r), phi), psi * np.log(float(r)), self._ref()

    def effective_size(self, params, cols, recipe: str | None = None) -> np.ndarray:
        """N_eff per row: N_once + r^(phi + psi ln(N_c / N_ref)) N_rec."""
        data = self.data_from_table(cols)
        theta = np.array([[0.0] * 5 + [float(params["phi"]), float(params["psi"])]])
        log_m, _ = self.log_multiplier(theta, data)
        return self.n_once(data) + np.exp(log_m[0]) * data.N_rec

    def classic_axes(self) -> list[np.ndarray]:
        """phi as the looped law's grid, psi flat and a slope either way: screened, not warm-started from the
        looped optimum, which on data whose exponent runs with the size can sit on E's bound (the published grid
        at psi = -0.25: alpha 0.05, E 5e-5) where no slope leads back."""
        return [np.array([0.0, 0.5, 1.0]), PSI_STARTS]

    def projected_axes(self, values: np.ndarray) -> list[np.ndarray]:
        return [values, PSI_STARTS]

    def log_multiplier(self, thetas: np.ndarray, data: LawData):
        """log m = phi ln r + psi ln r ln(N_c / N_ref), and its derivatives: linear in (phi, psi)."""
        dlogm = np.stack([data.log_r, data.log_r * log_size(data.N_once, data.N_rec, data.r, self._ref())], axis=1)
        return thetas[:, 5:7] @ dlogm.T, dlogm
