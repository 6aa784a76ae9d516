"""How many final points a run's loss curve is worth to phi (issue 55 item 3: curves count toward `power`'s MDE).

A curve is one draw with many looks. A curve-law pilot's residuals e_ij (run i, evaluation j in step order) are
read as a run-level offset shared by the whole curve plus an evaluation-level AR(1) series along it,

    e_ij = s_run u_i + s_eval w_ij,   w_ij = rho w_i,j-1 + sqrt(1 - rho^2) v_ij   (u, v independent, unit variance)

(`curve_noise`): the share of the noise independent between evaluations is s_eval^2 / (s_run^2 + s_eval^2).
Estimated by moments, as a one-way analysis of the residuals with AR(1) within a run: rho from the residuals'
lag-1 autocorrelation about each run's mean (`cluster_se.residual_rho`), corrected for the centring of short
series, E r1 ~ rho - (1 + 3 rho) / m (Marriott & Pope 1954); s_eval^2 from the deviations about each run's mean,
E sum_j (e_ij - e_i.)^2 = s_eval^2 (m - v(m, rho)) with v(m, rho) = 1 + 2 sum_k (1 - k / m) rho^k the AR(1)
variance factor of a mean of m; s_run^2 from the runs' means, E e_i.^2 = s_run^2 + s_eval^2 v / m, over G - p
(the fitted parameters take p of the G runs' degrees of freedom), at least 0.

What the curve is worth (`curve_worth`): phi's variance from the final points of a design over its variance from
the design's curves, both linearised at the pilot's law (the l2 fit's sandwich: V = (J^T J)^-1 (sum_g J_g^T
Sigma_g J_g) (J^T J)^-1, Sigma_g the noise above along run g's evaluations; a final point's noise s_run^2 +
s_eval^2). n_eff = V_finals / V_curves is the number of final points a run's curve is worth; the design's sweeps
from curves are then simulated as final-point sweeps with each run's noise variance divided by n_eff
(`power`). Why not the share alone, 1 / ((1 - share) + share / m) (Kish's effective sample size of a mean): a
curve's early evaluations sit at a small S1, where they tell B and beta more than phi, and the AR(1) makes m
evaluations worth fewer; on the published-grid design with 12.5 fitted evaluations a run the share alone
promises 9.5 final points where the linearised sandwich gives 5.5 and the simulated curve fits ~4.9 (docs/
results.md, "power's curve discount"). Where the noise is all run-level the curve is worth ~1 final point
(0.9 here: the l2 curve fit weighs the evaluations equally, not as generalised least squares would).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace

import numpy as np
import pandas as pd

from loopscale.errors import InputError
from loopscale.fit.cluster_se import residual_rho
from loopscale.fit.curves.synthetic import wsd_multipliers
from loopscale.fit.laws.registry import make_law
from loopscale.fit.record_blocks import CurveNoise as CurveNoiseBlock
from loopscale.fit.runs_table import canonical_table

RHO_MAX = 0.95  # an AR(1) this persistent is a run-level offset; beyond it the moments cannot tell them apart
NOMINAL_STEPS = 1000  # a design without a `steps` column: each run evaluated as if it trained this many steps


@dataclass(frozen=True)
class CurveNoise:
    """A curve-law fit's residuals split into a run-level offset (sigma_run_log) and an AR(1) series along the
    curve (sigma_eval_log, rho), in log L; from n_runs runs of evaluations_per_run fitted evaluations (mean)."""

    sigma_run_log: float
    sigma_eval_log: float
    rho: float
    n_runs: int
    evaluations_per_run: float

    @property
    def share(self) -> float:
        """The share of a run's noise variance that is independent between its evaluations."""
        total = self.sigma_run_log**2 + self.sigma_eval_log**2
        return float(self.sigma_eval_log**2 / total) if total > 0 else 0.0

    def to_json(self) -> CurveNoiseBlock:
        return CurveNoiseBlock(**asdict(self), eval_share=self.share)

    @classmethod
    def from_json(cls, block: Mapping) -> CurveNoise:
        return cls(**{k: block[k] for k in cls.__dataclass_fields__})


