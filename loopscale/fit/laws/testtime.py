"""The test-time recurrence law: the loss of one trained model scored at r_eval passes (docs/design.md,
"Test-time depth").

    L_g(r_eval) = L_inf[g] + A[g] s(x_eff) + delta[g] d(x),     x = r_eval / r_scale[g]

one model g per group (a trained checkpoint: its N_once, N_rec, D and r_train are fixed, only r_eval moves),
with a saturating term s of the model's depth scale x and, for a model trained at one fixed r, a drift term d:

- exp   (Parcae, arXiv 2604.12946, reports a saturating exponential):  s(x) = exp(-(x - 1) / tau)
- power (the looped law's r^-phi alpha at N_once = 0):                s(x) = x^-gamma

Both equal 1 at x = 1, so A is the excess over the floor L_inf at the depth scale r_scale. The rate (tau, in
units of r_scale, or gamma) is one parameter of the law: shared by every model of a joint fit (across a sweep,
in units of each model's r_scale), its own in a per-model fit (one group).

Fixed r against sampled r (the published pattern: looped_nanochat's r = 4 model is far worse at r = 2 and
slightly worse at r >= 8; its sampled-r model is flat beyond r = 4):
- a model trained at one fixed r has r_scale = r_train; passes beyond it add nothing to the saturating term
  (x_eff = min(x, 1)) and past it the loss drifts by delta d(x), d(x) = max(0, 1 - 1 / x): 0 at r_train, 1/2
  at 2 r_train, delta as r_eval -> infinity (a saturating drift; delta > 0 degrades, delta < 0 still gains);
- a model trained with sampled r has no delta: x_eff = x (pure saturation in r_eval), and r_scale is the
  sampler's mean r when the table gives it (else 1: x = r_eval).

Fitted as every law here: log L_hat against log L with the Huber loss; internal coordinates are the rate
(log tau or gamma) then per group L_inf, A (>= 0) and, for a fixed-r model, delta, in the units of the loss
column (nats, bits per byte, perplexity: any positive loss, lower is better). The box of L_inf, A and delta is
set from each group's losses (`bind_table`), and a parameter the group's rows cannot identify is held
(`held`): A with one depth at or below r_scale, delta with no row beyond r_train, the rate when no model has
three depths. The driver (per-model and joint fits, intervals, verdict, test-time phi) is
`loopscale.fit.testtime`; this module is the form.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np

from loopscale.errors import InputError
from loopscale.fit.laws.form import Law, LawData
from loopscale.fit.laws.registry import register

SHAPES = ("exp", "power")
LOG_TAU_BOUNDS = (float(np.log(0.01)), float(np.log(1000.0)))  # tau in units of r_scale
GAMMA_BOUNDS = (0.0, 10.0)
HELD_RATE = {"exp": 0.0, "power": 1.0}  # log tau = 0 (tau = 1 r_scale) / gamma = 1, where the rows cannot say
FIXED_WORDS = ("", "fixed", "none", "nan", "false", "0")


def s_and_ds(shape: str, rate: np.ndarray, x_eff: np.ndarray):
    """s(x_eff) and ds / d(rate coordinate): exp with rate = log tau, power with rate = gamma. Shapes (M, rows)."""
    if shape == "exp":
        tau = np.exp(rate)
        s = np.exp(-(x_eff - 1.0) / tau)
        return s, s * (x_eff - 1.0) / tau  # d/dlog tau of exp(-(x - 1) e^-lt) = s (x - 1) / tau
    s = np.power(x_eff, -rate)
    return s, -s * np.log(x_eff)


def drift(x: np.ndarray, fixed: np.ndarray) -> np.ndarray:
    """d(x) = max(0, 1 - 1/x) on a fixed-r model's rows, 0 on a sampled-r model's."""
    return np.where(fixed > 0, np.maximum(0.0, 1.0 - 1.0 / x), 0.0)


def effective_x(x: np.ndarray, fixed: np.ndarray) -> np.ndarray:
    """x_eff: min(x, 1) for a fixed-r model (no gain past r_train), x for a sampled-r one."""
    return np.where(fixed > 0, np.minimum(x, 1.0), x)


def is_sampled(value) -> bool:
    """A model's r_train cell (or r-sampling cell) says it was trained with sampled r: a word such as "sampled",
    "random", "poisson-lognormal", "uniform{2,4}" (any non-number not meaning fixed), not a number."""
    if value is None:
        return False
    if isinstance(value, (int, float, np.integer, np.floating)):
        return False
    text = str(value).strip().lower()
    if text in FIXED_WORDS:
        return False
    try:
        float(text)
        return False
    except ValueError:
        return True


@register
@dataclass(frozen=True)
class TestTime(Law):
    """groups: the models (sorted labels); fixed: whether each was trained at one fixed r (has delta);
    spans: (min, max) of each group's losses (its box); held: internal coordinates held at a value."""

    __test__: ClassVar[bool] = False  # pytest: not a test class

    name = "testtime"
    formula = "L(r_eval) = L_inf + A s(x_eff) + delta max(0, 1 - 1/x),  x = r_eval / r_scale"
    table = "test-time"
    size_columns = ("r_eval", "r_scale", "fixed")
    point_columns = ("model", "r_eval", "L")
    compute_optimal = False
    has_hessian = False

    shape: str = "exp"
    groups: tuple[str, ...] = ("model",)
    fixed: tuple[bool, ...] = (False,)
    spans: tuple[tuple[float, float], ...] = ((1.0, 1.0),)
    held: tuple[tuple[str, float], ...] = ()

    def __post_init__(self) -> None:
        if self.shape not in SHAPES:
            raise InputError(f"test-time shape must be one of {', '.join(SHAPES)}; got {self.shape!r}")
        sizes = [3 if f else 2 for f in self.fixed]  # L_inf, A (, delta) per group after the rate
        object.__setattr__(self, "_offsets", 1 + np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int))
        object.__setattr__(self, "_has_delta", np.array(self.fixed, dtype=bool))

    # -- binding ------------------------------------------------------------------------------------------
    @classmethod
    def bind(cls, r=None, recipes=()) -> TestTime:
        return cls()

    @classmethod
    def bind_table(cls, table, shape: str = "exp") -> TestTime:
        """The law for a canonical test-time table (`loopscale.fit.testtime.testtime_table`): its models, which
        were trained at a fixed r, their loss spans, and the coordinates their rows cannot identify (held): A
        with one depth x_eff, delta with no row past r_train, the rate when no model has three depths (a model
        with k depths spends two on its L_inf and A)."""
        groups = tuple(sorted({str(g) for g in table["model"]}))
        fixed, spans, held = [], [], []
        for g in groups:
            rows = table[table["model"].astype(str) == g]
            is_fixed = bool(rows["fixed"].iloc[0])
            x = rows["r_eval"].to_numpy(float) / rows["r_scale"].to_numpy(float)
            x_eff = np.minimum(x, 1.0) if is_fixed else x
            depths = len(np.unique(np.round(x_eff, 12)))
            L = rows["L"].to_numpy(float)
            fixed.append(is_fixed)
            spans.append((float(L.min()), float(L.max())))
            if depths < 2:
                held.append((f"A[{g}]", 0.0))
            if is_fixed and not (x > 1.0 + 1e-12).any():
                held.append((f"delta[{g}]", 0.0))
        n_depths = [len(np.unique(np.round(_x_eff(table, g), 12))) for g in groups]
        if max(n_depths) < 3:  # a model with k depths gives k - 2 equations on the shared rate: none has one
            held.append(("log_tau" if shape == "exp" else "gamma", HELD_RATE[shape]))
        return cls(shape, groups, tuple(fixed), tuple(spans), tuple(held))

    @classmethod
    def from_params(cls, params: Mapping[str, float]) -> TestTime:
        shape = "exp" if "tau" in params else "power"
        groups = tuple(sorted(k[6:-1] for k in params if k.startswith("L_inf[")))  # as bind_table's, and the data's
        fixed = tuple(f"delta[{g}]" in params for g in groups)
        return cls(shape, groups, fixed, tuple((1.0, 1.0) for _ in groups))

    # -- the table -----------------------------------------------------------------------------------------
    @classmethod
    def check_table(cls, table) -> None:
        """Every model needs a row; the loss must be positive (the fit is in log L)."""
        if len(table) == 0:
            raise InputError("law 'testtime' needs at least one row")

    @classmethod
    def invalid_rows(cls, table):
        return (table["r_eval"].to_numpy(float) <= 0), "r_eval must be > 0"

    @classmethod
    def data_from_table(cls, table) -> LawData:
        """LawData of a canonical test-time table: r = r_eval, extra x = r_eval / r_scale, fixed (0/1) and group
        (the index of the row's model among the sorted model labels); N and D are placeholders (not read)."""
        for need in ("r_eval", "r_scale", "fixed", "model"):
            if need not in table:
                raise InputError(f"law 'testtime' needs column {need!r}")
        labels = np.array([str(g) for g in table["model"]])
        groups = sorted(set(labels))
        code = np.array([groups.index(g) for g in labels], dtype=float)
        r_eval = np.asarray(table["r_eval"], dtype=float)
        x = r_eval / np.asarray(table["r_scale"], dtype=float)
        fixed = np.asarray(table["fixed"], dtype=float)
        n = len(r_eval)
        L = np.asarray(table["L"], dtype=float) if "L" in table else None
        return LawData(np.zeros(n), np.zeros(n), r_eval, np.ones(n), L, extra={"x": x, "fixed": fixed, "group": code})

    @classmethod
    def predict_table(cls, params, table, recipe_column: str | None = None) -> np.ndarray:
        """L_hat of each row at the parameters of its own model: the data's group codes index the table's sorted
        labels, the law's groups the parameters' (a joint fit's), so a table of some of the fit's models (one
        model's grid of r_eval) is re-coded to the law's groups; a model the parameters do not hold: InputError."""
        data = cls.data_from_table(table)
        law = cls.from_params(params)
        labels = sorted({str(g) for g in table["model"]})
        unknown = [g for g in labels if g not in law.groups]
        if unknown:
            raise InputError(f"law 'testtime' has no parameters of model {unknown}; it has {list(law.groups)}")
        code = np.array([law.groups.index(g) for g in labels], dtype=float)[data.extra["group"].astype(int)]
        data = replace(data, extra={**data.extra, "group": code})
        return np.exp(law.log_predict(law.from_user(params), data))

    # -- parameters ----------------------------------------------------------------------------------------
    @property
    def rate_name(self) -> str:
        return "log_tau" if self.shape == "exp" else "gamma"

    @property
    def internal_names(self) -> tuple[str, ...]:
        names = [self.rate_name]
        for g, f in zip(self.groups, self.fixed):
            names += [f"L_inf[{g}]", f"A[{g}]"] + ([f"delta[{g}]"] if f else [])
        return tuple(names)

    @property
    def user_names(self) -> tuple[str, ...]:
        return ("tau" if self.shape == "exp" else "gamma",) + self.internal_names[1:]

    def bounds(self) -> list[tuple[float, float]]:
        """The rate's box; per group L_inf in [0.1 min L, 2 max L] (a floor above the largest loss only with a
        negative drift; a box end at a fitted value would open its interval), A in [0, 100 max L], delta in
        [-0.05 min L, 100 max L] (so L_hat >= 0.05 min L > 0); a held coordinate pinned at its value."""
        out = [LOG_TAU_BOUNDS if self.shape == "exp" else GAMMA_BOUNDS]
        for (lo, hi), f in zip(self.spans, self.fixed):
            out += [(0.1 * lo, 2.0 * hi), (0.0, 100.0 * hi)] + ([(-0.05 * lo, 100.0 * hi)] if f else [])
        held = dict(self.held)
        return [(held[n], held[n]) if n in held else box for n, box in zip(self.internal_names, out)]

    def to_user(self, theta: np.ndarray) -> dict[str, float]:
        theta = np.asarray(theta, dtype=float)
        rate = float(np.exp(theta[0])) if self.shape == "exp" else float(theta[0])
        return {self.user_names[0]: rate, **{n: float(v) for n, v in zip(self.internal_names[1:], theta[1:])}}

    def from_user(self, params: Mapping[str, float]) -> np.ndarray:
        missing = [n for n in self.user_names if n not in params]
        if missing:
            raise InputError(f"law 'testtime' needs parameters {missing}; got {sorted(params)}")
        rate = float(params[self.user_names[0]])
        if self.shape == "exp" and not rate > 0:
            raise InputError(f"parameter tau must be > 0 for law 'testtime'; got {rate}")
        first = np.log(rate) if self.shape == "exp" else rate
        return np.array([first] + [float(params[n]) for n in self.user_names[1:]])

    def start_grid(self) -> np.ndarray:
        """The rate values the starts are projected from (`loopscale.fit.testtime.starts`)."""
        held = dict(self.held)
        if self.rate_name in held:
            return np.array([held[self.rate_name]])
        if self.shape == "exp":
            return np.linspace(*LOG_TAU_BOUNDS, 41)
        return np.linspace(0.02, 6.0, 41)

    # -- prediction ----------------------------------------------------------------------------------------
    def _columns(self, data: LawData):
        """Per row: the internal index of its L_inf, A and delta (-1: none), x_eff and d(x); kept on the data
        object for this law's groups (the solvers call the prediction thousands of times on one data)."""
        key = (self.groups, self.fixed)
        cached = getattr(data, "_testtime_columns", None)
        if cached is not None and cached[0] == key:
            return cached[1]
        x = data.extra["x"] if "x" in data.extra else data.r
        fixed = data.extra["fixed"] if "fixed" in data.extra else np.zeros(len(data))
        group = data.extra["group"].astype(int) if "group" in data.extra else np.zeros(len(data), int)
        col_l = self._offsets[group]
        has_delta = self._has_delta[group]
        col_d = np.where(has_delta, col_l + 2, -1)
        fixed = np.where(has_delta, fixed, 0.0)
        cols = (col_l, col_l + 1, col_d, effective_x(x, fixed), drift(x, fixed))
        object.__setattr__(data, "_testtime_columns", (key, cols))
        return cols

    def _predict(self, thetas: np.ndarray, data: LawData, jac: bool):
        thetas = np.atleast_2d(np.asarray(thetas, dtype=float))
        col_l, col_a, col_d, x_eff, d = self._columns(data)
        s, ds = s_and_ds(self.shape, thetas[:, :1], x_eff[None, :])
        A = thetas[:, col_a]
        delta = np.where(col_d >= 0, thetas[:, np.maximum(col_d, 0)], 0.0)
        L_hat = thetas[:, col_l] + A * s + delta * d
        positive = L_hat > 0
        log_pred = np.where(positive, np.log(np.where(positive, L_hat, 1.0)), np.nan)
        if not jac:
            return log_pred, None
        M, n = L_hat.shape
        J = np.zeros((M, n, self.n_params))
        rows = np.arange(n)
        inv = 1.0 / np.where(positive, L_hat, np.inf)
        J[:, :, 0] = A * ds * inv
        J[:, rows, col_l] = inv
        J[:, rows, col_a] = s * inv
        with_d = col_d >= 0
        J[:, rows[with_d], col_d[with_d]] = (d * inv)[:, with_d]
        return log_pred, J

    def log_predict_batch(self, thetas: np.ndarray, data: LawData) -> np.ndarray:
        return self._predict(thetas, data, jac=False)[0]

    def log_predict_and_jac_batch(self, thetas: np.ndarray, data: LawData):
        return self._predict(thetas, data, jac=True)


def _x_eff(table, group: str) -> np.ndarray:
    rows = table[table["model"].astype(str) == group]
    x = rows["r_eval"].to_numpy(float) / rows["r_scale"].to_numpy(float)
    return np.minimum(x, 1.0) if bool(rows["fixed"].iloc[0]) else x
