"""Named scaling-law forms and their log-space predictions with analytic gradients.

Every law is written in log space as a log-sum-exp of three terms (Hoffmann et al. 2022, eq. 10
fitted in log space; Besiroglu et al. 2024):

    log L_hat = LSE(a - alpha * log N_eff,  b - beta * log D,  e),   A = exp(a), B = exp(b), E = exp(e)

which is log(E + A * N_eff^-alpha + B * D^-beta). The laws differ only in N_eff:

- ``chinchilla``   N_eff = N                                   (params E, A, alpha, B, beta)
- ``looped``       N_eff = N_once + r^phi * N_rec              (adds phi)
- ``looped-free``  N_eff = N_once + k_r * N_rec, k_1 = 1       (adds one multiplier k_<r> per r > 1;
                                                                 a diagnostic: does k_r follow r^phi?)
- ``looped-joint`` N_eff = N_once + r^phi_g * N_rec             (several recipes g share E, A, alpha,
                                                                 B, beta; one phi_g per recipe)

The joint law compares recipes (baseline, truncated backprop, ...) that share the dense model: their
r = 1 runs are the same runs, and r^phi_g = 1 there whatever g, so an r = 1 row belongs to every
recipe at once. Internally the first recipe's exponent is ``phi`` and every other recipe g has
``dphi[g] = phi_g - phi``, so delta-phi is a coordinate that the profile machinery can hold fixed;
the user-facing names are ``phi[<recipe>]``. Rows carry an integer recipe code (`LawData.recipe`).

User-facing parameters are dicts keyed by the names in the literature (``E, A, alpha, B, beta, phi,
k_2, k_4, ...``). The optimiser works on an internal vector in log coordinates
(``e, a, alpha, b, beta, phi`` or ``log_k_<r>``); `Law.to_user` / `Law.from_user` convert, and the
order of that vector is private to the fitter (`objective`, `starts`, `optimize`, `uncertainty`,
`fit_bounds`) and this module.

Data arrays (`LawData`) hold the logs of the inputs once, so each objective evaluation costs a few
vector operations.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from loopscale.errors import InputError

LAW_NAMES = ("chinchilla", "looped", "looped-free", "looped-joint")

# Internal coordinates shared by every law, in vector order.
BASE_INTERNAL = ("e", "a", "alpha", "b", "beta")
BASE_USER = ("E", "A", "alpha", "B", "beta")


@dataclass(frozen=True)
class LawData:
    """Inputs of a law as arrays (one entry per run), with the logs the objective needs.

    N_once, N_rec: non-embedding parameters run once / in the recurrent block (for chinchilla pass
    N as N_once and zeros as N_rec). r: recurrences (1 for chinchilla). D: training tokens. L: loss
    (may be None when only predicting). recipe: integer recipe code per row for the joint law
    (index into `Law.recipes`; any code on r = 1 rows, where it has no effect), else None.
    """

    N_once: np.ndarray
    N_rec: np.ndarray
    r: np.ndarray
    D: np.ndarray
    L: np.ndarray | None = None
    recipe: np.ndarray | None = None
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
        if self.L is not None:
            object.__setattr__(self, "L", np.asarray(self.L, dtype=float))
            object.__setattr__(self, "log_L", np.log(self.L))
        else:
            object.__setattr__(self, "log_L", None)

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
        )


def n_eff(N_once, N_rec, r, phi):
    """Effective parameter count N_eff = N_once + r^phi * N_rec (docs/design.md, "The question").

    phi = 1: looping a block r times is worth r unique blocks; phi = 0: worth one block.
    Accepts scalars or arrays (broadcast).
    """
    return np.asarray(N_once, dtype=float) + np.power(np.asarray(r, dtype=float), phi) * np.asarray(N_rec, dtype=float)


@dataclass(frozen=True)
class Law:
    """A named law form: its parameter names and the log prediction with its gradient.

    r_values: the distinct r > 1 that get a free multiplier (``looped-free`` only).
    recipes: the recipe names of a ``looped-joint`` law, the reference (delta-phi = 0) first.
    """

    name: str
    r_values: tuple[float, ...] = ()
    recipes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.name not in LAW_NAMES:
            raise InputError(f"law must be one of {', '.join(LAW_NAMES)}; got {self.name!r}")
        if self.name == "looped-joint" and len(self.recipes) < 2:
            raise InputError(f"law 'looped-joint' needs two or more recipes; got {list(self.recipes)}")
        if len(set(self.recipes)) != len(self.recipes):
            raise InputError(f"recipe names must be distinct; got {list(self.recipes)}")

    # -- parameter names ---------------------------------------------------------------------
    def _names(self, base: tuple[str, ...], k_prefix: str) -> tuple[str, ...]:
        """base + the law's own parameters: nothing (chinchilla), phi (looped) or one k per r (looped-free)."""
        if self.name == "chinchilla":
            return base
        if self.name == "looped":
            return base + ("phi",)
        if self.name == "looped-joint":
            if k_prefix == "k_":  # user names: one phi per recipe
                return base + tuple(f"phi[{g}]" for g in self.recipes)
            return base + ("phi",) + tuple(f"dphi[{g}]" for g in self.recipes[1:])
        return base + tuple(f"{k_prefix}{_r_label(r)}" for r in self.r_values)

    @property
    def internal_names(self) -> tuple[str, ...]:
        return self._names(BASE_INTERNAL, "log_k_")

    @property
    def user_names(self) -> tuple[str, ...]:
        return self._names(BASE_USER, "k_")

    @property
    def n_params(self) -> int:
        return len(self.internal_names)

    def to_user(self, theta: np.ndarray) -> dict[str, float]:
        """Internal vector -> {"E", "A", "alpha", "B", "beta", ("phi" | "k_<r>" | "phi[<recipe>]")}."""
        theta = np.asarray(theta, dtype=float)
        if self.name == "looped-joint":
            out = Law("looped").to_user(theta[:6])
            phi = out.pop("phi")
            return {**out, **{f"phi[{g}]": float(phi + d) for g, d in zip(self.recipes, [0.0, *theta[6:]])}}
        out = {}
        for name, value in zip(self.internal_names, theta):
            if name in ("e", "a", "b"):
                out[name.upper()] = float(np.exp(value))
            elif name.startswith("log_k_"):
                out[name[4:]] = float(np.exp(value))
            else:
                out[name] = float(value)
        return out

    def from_user(self, params: Mapping[str, float]) -> np.ndarray:
        """{"E": ..., "A": ..., ...} -> internal vector; raises ValueError naming a missing key."""
        if self.name == "looped-joint":
            missing = [k for k in self.user_names if k not in params]
            if missing:
                raise InputError(f"law {self.name!r} needs parameter {missing[0]!r}; got {sorted(params)}")
            phis = [float(params[f"phi[{g}]"]) for g in self.recipes]
            base = Law("looped").from_user({**params, "phi": phis[0]})
            return np.concatenate([base, np.array(phis[1:]) - phis[0]])
        theta = []
        for name in self.internal_names:
            if name in ("e", "a", "b"):
                key, transform = name.upper(), np.log
            elif name.startswith("log_k_"):
                key, transform = name[4:], np.log
            else:
                key, transform = name, float
            if key not in params:
                raise InputError(f"law {self.name!r} needs parameter {key!r}; got {sorted(params)}")
            value = float(params[key])
            if transform is np.log and not value > 0:
                raise InputError(f"parameter {key} must be > 0 for law {self.name!r}; got {value}")
            theta.append(transform(value))
        return np.array(theta)

    # -- prediction ----------------------------------------------------------------------------
    def log_multiplier(self, thetas: np.ndarray, data: LawData):
        """log m (M, rows) in N_eff = N_once + m N_rec, and d(log m)/d(extra params) as (rows, P - 5).

        m is r^phi (looped), r^(phi + dphi[g]) on recipe g's rows (looped-joint) or a free k_r per r
        (looped-free; m = 1 on r = 1 rows); chinchilla has no extra parameter and m = 1.
        """
        M, n = len(thetas), len(data)
        if self.name == "chinchilla":
            return np.zeros((M, n)), np.empty((n, 0))
        if self.name == "looped-free":
            log_m = np.zeros((M, n))
            dlogm = np.zeros((n, len(self.r_values)))
            for j, r in enumerate(self.r_values):
                log_m[:, data.r == r] = thetas[:, 5 + j : 6 + j]
                dlogm[data.r == r, j] = 1.0
            return log_m, dlogm
        if self.name == "looped":
            return thetas[:, 5:6] * data.log_r, data.log_r[:, None]
        if data.recipe is None:  # looped-joint: phi_g = phi + dphi[g], dphi of the reference recipe = 0
            raise InputError("law 'looped-joint' needs a recipe code per row (LawData.recipe)")
        dphi = np.concatenate([np.zeros((M, 1)), thetas[:, 6:]], axis=1)
        dlogm = np.stack([data.log_r] + [data.log_r * (data.recipe == g) for g in range(1, len(self.recipes))], 1)
        return (thetas[:, 5:6] + dphi[:, data.recipe]) * data.log_r, dlogm

    def log_n_eff_batch(self, thetas: np.ndarray, data: LawData, jac: bool = True):
        """log N_eff (M, rows) for parameter vectors thetas (M, P) and, if jac, d(log N_eff)/d(extra
        params) as (M, rows, P - 5) (None otherwise)."""
        if self.name == "chinchilla":  # N_eff = N: no multiplier to apply
            log_n = np.broadcast_to(np.log(data.N_once + data.N_rec), (len(thetas), len(data)))
            return log_n, (np.empty((len(thetas), len(data), 0)) if jac else None)
        log_m, dlogm = self.log_multiplier(thetas, data)
        scaled_rec = np.exp(log_m) * data.N_rec  # m N_rec
        total_n = data.N_once + scaled_rec
        if not jac:
            return np.log(total_n), None
        # d log N_eff / d theta_j = m N_rec (d log m / d theta_j) / N_eff
        return np.log(total_n), scaled_rec[:, :, None] * dlogm[None, :, :] / total_n[:, :, None]

    def log_n_eff_and_grad(self, theta: np.ndarray, data: LawData):
        """log N_eff per row and d(log N_eff)/d(extra params) as a (rows, n_extra) array."""
        log_n, dlogn = self.log_n_eff_batch(np.asarray(theta, dtype=float)[None, :], data)
        return log_n[0], dlogn[0]

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
        log_pred, (w1, w2, w3) = _lse_and_weights(a - alpha * log_n, b - beta * data.log_D, e)
        J = np.empty((M, n, self.n_params))
        J[:, :, 0] = w3
        J[:, :, 1] = w1
        J[:, :, 2] = -w1 * log_n
        J[:, :, 3] = w2
        J[:, :, 4] = -w2 * data.log_D
        if self.n_params > 5:
            J[:, :, 5:] = (-alpha * w1)[:, :, None] * dlogn
        return log_pred, J

    @property
    def has_hessian(self) -> bool:
        """Whether `log_predict_jac_hess` covers this law (its N_eff has simple second derivatives)."""
        return True  # every law's log multiplier is linear in its extra parameters (see log_predict_jac_hess)

    def log_predict_jac_hess(self, theta: np.ndarray, data: LawData):
        """log L_hat (rows,), J (rows, P; a column-major view) and a function
        c -> sum_i c_i d^2 log L_hat_i (P, P).

        log L_hat = LSE(t) with t = (a - alpha log N_eff, b - beta log D, e), so its Hessian is
        sum_k w_k (grad t_k)(grad t_k)^T - J J^T + w_1 d^2 t_1 (the softmax weights w as in
        `log_predict_and_jac`). Only t_1 is curved, through the extras x (phi; phi and dphi[g]; log k_r), in
        which log m is linear: with p = m N_rec / N_eff, d log N_eff / dx_j = p dlogm_j, so
        d^2 t_1 / (d alpha dx_j) = -p dlogm_j and d^2 t_1 / (dx_j dx_k) = -alpha p (1 - p) dlogm_j dlogm_k
        (the looped law: -alpha s (ln r - s), s = p ln r). Used by the exact-Newton solver of `optimize.newton`.
        """
        if not self.has_hessian:
            raise NotImplementedError(f"no analytic Hessian for law {self.name!r}")
        theta = np.asarray(theta, dtype=float)
        e, a, alpha, b, beta = theta[:5]
        log_n, dlogn = self.log_n_eff_batch(theta[None, :], data)
        log_n = log_n[0]
        log_pred, (w1, w2, w3) = _lse_and_weights(a - alpha * log_n, b - beta * data.log_D, e)
        # grad t_1 over (a, alpha, extras) and grad t_2 over (b, beta); t_3 = e has gradient 1 on e
        n_extra = self.n_params - 5
        dn = dlogn[0]  # (rows, extras): d log N_eff / d extra = p d log m / d extra, p = m N_rec / N_eff
        g1 = [np.ones_like(log_n), -log_n] + [-alpha * dn[:, j] for j in range(n_extra)]
        if n_extra:
            log_m, dlogm = self.log_multiplier(theta[None, :], data)
            scaled = np.exp(log_m[0]) * data.N_rec
            p_rec = scaled / (data.N_once + scaled)
        # Parameter-major arrays (P, rows): the Gram products below are single (P, rows) x (rows, P)
        # BLAS calls, several times faster than on row-major (rows, P) arrays. Plain dot products go
        # through einsum: a threaded BLAS dot on a busy machine burns CPU time waiting for threads.
        G1, G2 = np.array(g1), np.array([np.ones_like(log_n), -data.log_D])
        i1 = [1, 2] + list(range(5, self.n_params))
        JT = np.empty((self.n_params, len(data)))
        JT[0] = w3
        JT[i1] = w1 * G1
        JT[3:5] = w2 * G2

        def hess(c: np.ndarray) -> np.ndarray:
            H = -(JT * c) @ JT.T
            H[0, 0] += np.einsum("n,n->", c, w3)
            cw1 = c * w1
            H[np.ix_(i1, i1)] += (G1 * cw1) @ G1.T
            H[3:5, 3:5] += (G2 * (c * w2)) @ G2.T
            if n_extra:  # log m is linear in the extras, so d2 log N_eff = p (1 - p) dlogm dlogm^T
                cross = -np.einsum("n,nj->j", cw1, dn)
                H[2, 5:] += cross
                H[5:, 2] += cross
                H[5:, 5:] -= alpha * (dlogm.T * (cw1 * p_rec * (1 - p_rec))) @ dlogm
            return H

        return log_pred, JT.T, hess

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


