"""What every law is: its inputs as arrays (`LawData`) and the `Law` base class, whose class attributes say
what the law has and needs, and whose methods give its parameters and its log-space prediction with analytic
gradient (and Hessian where exact).

Every law here is written in log space as a log-sum-exp of three terms (Hoffmann et al. 2022, eq. 10 fitted
in log space; Besiroglu et al. 2024):

    log L_hat = LSE(a - alpha * log N_eff,  b - beta * log D,  e),   A = exp(a), B = exp(b), E = exp(e)

which is log(E + A * N_eff^-alpha + B * D^-beta), with N_eff = N_once + m * N_rec. A law says what m is: its
"extras" (the coordinates after e, a, alpha, b, beta) and `log_multiplier`; one of another shape (N x D) overrides
`log_predict_batch`, `log_predict_and_jac_batch` (`has_hessian = False`, or `log_predict_jac_hess`); pinned E `bounds`.

User-facing parameters are dicts keyed by the literature's names (``E, A, alpha, B, beta, phi, k_2, ...``); the
optimiser's internal vector (``e, a, alpha, b, beta``, the extras) is private to the fitter and the law
(`Law.to_user` / `Law.from_user`). The fitter, bootstrap, verdict, tables, figures, report and CLI read the class
attributes and call the methods; none compares a law's name (docs/architecture.md, "How to add a law").
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from loopscale.errors import InputError
from loopscale.fit.bounds import BOUNDS
from loopscale.fit.laws.lse import lse_and_weights, lse_jac_hess

BASE_INTERNAL = ("e", "a", "alpha", "b", "beta")  # internal coordinates shared by every law, in vector order
BASE_USER = ("E", "A", "alpha", "B", "beta")
# C = 6 N D (docs/design.md, "FLOPs per token"): 2 FLOPs per parameter per token forward, 4 backward.
FLOPS_PER_PARAM_TOKEN = 6.0


@dataclass(frozen=True)
class LawData:
    """Inputs of a law as arrays (one entry per run), with the logs the objective needs.

    N_once, N_rec: non-embedding parameters run once / in the recurrent block (chinchilla: N as N_once, zeros as
    N_rec). r: recurrences (1 for chinchilla). D: training tokens. L: loss (None when only predicting). recipe:
    integer recipe code per row for a per-recipe law (index into its recipes; any code on r = 1 rows, where it has
    no effect), else None. extra: any other column a law reads (by name, one entry per row), kept through `subset`.
    sigma: each row's noise scale in log L (the seed sigma, `loopscale.fit.noise`): the objective's residuals are
    divided by it; None (no measured noise) leaves them in log units. sigma_dof: the degrees of freedom behind
    sigma's scale (the profile's reference is F(1, sigma_dof): `loopscale.fit.uncertainty.profile_threshold`).
    noise_group: integer labels of rows whose noise is not independent (one point's seeds share its misfit, a
    forked job's branches its stable phase): their scores add before squaring. sigma_scale: the factor the seed
    sigma was multiplied by (`noise_scale.scale_to_scatter`; 1: it stands). sigma_estimated: sigma is a curve
    fit's position sigma from its own residuals, weights only (`loopscale.fit.position_sigma`), no seed sigma.
    """

    N_once: np.ndarray
    N_rec: np.ndarray
    r: np.ndarray
    D: np.ndarray
    L: np.ndarray | None = None
    recipe: np.ndarray | None = None
    extra: Mapping[str, np.ndarray] = field(default_factory=dict)
    sigma: np.ndarray | None = None
    noise_group: np.ndarray | None = None
    sigma_dof: int | None = None
    sigma_scale: float = 1.0
    sigma_estimated: bool = False
    log_r: np.ndarray = field(init=False, repr=False)
    log_D: np.ndarray = field(init=False, repr=False)
    log_L: np.ndarray | None = field(init=False, repr=False)

    def __post_init__(self) -> None:
        for name in ("N_once", "N_rec", "r", "D"):
            object.__setattr__(self, name, np.asarray(getattr(self, name), dtype=float))
        object.__setattr__(self, "log_r", np.log(self.r))
        object.__setattr__(self, "log_D", np.log(self.D))
        if self.recipe is not None:
            object.__setattr__(self, "recipe", np.asarray(self.recipe, dtype=np.intp))
        object.__setattr__(self, "extra", {k: np.asarray(v, dtype=float) for k, v in self.extra.items()})
        if self.sigma is not None:
            object.__setattr__(self, "sigma", np.asarray(self.sigma, dtype=float))
        if self.L is not None:
            object.__setattr__(self, "L", np.asarray(self.L, dtype=float))
        object.__setattr__(self, "log_L", None if self.L is None else np.log(self.L))

    def __len__(self) -> int:
        return len(self.D)

    def subset(self, mask: np.ndarray) -> LawData:
        """Rows selected by a boolean mask or index array."""
        return LawData(
            self.N_once[mask],
            self.N_rec[mask],
            self.r[mask],
            self.D[mask],
            None if self.L is None else self.L[mask],
            None if self.recipe is None else self.recipe[mask],
            {k: v[mask] for k, v in self.extra.items()},
            None if self.sigma is None else self.sigma[mask],
            None if self.noise_group is None else np.unique(self.noise_group[mask], return_inverse=True)[1],
            self.sigma_dof,
            self.sigma_scale,
            self.sigma_estimated,
        )


def n_eff(N_once, N_rec, r, phi):
    """N_eff = N_once + r^phi N_rec (docs/design.md, "The question"): phi = 1, looping a block r times is worth r
    unique blocks; phi = 0, one block. Scalars or arrays (broadcast)."""
    return np.asarray(N_once, dtype=float) + np.power(np.asarray(r, dtype=float), phi) * np.asarray(N_rec, dtype=float)


def cost_params(N_once, N_rec, r):
    """N_once + r N_rec: the parameters a token passes through (each looped layer r times), so the N of
    C = 6 N D for a looped model; N for a dense one (N_rec = 0 or r = 1)."""
    return N_once + r * N_rec


def per_pass_rows(table) -> int:
    """How many rows of a table (DataFrame or dict of arrays) have parameters used once per pass (N_pass > 0);
    0 without the column (a missing N_pass counts as 0)."""
    return 0 if "N_pass" not in table else int((np.asarray(table["N_pass"], dtype=float) > 0).sum())


def tokens_from_compute(C, cost_N):
    """D = C / (6 N), the one place loopscale turns a compute column into tokens."""
    return C / (FLOPS_PER_PARAM_TOKEN * cost_N)


def compute_from_tokens(D, cost_N):
    """C = 6 N D."""
    return FLOPS_PER_PARAM_TOKEN * cost_N * D


def r_label(r: float) -> str:
    """'4' for 4.0, '1.5' for 1.5: used in parameter names k_<r>."""
    return str(int(r)) if float(r).is_integer() else repr(float(r))


def user_value(law_name: str, params: Mapping[str, float], key: str, log: bool) -> float:
    """params[key] (its log when `log`), or an InputError naming the missing or non-positive parameter."""
    if key not in params:
        raise InputError(f"law {law_name!r} needs parameter {key!r}; got {sorted(params)}")
    value = float(params[key])
    if log and not value > 0:
        raise InputError(f"parameter {key} must be > 0 for law {law_name!r}; got {value}")
    return float(np.log(value)) if log else value


@dataclass(frozen=True)
class Law:
    """A law form (the base of every registered law): what it has and needs, its parameters, its prediction.

    Class attributes (the capabilities every reader asks; a law module sets those that differ): name, formula (the
    report's one line); size_columns (the canonical columns it reads besides D or C and L), derivable ({column: parts}:
    a column it may sum from others when the table lacks it), point_columns (what makes two rows the same run:
    `runs_table.table_warnings`), zero_allowed (size columns that may hold 0), cost_formula (the N of C = 6 N D, as
    recorded); dense (N_eff = N: no r; published Chinchilla laws compare with it); per_recipe (one exponent per recipe,
    rows carry a recipe code: fitted by `fit --joint`) and recipe_law (the law each recipe's separate fit uses);
    per_r_multipliers (a free multiplier per r: the k_r figure panel); profile_param (the internal coordinate
    `fit_table` profiles by default, recorded as the fit's `profile_phi`); compute_optimal (N*(C), D*(C) are drawn from
    it); warm_start (a law whose optimum this one starts from instead of screening starts); has_hessian
    (`log_predict_jac_hess` is exact); rival (the label under which `loopscale validate` fits this law beside a looped
    fit as a rival form, None: not one; `rival_law` builds it); departure (what the rival's win says: validate flags it
    when it beats the fit's law by AICc) and looped_at (its own parameters' values at which it is r^phi: the
    collapse figure's phi = 0 / 1 panels set them there); table (the table it is fitted to: "runs", the runs table
    every law above reads, or "test-time", one row per model and r_eval: `fit --law testtime`,
    `loopscale.fit.testtime`); reads_curves (its rows are a curves table's evaluations: drawn as curves).

    Instances are bound to what a fit of them needs from the data (`bind`: the r values of per-r multipliers, the
    recipes of a per-recipe law) or from a fit record's parameters (`from_params`).
    """

    name: ClassVar[str] = ""
    formula: ClassVar[str] = ""
    size_columns: ClassVar[tuple[str, ...]] = ("N_once", "N_rec", "r")
    derivable: ClassVar[Mapping[str, tuple[str, ...]]] = {}
    point_columns: ClassVar[tuple[str, ...]] = ("r", "N_once", "N_rec", "D", "L")
    zero_allowed: ClassVar[tuple[str, ...]] = ("N_once", "N_rec")  # size columns that may be 0 (others > 0)
    cost_formula: ClassVar[str] = "N_once + r N_rec"  # the N of C = 6 N D, as `canonical_table` records it
    dense: ClassVar[bool] = False
    per_recipe: ClassVar[bool] = False
    recipe_law: ClassVar[str | None] = None
    per_r_multipliers: ClassVar[bool] = False
    profile_param: ClassVar[str | None] = None
    compute_optimal: ClassVar[bool] = True
    warm_start: ClassVar[str | None] = None
    has_hessian: ClassVar[bool] = True
    rival: ClassVar[str | None] = None
    departure: ClassVar[str | None] = None  # e.g. "phi runs with the size": validate's flag when the rival wins
    looped_at: ClassVar[Mapping[str, float]] = {}  # e.g. {"psi": 0.0}: the parameters' values that make it r^phi
    table: ClassVar[str] = "runs"  # the table it reads: "runs" (one row per run) or "test-time" (per model and r_eval)
    reads_curves: ClassVar[bool] = False  # its rows are evaluations along runs' loss curves (a curves table)

    # -- binding an instance --------------------------------------------------------------------------
    @classmethod
    def bind(cls, r=None, recipes=()) -> Law:
        """The law for a fit to data with these r values (per-r laws) and recipes (per-recipe laws)."""
        return cls()

    @classmethod
    def for_data(cls, data: LawData) -> Law:
        """The law `fit --law` fits to `data`: bound to its r (`bind`) holding what it reads of it (`with_data`)."""
        return cls.bind(r=data.r).with_data(data)

    def with_data(self, data: LawData) -> Law:
        """This law holding what it reads of a fit's data (looped-logn's N_ref; a joint fit binds it so): most hold
        nothing, itself."""
        return self

    @classmethod
    def rival_law(cls, data: LawData, reference: Mapping[str, float]) -> Law:
        """The law `validate` fits as a rival form to `data` beside a fit of parameters `reference` (a pinned E)."""
        return cls.for_data(data)

    @classmethod
    def from_params(cls, params: Mapping[str, float]) -> Law:
        """The law whose user parameters are `params` (a fit record's): per-r or per-recipe names included."""
        return cls()

    # -- the table ----------------------------------------------------------------------------------------
    @classmethod
    def check_table(cls, table) -> None:
        """InputError when a canonical table cannot identify the law (its size is `runs_table.check_fit_size`'s):
        r^phi needs runs at two or more r; and a law that does not read N_pass refuses rows with parameters used
        once per pass (per-pass adapters), which it would leave out of N_eff (looped-pass reads them)."""
        rows = per_pass_rows(table)
        if "N_pass" not in cls.size_columns and rows:
            raise InputError(
                f"law {cls.name!r} has no place for parameters used once per pass: {rows} rows have N_pass > 0 "
                "(use --law looped-pass: N_once + N_pass + r^phi N_rec, docs/design.md)"
            )
        r_values = np.unique(table["r"].to_numpy(dtype=float))
        if len(r_values) < 2:
            raise InputError(
                f"law {cls.name!r} needs runs at two or more r values to identify phi; "
                f"all rows have r = {r_values[0]:g} (use --law chinchilla)"
            )

    @classmethod
    def rows_to_fit(cls, table):
        """The rows of a table the law describes (`runs_table.canonical_table` keeps these): all of them; a law
        of loss curves keeps those after each run's warmup, a forked parent's shared rows once."""
        return table

    @classmethod
    def invalid_rows(cls, table) -> tuple[np.ndarray, str] | None:
        """(mask, rule) of the rows breaking a rule across columns (each is checked alone before), or None."""
        return ((table["N_once"] + table["N_rec"]).to_numpy() <= 0), "N_once + N_rec must be > 0"

    @classmethod
    def cost_params(cls, cols) -> np.ndarray:
        """The N of C = 6 N D per row (`cost_formula`), from a table or dict of arrays."""
        return cost_params(cols["N_once"], cols["N_rec"], cols["r"])

    @classmethod
    def data_from_table(cls, table) -> LawData:
        """LawData from a DataFrame or dict of canonical columns: size_columns, D (or C: D = C / 6 cost_params), L."""
        cols = _float_columns(table, (*cls.size_columns, "D", "C", "L"))
        for need in cls.size_columns:
            if need not in cols:
                raise InputError(f"law {cls.name!r} needs column {need!r}")
        D = cols["D"] if "D" in cols else _tokens_from_compute(cols, cls.cost_params(cols))
        return LawData(cols["N_once"], cols["N_rec"], cols["r"], D, cols.get("L"))

    @classmethod
    def predict_table(cls, params: Mapping[str, float], table, recipe_column: str | None = None) -> np.ndarray:
        """L_hat per row of a table (DataFrame or dict of arrays) at user parameters `params`; recipe_column:
        where a per-recipe law finds each row's recipe."""
        law = cls.from_params(params)
        return np.exp(law.log_predict(law.from_user(params), law.data_from_table(table)))

    def final_point_params(self, params: Mapping[str, np.ndarray]) -> dict:
        """The parameters as the final-point law of a run's last evaluation (E, A, alpha, B, beta and the
        law's own), what advice and power read: the same for every final-point law; a curve law's are those of
        loopscale's wsd run (`looped_curve`)."""
        return dict(params)

    def multiplier(self, params: Mapping[str, np.ndarray], r: float, recipe: str | None = None) -> np.ndarray:
        """m_r in N_eff = N_once + m_r N_rec at user parameters (arrays: one entry per replicate) for r, and
        for a per-recipe law the recipe; InputError when the law has no m for this r."""
        raise InputError(f"law {self.name!r} gives no multiplier m_r for r = {r:g}")

    def multiplier_scaling(self, params: Mapping[str, np.ndarray], r: float, recipe: str | None = None):
        """(m_ref, s, N_ref): m = m_ref (N_c / N_ref)^s, N_c = N_once + r N_rec, for advice; here m_r alone."""
        return self.multiplier(params, r, recipe), None, None

    def effective_size(self, params: Mapping[str, float], cols, recipe: str | None = None) -> np.ndarray:
        """N_eff per row (a table, or arrays with D or C) at user parameters: `n_once` + each row's m_r N_rec."""
        data = self.data_from_table(cols)
        m = np.empty_like(data.r)
        for value in np.unique(data.r):
            m[data.r == value] = self.multiplier(params, float(value), recipe)
        return self.n_once(data) + m * data.N_rec

    def n_once(self, data: LawData) -> np.ndarray:
        """The part of N_eff = n_once + m N_rec that no parameter scales: N_once (a law with a per-pass class
        adds it here, from `LawData.extra`)."""
        return data.N_once

    # -- parameter names ---------------------------------------------------------------------------
    def extra_internal_names(self) -> tuple[str, ...]:
        """The law's own internal coordinates after e, a, alpha, b, beta."""
        return ()

    def extra_user_names(self) -> tuple[str, ...]:
        return ()

    def extra_bounds(self) -> list[tuple[float, float]]:
        """The box of each extra internal coordinate."""
        return []

    def extras_to_user(self, x: np.ndarray) -> dict[str, float]:
        return {}

    def extras_from_user(self, params: Mapping[str, float]) -> list[float]:
        return []

    @property
    def internal_names(self) -> tuple[str, ...]:
        return BASE_INTERNAL + self.extra_internal_names()

    @property
    def user_names(self) -> tuple[str, ...]:
        return BASE_USER + self.extra_user_names()

    @property
    def n_params(self) -> int:
        return len(self.internal_names)

    def bounds(self) -> list[tuple[float, float]]:
        """(low, high) for each internal coordinate, in `internal_names` order (`loopscale.fit.bounds`)."""
        return [BOUNDS[n] for n in BASE_INTERNAL] + self.extra_bounds()

    def to_user(self, theta: np.ndarray) -> dict[str, float]:
        """Internal vector -> {"E", "A", "alpha", "B", "beta", and the law's own names}."""
        theta = np.asarray(theta, dtype=float)
        e, a, alpha, b, beta = theta[:5]
        base = {"E": float(np.exp(e)), "A": float(np.exp(a)), "alpha": float(alpha)}
        return {**base, "B": float(np.exp(b)), "beta": float(beta), **self.extras_to_user(theta[5:])}

    def from_user(self, params: Mapping[str, float]) -> np.ndarray:
        """{"E": ..., "A": ..., ...} -> internal vector; InputError naming a missing or non-positive key."""
        logs = {"E": True, "A": True, "alpha": False, "B": True, "beta": False}
        base = [user_value(self.name, params, key, log) for key, log in logs.items()]
        return np.array(base + list(self.extras_from_user(params)))

    # -- starts (`loopscale.fit.starts`) -------------------------------------------------------------
    def classic_axes(self) -> list[np.ndarray]:
        """Axes of the extras in the classic start grid (one value each when they start fixed)."""
        return []

    def projected_axes(self, values: np.ndarray) -> list[np.ndarray]:
        """Axes of the extras in the exponent grid of the projected starts, from exponent values `values`."""
        return []

    def keep_projected(self, grid: np.ndarray) -> np.ndarray:
        """The rows of the projected exponent grid (alpha, beta, extras) worth screening."""
        return grid

    def projected_grid(self, alphas: np.ndarray, betas: np.ndarray, values: np.ndarray) -> np.ndarray:
        """The projected starts' exponent grid, rows (alpha, beta, extras...): the product of the axes, kept by
        `keep_projected`. A law with many extras overrides it to keep the grid's size bounded."""
        return self.keep_projected(np.array(list(itertools.product(alphas, betas, *self.projected_axes(values)))))

    def warm_starts(self, theta: np.ndarray) -> np.ndarray:
        """Starts (rows) from the optimum `theta` of the `warm_start` law."""
        raise NotImplementedError(f"law {self.name!r} has no warm start")

    # -- prediction ----------------------------------------------------------------------------------
    def log_multiplier(self, thetas: np.ndarray, data: LawData):
        """log m (M, rows) in N_eff = N_once + m N_rec, and d(log m)/d(extras): (rows, P - 5) when log m is
        linear in the extras (the same for every theta; what `has_hessian` needs), else (M, rows, P - 5)."""
        raise NotImplementedError(f"law {self.name!r} defines no multiplier")

    def log_n_eff_batch(self, thetas: np.ndarray, data: LawData, jac: bool = True):
        """log N_eff (M, rows) for parameter vectors thetas (M, P) and, if jac, d(log N_eff)/d(extra
        params) as (M, rows, P - 5) (None otherwise)."""
        log_m, dlogm = self.log_multiplier(thetas, data)
        scaled_rec = np.exp(log_m) * data.N_rec  # m N_rec
        total_n = self.n_once(data) + scaled_rec
        if not jac:
            return np.log(total_n), None
        dlogm = dlogm if dlogm.ndim == 3 else dlogm[None, :, :]
        # d log N_eff / d theta_j = m N_rec (d log m / d theta_j) / N_eff
        return np.log(total_n), scaled_rec[:, :, None] * dlogm / total_n[:, :, None]

    def log_predict_batch(self, thetas: np.ndarray, data: LawData) -> np.ndarray:
        """log L_hat for many parameter vectors at once: thetas (M, n_params) -> (M, rows).

        Used to screen thousands of multi-start points in one vectorised pass.
        """
        thetas = np.atleast_2d(np.asarray(thetas, dtype=float))
        e, a, alpha, b, beta = (thetas[:, i : i + 1] for i in range(5))
        log_n, _ = self.log_n_eff_batch(thetas, data, jac=False)
        t1 = a - alpha * log_n
        t2 = b - beta * data.log_D
        return np.logaddexp(np.logaddexp(t1, t2), e)

    def log_predict_and_jac_batch(self, thetas: np.ndarray, data: LawData):
        """Batched `log_predict_and_jac`: thetas (M, P) -> log L_hat (M, rows), J (M, rows, P)."""
        thetas = np.atleast_2d(np.asarray(thetas, dtype=float))
        M, n = len(thetas), len(data)
        e, a, alpha, b, beta = (thetas[:, i : i + 1] for i in range(5))
        log_n, dlogn = self.log_n_eff_batch(thetas, data)
        log_pred, (w1, w2, w3) = lse_and_weights(a - alpha * log_n, b - beta * data.log_D, e)
        J = np.empty((M, n, self.n_params))
        J[:, :, 0] = w3
        J[:, :, 1] = w1
        J[:, :, 2] = -w1 * log_n
        J[:, :, 3] = w2
        J[:, :, 4] = -w2 * data.log_D
        if self.n_params > 5:
            J[:, :, 5:] = (-alpha * w1)[:, :, None] * dlogn
        return log_pred, J

    def log_predict_jac_hess(self, theta: np.ndarray, data: LawData):
        """log L_hat (rows,), J (rows, P) and c -> sum_i c_i d^2 log L_hat_i (P, P), for laws whose log m is
        linear in the extras (`lse.lse_jac_hess`); the exact-Newton solver of `optimize.newton` uses it."""
        if not self.has_hessian:
            raise NotImplementedError(f"no analytic Hessian for law {self.name!r}")
        return lse_jac_hess(self, np.asarray(theta, dtype=float), data)

    def log_predict(self, theta: np.ndarray, data: LawData) -> np.ndarray:
        """log L_hat per row (the log-sum-exp form)."""
        return self.log_predict_and_jac(theta, data, jac=False)[0]

    def log_predict_and_jac(self, theta: np.ndarray, data: LawData, jac: bool = True):
        """log L_hat per row and, if jac, its Jacobian (rows, n_params) in internal coordinates.

        With terms t1 = a - alpha log N_eff, t2 = b - beta log D, t3 = e and softmax weights
        w_i = exp(t_i - LSE): d/da = w1, d/db = w2, d/de = w3, d/dalpha = -w1 log N_eff,
        d/dbeta = -w2 log D, d/d(extra) = -alpha w1 d(log N_eff)/d(extra).
        """
        thetas = np.asarray(theta, dtype=float)[None, :]
        if not jac:
            return self.log_predict_batch(thetas, data)[0], None
        log_pred, J = self.log_predict_and_jac_batch(thetas, data)
        return log_pred[0], J[0]


def _float_columns(table, wanted) -> dict[str, np.ndarray]:
    keys = list(table.columns) if hasattr(table, "columns") else list(table.keys())
    return {k: np.asarray(table[k], dtype=float) for k in keys if k in wanted}


def _tokens_from_compute(cols: dict, cost_N: np.ndarray) -> np.ndarray:
    if "C" not in cols:
        raise InputError("need column 'D' (tokens) or 'C' (training FLOPs) to get D")
    return tokens_from_compute(cols["C"], cost_N)
