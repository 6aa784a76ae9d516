"""Seed noise as data: replicate groups of a runs table, the seed sigma of log L, and the two-stage bootstrap
over points and seeds (docs/design.md, "Fitting: the noise model").

A *point* is one set of law inputs: r, N_once, N_rec (or N), D and, for looped rows, the recipe (an r = 1 run is
the same dense model whatever recipe labels it). Rows of one point that differ by seed are *replicates*; the
seed comes from the `seed` column (another name: `seed_column`), or, in a table without one, every row is its
own run (two rows with the same point and the same loss are one run copied). Rows of one point with the same
seed are one run counted twice: `replicate_groups` marks them (`duplicate`) and the seed sigma averages them.

The seed sigma is of log L, not of L: the fit is in log space (`loopscale.fit.objective`), so its residuals are
standardised by sigma_log; sigma_L = sigma_log * L to first order (reported per r in nats). It is pooled over
points from the within-point deviations (one-way ANOVA, REML: each point with n_g seeds gives n_g - 1 degrees
of freedom, SS_g ~ sigma_g^2 chi2(n_g - 1)), under one of four models, chosen by a stated rule
(`SIGMA_RULE`):

    constant            sigma_g = s                                      (1 parameter)
    log-linear in C     log sigma_g = a + b (log C_g - mean)             (2)
    log-linear in N     log sigma_g = a + b (log N_g - mean)             (2)
    per r               sigma_g = s_r                                    (one per r with replicates)

Rows are weighted by it in the fit (Huber on standardised residuals: `STANDARDISED_DELTA`). The bootstrap
(`Hierarchy`) draws outer clusters (points; a forked sweep's model configs, whose parents are its seeds; or the
`--cluster` column's values) with replacement and, within each drawn cluster, the seeds of each point: with
replacement (`inner="resample"`) or kept whole (`inner="keep"`, Ren et al. 2010).

Pure functions of a canonical table (`loopscale.fit.tables.canonical_table`): nothing here fits a law.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import norm

from loopscale.errors import InputError
from loopscale.fit.tables import PARENT_COLUMN, budget_column, is_forked

SEED_COLUMN = "seed"
RECIPE_COLUMN = "recipe"
# Huber threshold on standardised residuals z = (log L_hat - log L) / sigma: 1.345 gives 95% efficiency at
# Gaussian noise (Huber 1964; Holland & Welsch 1977) and bounds the pull of a run far off the law.
STANDARDISED_DELTA = 1.345
# The sigma model: the lowest AICc (n = the pooled degrees of freedom); a model with more parameters than the
# constant one must beat it by AICC_MARGIN (so a trend is claimed only with evidence: Burnham & Anderson 2002).
AICC_MARGIN = 2.0
SIGMA_RULE = (
    f"lowest AICc among constant, log-linear in C, log-linear in N and per-r sigma of log L (Gaussian "
    f"within-point deviations, n = pooled degrees of freedom); a model other than constant must beat the "
    f"constant by {AICC_MARGIN:g}"
)
MIN_TREND_VALUES = 3  # a log-linear sigma needs replicated points at this many distinct C (N) values
NO_SEED_STATEMENT = (
    "no seed repeats: the seed sigma is not measured, the fit is unweighted and its intervals omit seed "
    "noise (they see only the scatter of single runs about the law, seed noise and misfit together)"
)
INNER_MODES = ("keep", "resample")


# ----------------------------------------------------------------------------------------------
# Replicate groups
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Replicates:
    """Which rows of a table are one point and which one seed.

    point: point id per row (0..n_points-1); unit: seed-run id per row (0..n_units-1), each unit inside one
    point (rows of one unit are one run: a duplicate after the first); seeds: number of distinct seeds per
    point; duplicate: rows that repeat an earlier row's point and seed; seed_column: the column the seeds
    came from (None: every row its own run)."""

    point: np.ndarray
    unit: np.ndarray
    seeds: np.ndarray
    duplicate: np.ndarray
    seed_column: str | None

    @property
    def n_points(self) -> int:
        return len(self.seeds)

    @property
    def has_repeats(self) -> bool:
        """Whether some point has two seeds or more: the seed sigma can be measured."""
        return bool((self.seeds >= 2).any())

    def summary(self) -> dict[str, Any]:
        """{"n_points", "n_replicated_points", "seeds_per_point": {n seeds: n points}, "n_duplicate_rows",
        "dof" (sum of seeds - 1 over points), "seed_column"}: what collect and fit say about the seeds."""
        counts = pd.Series(self.seeds).value_counts().sort_index()
        return {
            "n_points": self.n_points,
            "n_replicated_points": int((self.seeds >= 2).sum()),
            "seeds_per_point": {str(int(k)): int(v) for k, v in counts.items()},
            "n_duplicate_rows": int(self.duplicate.sum()),
            "dof": int((self.seeds - 1).sum()),
            "seed_column": self.seed_column,
        }


def point_keys(table: pd.DataFrame, recipe_column: str | None = RECIPE_COLUMN) -> pd.DataFrame:
    """The columns that make a point, one row per table row: r, N_once, N_rec (or N), D (as read; equal when
    written by one generator, rounded to 12 significant digits so a D derived from C matches), and the recipe
    of looped rows ("" for r = 1 and for tables without `recipe_column`)."""
    cols = [c for c in ("r", "N_once", "N_rec", "N", "D") if c in table.columns]
    if "N_once" in cols and "N" in cols:
        cols.remove("N")  # N = N_once + N_rec: no new information, and maybe summed in another order
    if "D" not in cols:
        raise InputError(f"a point needs its tokens D (or C); columns are {list(table.columns)}")
    keys = pd.DataFrame({c: _round_sig(table[c].to_numpy(dtype=float)) for c in cols})
    looped = table["r"].to_numpy(dtype=float) > 1 if "r" in table.columns else np.zeros(len(table), bool)
    if recipe_column and recipe_column in table.columns:
        keys["_recipe"] = np.where(looped, table[recipe_column].astype(str).to_numpy(), "")
    return keys


def replicate_groups(
    table: pd.DataFrame, seed_column: str | None = SEED_COLUMN, recipe_column: str | None = RECIPE_COLUMN
) -> Replicates:
    """Points and seeds of a table (`Replicates`). seed_column: the column naming each run's seed (None, or a
    name the table lacks: no seeds, every row its own run unless it copies another row's point and loss);
    an empty seed makes the row its own run. Forked sweeps: a seed is a different parent job, so the parent
    column names the run where the table has no seed column."""
    keys = point_keys(table, recipe_column)
    point = keys.groupby(list(keys.columns), sort=False, dropna=False).ngroup().to_numpy()
    used = seed_column if seed_column and seed_column in table.columns else None
    if used is not None:
        raw = table[used]
        missing = raw.isna().to_numpy() | (raw.astype(str).str.strip() == "").to_numpy()
        run = np.where(missing, "row " + pd.Series(np.arange(len(table))).astype(str), "seed " + raw.astype(str))
    elif is_forked(table):
        parent = table[PARENT_COLUMN]
        present = (parent.notna() & (parent.astype(str).str.strip() != "")).to_numpy()
        run = np.where(present, "parent " + parent.astype(str), "row " + pd.Series(np.arange(len(table))).astype(str))
    elif "L" in table.columns:  # copies of one run: same point and loss
        run = "L " + pd.Series(_round_sig(table["L"].to_numpy(dtype=float))).astype(str).to_numpy()
    else:
        run = "row " + pd.Series(np.arange(len(table))).astype(str).to_numpy()
    frame = pd.DataFrame({"point": point, "run": np.asarray(run, dtype=str)})
    unit = frame.groupby(["point", "run"], sort=False).ngroup().to_numpy()
    duplicate = frame.duplicated(["point", "run"]).to_numpy()
    seeds = np.bincount(frame.drop_duplicates(["point", "run"])["point"].to_numpy(), minlength=point.max() + 1)
    return Replicates(point, unit, seeds, duplicate, used)


def _round_sig(x: np.ndarray, digits: int = 12) -> np.ndarray:
    """x rounded to `digits` significant digits (0 and non-finite values kept)."""
    x = np.asarray(x, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        mag = np.where((x != 0) & np.isfinite(x), np.floor(np.log10(np.abs(x))), 0.0)
    scale = 10.0 ** (digits - 1 - mag)
    return np.where(np.isfinite(x), np.round(x * scale) / scale, x)


def duplicate_lines(table: pd.DataFrame, reps: Replicates, limit: int = 5) -> list[str]:
    """One line per point where one seed appears more than once (a run counted twice), naming the rows."""
    out = []
    for u in np.unique(reps.unit[reps.duplicate])[:limit]:
        rows = np.flatnonzero(reps.unit == u)
        where = f"seed {table[reps.seed_column].iloc[rows[0]]}" if reps.seed_column else "the same loss"
        out.append(f"rows {', '.join(map(str, rows))} are one point with {where}: a run counted {len(rows)} times")
    return out


def seed_count_line(reps: Replicates) -> str:
    """'44 points: 40 with 3 seeds, 4 with 1 seed' (what collect prints)."""
    s = reps.summary()
    parts = [f"{n} with {k} seed{'s' if k != '1' else ''}" for k, n in sorted(s["seeds_per_point"].items(), key=_num)]
    return f"{s['n_points']} points: " + ", ".join(parts)


def _num(item):
    return int(item[0])


# ----------------------------------------------------------------------------------------------
# The seed sigma of log L
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SigmaModel:
    """A fitted seed-sigma model of log L (module docstring). kind: "constant", "log-linear in C",
    "log-linear in N" or "per r"; params: {"sigma"} / {"a", "b", "x_mean", "x_range"} / {"sigma_r": {r:
    sigma}, "sigma": pooled}; dof: pooled degrees of freedom."""

    kind: str
    params: dict[str, Any]
    dof: int
    loglik: float
    n_params: int

    @property
    def aicc(self) -> float:
        k, n = self.n_params, self.dof
        return -2 * self.loglik + 2 * k + (2 * k * (k + 1) / (n - k - 1) if n - k - 1 > 0 else np.inf)

    def sigma(self, covariates: dict[str, np.ndarray]) -> np.ndarray:
        """sigma of log L at points with these covariates ("log_C", "log_N", "r": arrays); a log-linear trend
        is not extrapolated: x is clipped to the range of the replicated points."""
        n = len(next(iter(covariates.values())))
        if self.kind == "constant":
            return np.full(n, self.params["sigma"])
        if self.kind == "per r":
            by_r = {float(k): v for k, v in self.params["sigma_r"].items()}
            return np.array([by_r.get(float(r), self.params["sigma"]) for r in covariates["r"]])
        lo, hi = self.params["x_range"]
        x = np.clip(covariates[self.params["covariate"]], lo, hi) - self.params["x_mean"]
        return np.exp(self.params["a"] + self.params["b"] * x)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "params": self.params,
            "dof": self.dof,
            "loglik": self.loglik,
            "n_params": self.n_params,
            "aicc": self.aicc,
        }


def covariates(table: pd.DataFrame) -> dict[str, np.ndarray]:
    """Per row: log of the compute budget (`budget_column`), log N (N_once + N_rec, or N) and r."""
    N = (table["N_once"] + table["N_rec"]) if "N_once" in table.columns else table["N"]
    r = table["r"].to_numpy(dtype=float) if "r" in table.columns else np.ones(len(table))
    return {"log_C": np.log(budget_column(table)), "log_N": np.log(N.to_numpy(dtype=float)), "r": r}


def within_point(log_L: np.ndarray, reps: Replicates) -> tuple[np.ndarray, np.ndarray]:
    """(SS_g, df_g) per point: the sum of squared deviations of its seeds' log L from their mean, and its seeds
    - 1. A seed's rows (a duplicate) count once, at their mean."""
    n_units = reps.unit.max() + 1
    unit_sum = np.bincount(reps.unit, weights=log_L, minlength=n_units)
    unit_n = np.bincount(reps.unit, minlength=n_units)
    unit_y = unit_sum / np.maximum(unit_n, 1)
    unit_point = np.zeros(n_units, dtype=int)
    unit_point[reps.unit] = reps.point
    point_mean = np.bincount(unit_point, weights=unit_y, minlength=reps.n_points) / np.maximum(reps.seeds, 1)
    ss = np.bincount(unit_point, weights=(unit_y - point_mean[unit_point]) ** 2, minlength=reps.n_points)
    return ss, reps.seeds - 1