@dataclass(frozen=True)
class CurvePilot:
    """What a curve-law pilot fit tells `power` of its curves: the law (its registered name and lambda), its
    parameters and the noise of its residuals along the curves."""

    law: str
    params: Mapping[str, float]
    noise: CurveNoise

    def law_class(self) -> type:
        """The curve law with the pilot's lambda (a variant, as the fit's `lambda` parameter records it)."""
        cls = type(make_law(self.law))
        decay = float(self.params.get("lambda", cls.decay))
        return cls if decay == cls.decay else type(f"{cls.__name__}_{decay:g}", (cls,), {"decay": decay})

    def with_share(self, share: float) -> CurvePilot:
        """The same total noise per evaluation split with `share` of it independent between evaluations."""
        total = self.noise.sigma_run_log**2 + self.noise.sigma_eval_log**2
        noise = replace(
            self.noise, sigma_run_log=float(np.sqrt((1 - share) * total)), sigma_eval_log=float(np.sqrt(share * total))
        )
        return replace(self, noise=noise)


def check_curve_options(curve_share: float | None, curve_points: int, curves: bool) -> None:
    """`power --curve-share S --curve-points M`: refused in one line where they cannot apply (curves False: no
    curve-law pilot, or --finals) or are out of range."""
    if curve_share is not None and not curves:
        raise InputError(
            "--curve-share needs a looped-curve pilot fit (`loopscale fit runs_curves.csv --law looped-curve`) and "
            "no --finals"
        )
    if curve_share is not None and not 0 <= curve_share <= 1:
        raise InputError(f"--curve-share {curve_share}: a share of the noise, in [0, 1]")
    if curve_points < 2:
        raise InputError(f"--curve-points {curve_points}: a curve needs at least 2 evaluations")


def with_curve_noise(noise, state, table):
    """The fit record's noise block with its curve noise (`curve_noise`) where the law reads loss curves and the
    table names each evaluation's run and step: what `power` reads to count a curve toward the MDE."""
    if not (state.law.reads_curves and "run" in table.columns and "step" in table.columns):
        return noise
    res = state.law.log_predict(state.best.theta, state.data) - state.data.log_L
    found = curve_noise(res, table["run"], table["step"], state.law.n_params)
    return noise if found is None else noise.replace(curve=found.to_json())


def ar1_mean_factor(m: int, rho: float) -> float:
    """v(m, rho) = m Var(mean of m AR(1) values) / sigma^2 = 1 + 2 sum_{k<m} (1 - k / m) rho^k."""
    k = np.arange(1, max(int(m), 1))
    return float(1 + 2 * np.sum((1 - k / m) * rho**k))


def curve_noise(residuals: np.ndarray, runs, steps, n_params: int) -> CurveNoise | None:
    """The run-level and evaluation-level noise of a curve fit's log residuals (module docstring); None with
    fewer than n_params + 2 runs of two evaluations or more (nothing to split)."""
    res = np.asarray(residuals, dtype=float)
    labels = np.unique(np.asarray(runs).astype(str), return_inverse=True)[1]
    m = np.bincount(labels)
    many = m[labels] >= 2
    if int((m >= 2).sum()) < n_params + 2:
        return None
    res, labels, order = res[many], labels[many], np.asarray(steps)[many]
    labels = np.unique(labels, return_inverse=True)[1]
    m = np.bincount(labels)
    G, m_bar = len(m), float(m.mean())
    r1 = residual_rho(res, labels, order)
    rho = float(np.clip((r1 + 1 / m_bar) / (1 - 3 / m_bar), 0.0, RHO_MAX)) if m_bar > 3 and np.isfinite(r1) else 0.0
    v = np.array([ar1_mean_factor(k, rho) for k in m])
    means = np.bincount(labels, weights=res) / m
    within = float(np.sum((res - means[labels]) ** 2))
    s_eval2 = within / max(float(np.sum(m - v)), 1e-12)
    s_run2 = max(0.0, float(np.sum(means**2)) / max(G - n_params, 1) - s_eval2 * float(np.mean(v / m)))
    return CurveNoise(float(np.sqrt(s_run2)), float(np.sqrt(s_eval2)), rho, G, m_bar)