def _lse_and_weights(t1, t2, t3):
    """log(e^t1 + e^t2 + e^t3) and the softmax weights (w1, w2, w3), shifted by the largest term
    so that nothing overflows."""
    top = np.maximum(np.maximum(t1, t2), t3)
    x1, x2, x3 = np.exp(t1 - top), np.exp(t2 - top), np.exp(t3 - top)
    total = x1 + x2 + x3
    return top + np.log(total), (x1 / total, x2 / total, x3 / total)


def _r_label(r: float) -> str:
    """'4' for 4.0, '1.5' for 1.5: used in parameter names k_<r>."""
    return str(int(r)) if float(r).is_integer() else repr(float(r))


def law_data_from_table(table, law: str | Law) -> LawData:
    """LawData from a DataFrame (or dict of arrays) with canonical runs-table columns.

    chinchilla: N and D (or C, then D = C / (6 N)); looped laws: N_once, N_rec, r and D (or C, then
    D = C / (6 (N_once + r N_rec)), the training cost of the looped model). L is used when present.
    """
    law_name = law.name if isinstance(law, Law) else law
    wanted = ("N", "N_once", "N_rec", "r", "D", "C", "L")
    cols = {k: np.asarray(table[k], dtype=float) for k in _keys(table) if k in wanted}
    L = cols.get("L")
    if law_name == "chinchilla":
        if "N" in cols:
            N = cols["N"]
        elif "N_once" in cols and "N_rec" in cols:
            N = cols["N_once"] + cols["N_rec"]
        else:
            raise InputError("chinchilla law needs column 'N' (or 'N_once' and 'N_rec')")
        D = cols["D"] if "D" in cols else _tokens_from_compute(cols, N)
        return LawData(N, np.zeros_like(N), np.ones_like(N), D, L)
    for need in ("N_once", "N_rec", "r"):
        if need not in cols:
            raise InputError(f"law {law_name!r} needs column {need!r}")
    cost_N = cost_params(cols["N_once"], cols["N_rec"], cols["r"])
    D = cols["D"] if "D" in cols else _tokens_from_compute(cols, cost_N)
    return LawData(cols["N_once"], cols["N_rec"], cols["r"], D, L)