def _loglik(ss: np.ndarray, df: np.ndarray, sigma: np.ndarray) -> float:
    """Gaussian log-likelihood of within-point deviations: sum -df log sigma - SS / (2 sigma^2) - df/2 log 2 pi."""
    return float(np.sum(-df * np.log(sigma) - ss / (2 * sigma**2) - 0.5 * df * np.log(2 * np.pi)))


def _log_linear(ss, df, x, covariate: str) -> SigmaModel | None:
    """log sigma_g = a + b (x_g - mean), maximum likelihood by Newton steps (the negative log-likelihood
    sum df (a + b x) + SS exp(-2 (a + b x)) / 2 is convex in (a, b)); None without MIN_TREND_VALUES x values."""
    keep = df > 0
    ss, df, x = ss[keep], df[keep], x[keep]
    if len(np.unique(np.round(x, 9))) < MIN_TREND_VALUES:
        return None
    x_mean = float(np.average(x, weights=df))
    xc = x - x_mean
    theta = np.array([0.5 * np.log(ss.sum() / df.sum()), 0.0])
    X = np.column_stack([np.ones_like(xc), xc])

    def nll(t):
        eta = X @ t
        return float(np.sum(df * eta + 0.5 * ss * np.exp(-2 * eta)))

    f = nll(theta)
    for _ in range(100):
        eta = X @ theta
        w = ss * np.exp(-2 * eta)
        g = X.T @ (df - w)
        H = (X.T * (2 * w)) @ X
        try:
            step = -np.linalg.solve(H + 1e-12 * np.eye(2), g)
        except np.linalg.LinAlgError:
            break
        t = 1.0
        while t > 1e-8 and not nll(theta + t * step) <= f:
            t /= 2
        if t <= 1e-8:
            break
        theta, f_new = theta + t * step, nll(theta + t * step)
        if f - f_new < 1e-14 * max(1.0, abs(f)):
            f = f_new
            break
        f = f_new
    a, b = (float(v) for v in theta)
    sigma = np.exp(a + b * xc)
    params = {"covariate": covariate, "a": a, "b": b, "x_mean": x_mean, "x_range": [float(x.min()), float(x.max())]}
    return SigmaModel(f"log-linear in {covariate[4:]}", params, int(df.sum()), _loglik(ss, df, sigma), 2)