def design_curves(design: pd.DataFrame, eval_steps: Callable, params: Mapping[str, float], law) -> pd.DataFrame:
    """The design's runs as loopscale trains them (wsd: 2% warmup, 20% cooldown to 0) evaluated at
    eval_steps(steps, warmup, cooldown_start), the curve law's loss at `params` (no noise): a curves table. A run's
    steps: the design's `steps` column, else NOMINAL_STEPS."""
    frames = []
    for i, run in design.reset_index(drop=True).iterrows():
        steps = int(run["steps"]) if "steps" in run and np.isfinite(run["steps"]) else NOMINAL_STEPS
        steps = max(steps, 10)
        warmup, cooldown = max(1, round(0.02 * steps)), steps - round(0.2 * steps)
        at = np.array(eval_steps(steps, warmup, cooldown), dtype=int)
        frames.append(
            pd.DataFrame(
                {
                    "run": f"run{i}",
                    **{c: run[c] for c in ("r", "N_once", "N_rec")},
                    "D": float(run["D"]),
                    "step": at,
                    "tokens": at * float(run["D"]) / steps,
                    "lr_multiplier": wsd_multipliers(steps, warmup)[at],
                }
            )
        )
    table = pd.concat(frames, ignore_index=True)
    return table.assign(L=type(law).predict_table(dict(params), table))


def curve_worth(
    design: pd.DataFrame, curve_params: Mapping[str, float], law_class, noise: CurveNoise, eval_steps: Callable
) -> float:
    """n_eff: the final points a run's curve is worth to phi on this design (module docstring), >= 0. law_class:
    the curve law (a registered one's name, or its class: a variant with its own lambda)."""
    cls = law_class if isinstance(law_class, type) else type(make_law(law_class))
    law = cls()
    curves = canonical_table(design_curves(design, eval_steps, curve_params, law), cls.name)
    c_law = cls.bind(r=curves["r"].to_numpy(dtype=float))
    _, J = c_law.log_predict_and_jac(c_law.from_user(dict(curve_params)), c_law.data_from_table(curves))
    bread = np.linalg.pinv(J.T @ J)
    meat = np.zeros_like(bread)
    runs = curves["run"].astype(str).to_numpy()
    for g in np.unique(runs):
        rows = np.flatnonzero(runs == g)
        rows = rows[np.argsort(curves["step"].to_numpy()[rows], kind="stable")]
        k = np.arange(len(rows))
        sigma = noise.sigma_run_log**2 + noise.sigma_eval_log**2 * noise.rho ** np.abs(k[:, None] - k[None, :])
        meat += J[rows].T @ sigma @ J[rows]
    i = c_law.internal_names.index("phi")
    v_curves = float((bread @ meat @ bread)[i, i])
    finals = curves.loc[curves.groupby("run")["step"].idxmax()]
    f_law = make_law(cls.final_law, finals["r"].to_numpy(dtype=float))  # looped; looped-entry for its curve law
    final_params = law.final_point_params(dict(curve_params))
    theta_f = f_law.from_user({k: float(final_params[k]) for k in f_law.user_names})
    _, J_f = f_law.log_predict_and_jac(theta_f, f_law.data_from_table(finals))
    i_f = f_law.internal_names.index("phi")
    v_finals = float(np.linalg.pinv(J_f.T @ J_f)[i_f, i_f]) * (noise.sigma_run_log**2 + noise.sigma_eval_log**2)
    return v_finals / v_curves if v_curves > 0 else float("nan")