def _keys(table):
    return list(table.columns) if hasattr(table, "columns") else list(table.keys())


# C = 6 N D (docs/design.md, "FLOPs per token"): 2 FLOPs per parameter per token forward, 4 backward.
FLOPS_PER_PARAM_TOKEN = 6.0


def cost_params(N_once, N_rec, r):
    """N_once + r N_rec: the parameters a token passes through (each looped layer r times), so the N of
    C = 6 N D for a looped model; N for a dense one (N_rec = 0 or r = 1)."""
    return N_once + r * N_rec


def tokens_from_compute(C, cost_N):
    """D = C / (6 N), the one place loopscale turns a compute column into tokens."""
    return C / (FLOPS_PER_PARAM_TOKEN * cost_N)


def compute_from_tokens(D, cost_N):
    """C = 6 N D."""
    return FLOPS_PER_PARAM_TOKEN * cost_N * D


def _tokens_from_compute(cols: dict, cost_N: np.ndarray) -> np.ndarray:
    if "C" not in cols:
        raise InputError("need column 'D' (tokens) or 'C' (training FLOPs) to get D")
    return tokens_from_compute(cols["C"], cost_N)


def make_law(name: str, r=None, recipes=()) -> Law:
    """A Law; for ``looped-free`` the distinct r > 1 found in `r` get multipliers k_<r>; for
    ``looped-joint`` `recipes` names the recipes, the reference first."""
    if name == "looped-joint":
        return Law(name, recipes=tuple(str(g) for g in recipes))
    if name == "looped-free":
        if r is None:
            raise InputError("looped-free needs the r values of the data")
        values = tuple(float(v) for v in np.unique(np.asarray(r, dtype=float)) if v != 1.0)
        return Law(name, values)
    return Law(name)


def predict_loss(law: str, params: Mapping[str, float], table_or_arrays) -> np.ndarray:
    """Predicted loss L_hat for each row of a table (DataFrame or dict of arrays).

    `params` uses the user names (E, A, alpha, B, beta, phi, k_<r>), e.g. `FitResult.params`.
    Columns as in `law_data_from_table`; L is not needed. For ``looped-free`` every r > 1 in the
    table must have a k_<r> in params.
    """
    data = law_data_from_table(table_or_arrays, law)
    if law == "looped-free":
        values = tuple(float(v) for v in np.unique(data.r) if v != 1.0)
        law_obj = Law(law, values)
    else:
        law_obj = Law(law)
    theta = law_obj.from_user(params)
    return np.exp(law_obj.log_predict(theta, data))