def sigma_candidates(table: pd.DataFrame, reps: Replicates, log_L: np.ndarray | None = None) -> list[SigmaModel]:
    """Every sigma model the data support (constant first); [] without seed repeats or with identical
    replicate losses (no sigma to measure). log_L defaults to log of the table's L."""
    log_L = np.log(table["L"].to_numpy(dtype=float)) if log_L is None else np.asarray(log_L, dtype=float)
    ss, df = within_point(log_L, reps)
    if df.sum() <= 0 or ss.sum() <= 0:
        return []
    pooled = float(np.sqrt(ss.sum() / df.sum()))
    dof = int(df.sum())
    models = [SigmaModel("constant", {"sigma": pooled}, dof, _loglik(ss, df, np.full(len(ss), pooled)), 1)]
    cov = covariates(table)
    first = np.zeros(reps.n_points, dtype=int)
    first[reps.point[::-1]] = np.arange(len(reps.point))[::-1]  # a row of each point
    for name in ("log_C", "log_N"):
        model = _log_linear(ss, df, cov[name][first], name)
        if model is not None:
            models.append(model)
    r_pt = cov["r"][first]
    r_rep = np.unique(r_pt[df > 0])
    if len(r_rep) >= 2:
        sigma_r = {}
        for r in r_rep:
            on = (r_pt == r) & (df > 0)
            sigma_r[_r_key(r)] = float(np.sqrt(ss[on].sum() / df[on].sum())) if ss[on].sum() > 0 else pooled
        sig = np.array([sigma_r.get(_r_key(r), pooled) for r in r_pt])
        models.append(SigmaModel("per r", {"sigma_r": sigma_r, "sigma": pooled}, dof, _loglik(ss, df, sig), len(r_rep)))
    return models


