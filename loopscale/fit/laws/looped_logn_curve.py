"""looped-logn at every evaluation of every run's loss curve: an exponent that runs with the size, read from the
whole runs.

    L(t) = E + A (N_once + r^(phi + psi ln(N_c / N_ref)) N_rec)^-alpha + B S1(t)^-beta - K S2(t)
    N_c = N_once + r N_rec                        (params E, A, alpha, B, beta, phi, psi, K; N_ref and lambda held)

The multiplier is looped-logn's (`looped_logn.py`: phi read at N_ref, psi its slope in ln N_c), the data term
looped-curve's (`looped_curve.py`: S1 the lr-weighted tokens, S2 the annealing area, K the loss a full anneal takes
off). At the end of loopscale's wsd run it is looped-logn with E' = E - K and B' = B 0.9^-beta
(`final_point_params`, N_ref kept).

N_ref is looped-logn's over the table's runs, each counted once: the geometric mean of their N_c to two significant
figures. A curves table holds a run once per evaluation, and the narrow models train more steps, so a mean over
rows would move N_ref with the evaluation cadence; over runs it is the N_ref `fit --law looped-logn` reads on the
same sweep's runs table (the CPU demo's: 1e5), so the two fits read phi at one size. A run is its model and its
tokens (`RUN_TOKENS`: a forked branch is its own run). A fit record keeps N_ref (`from_params`). Fitted as
looped-curve is: `fit CURVES.csv --law looped-logn-curve --loss-col val_loss` (phi profiled, the bootstrap
clustered by parent run).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from loopscale.fit.bounds import BOUNDS, PSI_BOUNDS
from loopscale.fit.laws.form import LawData, user_value
from loopscale.fit.laws.looped_curve import K_BOUNDS, LoopedCurve
from loopscale.fit.laws.looped_logn import PSI_STARTS, LoopedLogN, reference_size
from loopscale.fit.laws.registry import register

RUN_TOKENS = "run_tokens"  # LawData.extra: each row's run's D (its tokens at the end), which S1 replaces as D


def run_reference_size(data: LawData) -> float:
    """N_ref over the distinct runs (N_once, N_rec, r, the run's tokens) of the rows, each counted once, to two
    significant figures (module docstring). Rows without their run's tokens (data not read by `data_from_table`)
    are told apart by their D."""
    tokens = data.extra.get(RUN_TOKENS, data.D)
    _, first = np.unique(np.stack([data.N_once, data.N_rec, data.r, tokens], axis=1), axis=0, return_index=True)
    return reference_size(data.subset(first))  # looped-logn's, over one row a run


@register
@dataclass(frozen=True)
class LoopedLogNCurve(LoopedCurve):
    name = "looped-logn-curve"
    formula = (
        "L(t) = E + A (N_once + r^(phi + psi ln(N_c/N_ref)) N_rec)^-alpha + B S1(t)^-beta - K S2(t),  "
        "N_c = N_once + r N_rec"
    )
    final_law = LoopedLogN.name
    looped_at = LoopedLogN.looped_at

    N_ref: float | None = None  # where phi is read; bound from the table by `with_data`, kept by a record

    def with_data(self, data: LawData) -> LoopedLogNCurve:
        return self if self.N_ref is not None else replace(self, N_ref=run_reference_size(data))

    @classmethod
    def from_params(cls, params) -> LoopedLogNCurve:
        return cls(N_ref=float(params["N_ref"]) if "N_ref" in params else None)

    @classmethod
    def data_from_table(cls, table) -> LawData:
        """looped-curve's, with each row's run's tokens (`RUN_TOKENS`, for N_ref)."""
        data = super().data_from_table(table)
        D_run = np.asarray(table["D"], dtype=float) if "D" in table else data.D
        return replace(data, extra={**data.extra, RUN_TOKENS: D_run})

    @classmethod
    def check_table(cls, table) -> None:
        LoopedLogN.check_table(table)  # psi is a slope across sizes 1.5x apart or more

    def _ref(self) -> float:
        return LoopedLogN._ref(self)

    def bounds(self) -> list[tuple[float, float]]:
        self._ref()
        return super().bounds()

    def extra_internal_names(self) -> tuple[str, ...]:
        return ("phi", "psi", "k")

    def extra_user_names(self) -> tuple[str, ...]:
        return ("phi", "psi", "K")

    def extra_bounds(self) -> list[tuple[float, float]]:
        return [BOUNDS["phi"], PSI_BOUNDS, K_BOUNDS]

    def extras_to_user(self, x: np.ndarray) -> dict[str, float]:
        return {"phi": float(x[0]), "psi": float(x[1]), "K": float(np.exp(x[2])), "lambda": self.decay}

    def to_user(self, theta: np.ndarray) -> dict[str, float]:
        return {**super().to_user(theta), "N_ref": self._ref()}

    def extras_from_user(self, params) -> list[float]:
        return [
            *(user_value(self.name, params, name, log=False) for name in ("phi", "psi")),
            user_value(self.name, params, "K", log=True),
        ]

    def multiplier(self, params, r: float, recipe: str | None = None) -> np.ndarray:
        return LoopedLogN.multiplier(self, params, r, recipe)

    def multiplier_scaling(self, params, r: float, recipe: str | None = None):
        return LoopedLogN.multiplier_scaling(self, params, r, recipe)

    def effective_size(self, params, cols, recipe: str | None = None) -> np.ndarray:
        return LoopedLogN.effective_size(self, params, cols, recipe)

    def log_multiplier(self, thetas: np.ndarray, data: LawData):
        """looped-logn's (internal coordinates 5 and 6; ln K, the 8th, is the anneal's)."""
        return LoopedLogN.log_multiplier(self, thetas, data)

    def classic_axes(self) -> list[np.ndarray]:
        return [np.array([0.0, 0.5, 1.0]), PSI_STARTS, np.log([0.01, 0.3, 3.0])]

    def projected_axes(self, values: np.ndarray) -> list[np.ndarray]:
        return [values, PSI_STARTS, np.log([0.01, 0.3, 3.0])]