def choose_sigma_model(models: list[SigmaModel]) -> SigmaModel:
    """The rule `SIGMA_RULE`: lowest AICc, the constant model unless another beats it by AICC_MARGIN."""
    constant = models[0]
    others = [m for m in models[1:] if np.isfinite(m.aicc) and m.aicc <= constant.aicc - AICC_MARGIN]
    return min(others, key=lambda m: m.aicc) if others else constant


def _r_key(r: float) -> str:
    return str(int(r)) if float(r).is_integer() else repr(float(r))


# ----------------------------------------------------------------------------------------------
# The noise model of a table: what fit_table uses and records
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class NoiseFit:
    """The seed noise of a table: its replicates, the chosen sigma model (None without seed repeats), every
    candidate, and sigma of log L per row (None: the fit is unweighted)."""

    reps: Replicates
    model: SigmaModel | None
    candidates: tuple[SigmaModel, ...]
    row_sigma: np.ndarray | None


def noise_fit(
    table: pd.DataFrame, seed_column: str | None = SEED_COLUMN, recipe_column: str | None = RECIPE_COLUMN
) -> NoiseFit:
    """Replicate groups, the sigma model chosen by `SIGMA_RULE` and sigma of log L per row of a canonical
    table. Without seed repeats (or with replicates whose losses are all equal) model and row_sigma are None."""
    reps = replicate_groups(table, seed_column, recipe_column)
    models = sigma_candidates(table, reps) if reps.has_repeats else []
    if not models:
        return NoiseFit(reps, None, (), None)
    model = choose_sigma_model(models)
    return NoiseFit(reps, model, tuple(models), model.sigma(covariates(table)))


def sigma_at(noise: dict[str, Any], table: pd.DataFrame) -> np.ndarray:
    """sigma of log L per row of any table (e.g. a planned design) from a fit record's `noise` block: its
    chosen model, evaluated at the rows' budget, N and r. InputError when the record measured no sigma."""
    chosen = (noise or {}).get("model")
    if not chosen:
        raise InputError("the fit measured no seed sigma (no seed repeats): give sigma explicitly")
    model = SigmaModel(chosen["kind"], chosen["params"], chosen["dof"], chosen["loglik"], chosen["n_params"])
    return model.sigma(covariates(table))


def per_r_summary(table: pd.DataFrame, nf: NoiseFit) -> dict[str, dict[str, Any]]:
    """Per r: points, replicated points, degrees of freedom, the pooled sigma of log L from that r's points
    alone (None without replicates), sigma_L in nats (sigma_log x mean L, first order) and the chosen model's
    mean sigma of log L over the r's rows."""
    log_L = np.log(table["L"].to_numpy(dtype=float))
    ss, df = within_point(log_L, nf.reps)
    r_row = covariates(table)["r"]
    r_pt = np.zeros(nf.reps.n_points)
    r_pt[nf.reps.point] = r_row
    out = {}
    for r in np.unique(r_row):
        on = r_pt == r
        dof = int(df[on].sum())
        s = float(np.sqrt(ss[on].sum() / dof)) if dof > 0 else None
        mean_L = float(table["L"].to_numpy(dtype=float)[r_row == r].mean())
        model_s = float(nf.row_sigma[r_row == r].mean()) if nf.row_sigma is not None else None
        out[_r_key(r)] = {
            "n_points": int(on.sum()),
            "n_replicated_points": int((df[on] > 0).sum()),
            "dof": dof,
            "sigma_log": s,
            "sigma_L_nats": None if s is None else s * mean_L,
            "model_sigma_log": model_s,
        }
    return out


def noise_block(table: pd.DataFrame, nf: NoiseFit, inner: str | None = None, weighted: bool = True) -> dict[str, Any]:
    """The fit record's `noise` block: replicates, the sigma model (kind, parameters, AICc of every candidate,
    the rule), sigma per r, how the fit and its bootstrap used it, and the statement when it is not measured.
    weighted: whether the fit's residuals were standardised by it (False: `--noise off`)."""
    block: dict[str, Any] = {"sigma_of": "log L", **nf.reps.summary()}
    if nf.model is None or not weighted:
        block.update(
            model=None,
            statement=NO_SEED_STATEMENT
            if nf.model is None
            else "noise model off (--noise off): the fit is unweighted and its intervals omit seed noise",
        )
        if nf.model is not None:
            block["sigma_log_measured"] = nf.model.sigma(covariates(table)).mean()
        return block
    sigma = nf.row_sigma
    block.update(
        model=nf.model.to_json(),
        candidates=[m.to_json() for m in nf.candidates],
        rule=SIGMA_RULE,
        sigma_log=float(np.sqrt(np.mean(sigma**2))),
        sigma_L_nats=float(np.sqrt(np.mean((sigma * table["L"].to_numpy(dtype=float)) ** 2))),
        per_r=per_r_summary(table, nf),
        weights=f"residuals standardised by the seed sigma of log L per row; Huber delta {STANDARDISED_DELTA} on z",
        bootstrap=None
        if inner is None
        else f"two-stage: outer clusters with replacement, each point's seeds {_INNER_TEXT[inner]}",
        statement=None,
    )
    return block


_INNER_TEXT = {"keep": "kept whole (Ren et al. 2010)", "resample": "resampled with replacement"}


# ----------------------------------------------------------------------------------------------
# Standardised residuals: the profile's likelihood scale
# ----------------------------------------------------------------------------------------------
def huber_moments(kind: str, delta: float) -> tuple[float, float]:
    """(E psi(z)^2, E psi'(z)) for z ~ N(0, 1): the Huber loss's (kind "huber", threshold delta) or 1, 1 (l2).
    Their ratio scales the likelihood-ratio threshold of standardised residuals (Schrader & Hettmansperger
    1980 with the scale known)."""
    if kind != "huber":
        return 1.0, 1.0
    c = float(delta)
    inside = 2 * norm.cdf(c) - 1
    e_psi2 = inside - 2 * c * norm.pdf(c) + 2 * c * c * norm.sf(c)
    return float(e_psi2), float(inside)


# ----------------------------------------------------------------------------------------------
# The two-stage bootstrap
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Hierarchy:
    """Two-stage resampling of a table's rows. unit_of_row: the run (seed) of each row, numbered so that the
    units of one group are consecutive; group_start, group_size: each group's first unit and its number of
    units (a group: one point's seeds inside one outer cluster); outer_of_group: each group's outer cluster;
    n_outer: outer clusters; inner: "resample" (seeds drawn with replacement within each drawn point) or
    "keep" (a drawn point brings all its seeds)."""

    unit_of_row: np.ndarray
    group_start: np.ndarray
    group_size: np.ndarray
    outer_of_group: np.ndarray
    n_outer: int
    inner: str = "keep"

    def weights(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """(size, n_rows) row weights: each replicate draws n_outer outer clusters with replacement; a group
        of a cluster drawn c times gets c x (its units) draws of its units, uniformly with replacement
        ("resample"), or each of its units c times ("keep"). A row's weight is its unit's count."""
        n_units = int(self.group_start[-1] + self.group_size[-1])
        out = np.empty((size, len(self.unit_of_row)))
        groups = np.arange(len(self.group_start))
        for i in range(size):
            c = np.bincount(rng.integers(0, self.n_outer, self.n_outer), minlength=self.n_outer)
            cg = c[self.outer_of_group]
            if self.inner == "keep":
                counts = np.repeat(cg, self.group_size).astype(float)
            else:
                rep = np.repeat(groups, cg * self.group_size)
                drawn = self.group_start[rep] + np.floor(rng.random(len(rep)) * self.group_size[rep]).astype(int)
                counts = np.bincount(drawn, minlength=n_units).astype(float)
            out[i] = counts[self.unit_of_row]
        return out


def hierarchy(
    table: pd.DataFrame, reps: Replicates, clusters: np.ndarray | None = None, inner: str = "keep"
) -> Hierarchy:
    """The two-stage bootstrap of a table with seed repeats. The unit resampled within a point is its seed's
    run; in a forked sweep the parent job (its branches share its stable phase and its seed), and the point
    is then the parent's model (r, N_once, N_rec, recipe), so a model's parents are its seeds. Outer clusters:
    `clusters` (a label per row, e.g. compute budgets) or the points themselves; a parent whose branches fall
    in several outer clusters is cut at their borders."""
    if inner not in INNER_MODES:
        raise InputError(f"inner resampling must be one of {INNER_MODES}; got {inner!r}")
    point = reps.point.astype(str)
    unit = reps.unit.astype(str)
    if is_forked(table):
        parent = table[PARENT_COLUMN]
        present = (parent.notna() & (parent.astype(str).str.strip() != "")).to_numpy()
        keys = point_keys(table).drop(columns=["D"])
        model = keys.groupby(list(keys.columns), sort=False, dropna=False).ngroup().to_numpy().astype(str)
        point = np.where(present, "model " + model, "point " + point)
        unit = np.where(present, "parent " + parent.astype(str).to_numpy(), "unit " + unit)
    outer = point if clusters is None else np.asarray(clusters).astype(str)
    frame = pd.DataFrame({"outer": outer, "group": point, "unit": unit})
    outer_id = frame.groupby("outer", sort=True).ngroup().to_numpy()
    group_id = frame.groupby(["outer", "group"], sort=True).ngroup().to_numpy()
    unit_id = frame.groupby(["outer", "group", "unit"], sort=True).ngroup().to_numpy()
    n_groups, n_units = group_id.max() + 1, unit_id.max() + 1
    group_of_unit = np.zeros(n_units, dtype=int)
    group_of_unit[unit_id] = group_id
    group_size = np.bincount(group_of_unit, minlength=n_groups)
    group_start = np.concatenate([[0], np.cumsum(group_size)[:-1]])
    outer_of_group = np.zeros(n_groups, dtype=int)
    outer_of_group[group_id] = outer_id
    return Hierarchy(unit_id, group_start, group_size, outer_of_group, int(outer_id.max() + 1), inner)
