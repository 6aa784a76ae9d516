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

What the curve is worth (`curve_worth_parts`): phi's precision from the final points of a design against from the
design's curves, both linearised at the pilot's law, with the noise above and the dependence the fits' intervals
use: a job is a cluster (a run of its own, or a forked job: its stable parent and every cooldown branch,
`_job_plans`), its evaluations one AR(1) path (the parent's stable evaluations once, each branch continuing from
its fork: `job_noise_cov`), and the curve fit fits a parent's shared evaluation once (`LoopedCurve.rows_to_fit`).
Two ratios: `variance` = V_finals / V_curves, the l2 sandwiches (V = (J^T J)^-1 (sum_g J_g^T Sigma_g J_g)
(J^T J)^-1); and `reported` = (w_finals / w_curves)^2, the squared ratio of the profile intervals as the fits
report them (`uncertainty._unweighted_threshold`): half-width^2 = q (J^T J)^-1_phi,phi x the pooled scale,
whose expectation under the noise is E sum_g (1_g' (I - H) e)^2 over the fit's divisor: for curves the same sum's
expectation under independent unit noise with q F(1, nu) (Satterthwaite), for final points n (G - p) / G with
q F(1, G - p). The two differ where few jobs make the references and divisors differ (the forked CPU demo: 16
jobs, nu ~11 for the curves, G - p = 9 for the final points); `power` reads the verdict's interval of simulated
final-point sweeps, so `curve_worth` is `reported`: the sweeps from curves are simulated as final-point sweeps
with each run's noise variance divided by it. A forked design's branches evaluated as separate wsd runs (the rule
before) overstated the demo's curves by 1.3x (docs/results.md, "power's curve discount on a forked design").
Why not the share alone, 1 / ((1 - share) + share / m) (Kish's effective sample size of a mean): a curve's early
evaluations sit at a small S1, where they tell B and beta more than phi, and the AR(1) makes m evaluations worth
fewer; on the published-grid design with 12.5 fitted evaluations a run the share alone promises 9.5 final points
where the linearised sandwich gives 5.5 and the simulated curve fits ~4.9 (docs/results.md, "power's curve
discount"). Where the noise is all run-level the curve is worth ~1 final point (0.9 here: the l2 curve fit weighs
the evaluations equally, not as generalised least squares would).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace

import numpy as np
import pandas as pd

from loopscale.errors import InputError
from loopscale.fit.cluster_se import independent_moments, noise_clusters, reference_quantile, residual_rho
from loopscale.fit.curves.synthetic import wsd_multipliers
from loopscale.fit.laws.registry import make_law
from loopscale.fit.record_blocks import CurveNoise as CurveNoiseBlock
from loopscale.fit.runs_table import PARENT_COLUMN, canonical_table

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
    parameters and the noise of its residuals along the curves; a pilot fitted with `--curve-sigma position` also
    its record's `noise.position_sigma` (`position`: the model, stage 1's loss, the noise of its standardised
    residuals): what `power` says weighing may add."""

    law: str
    params: Mapping[str, float]
    noise: CurveNoise
    position: Mapping | None = None

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


def _evaluations(eval_steps: Callable, steps: int, warmup: int, cooldown: int | None) -> list[int]:
    """The steps `eval_steps` picks for a run of `steps` (cooldown None: a stable parent, which has none)."""
    return sorted({int(s) for s in eval_steps(steps, warmup, cooldown) if s is not None and 1 <= s <= steps})


def _run_steps(run) -> int:
    """A design row's steps: its `steps` column, else NOMINAL_STEPS; at least 10."""
    return max(int(run["steps"]) if "steps" in run and np.isfinite(run["steps"]) else NOMINAL_STEPS, 10)


def _parents(design: pd.DataFrame) -> pd.Series:
    """Each row's stable parent as loopscale names it ('' for a run of its own): a seed other than 0 trains another
    parent (run names add -seed<N>, `naming.seed_tag`), so a design repeated per seed (`power --seeds` on a runs
    table) keeps each seed's parent, and the evaluations the curve fit keeps once per parent, apart."""
    if PARENT_COLUMN not in design:
        return pd.Series("", design.index)
    parent = design[PARENT_COLUMN].fillna("").astype(str)
    if "seed" not in design:
        return parent
    seed = design["seed"].fillna(0).astype(int)
    return parent.where((parent == "") | (seed == 0), parent + "-seed" + seed.astype(str))


def _job_plans(design: pd.DataFrame, eval_steps: Callable) -> list[dict]:
    """Per design row (a run, or a forked job's branch): its steps, warmup, the evaluations it holds and where each
    sits on its job's AR(1) path (module docstring). A run of its own: eval_steps(steps, 2% warmup, 20% cooldown),
    one path. A forked job (rows of one `parent` and seed, loopscale/train/forks.py): the warmup shared (2% of the
    shortest branch), branch i forks at s_i = steps_i - round(0.2 steps_i) from a stable parent of max_i s_i steps
    evaluated at eval_steps(max s_i, warmup, None) and its fork steps; the branch holds the parent's evaluations up
    to s_i (`from_parent`, the same draws in every branch) and its own after s_i, continuing the path from its
    last shared one."""
    jobs = noise_clusters(design)
    parent = _parents(design)
    steps = [_run_steps(run) for _, run in design.iterrows()]
    plans, chains = [], {}
    for i in range(len(design)):
        if parent.iloc[i] == "":
            warmup, cooldown = max(1, round(0.02 * steps[i])), steps[i] - round(0.2 * steps[i])
            at = _evaluations(eval_steps, steps[i], warmup, cooldown)
            depth = np.arange(len(at))
            plans.append(dict(steps=steps[i], warmup=warmup, at=at, shared=[False] * len(at), depth=depth, fork=depth))
            continue
        mates = np.flatnonzero(jobs == jobs[i])
        warmup = max(1, round(0.02 * min(steps[k] for k in mates)))
        forks = {k: steps[k] - round(0.2 * steps[k]) for k in mates}
        if jobs[i] not in chains:  # the stable parent's evaluations, once per job: its fork steps are corners
            top = max(forks.values())
            chains[jobs[i]] = sorted(set(_evaluations(eval_steps, top, warmup, None)) | set(forks.values()))
        chain = chains[jobs[i]]
        shared = [s for s in chain if s <= forks[i]]
        own = [s for s in _evaluations(eval_steps, steps[i], warmup, forks[i]) if s > forks[i]]
        k = len(shared) - 1  # the fork's value: the last shared evaluation (-1: none, a fresh path)
        depth = np.concatenate([np.arange(len(shared)), k + 1 + np.arange(len(own))]).astype(int)
        fork = np.concatenate([np.arange(len(shared)), np.full(len(own), k)]).astype(int)
        at = shared + own
        plans.append(dict(steps=steps[i], warmup=warmup, at=at, shared=[True] * len(shared) + [False] * len(own),
                          depth=depth, fork=fork))  # fmt: skip
    for plan, job in zip(plans, jobs):
        plan["job"] = int(job)
    return plans


def design_curves(design: pd.DataFrame, eval_steps: Callable, params: Mapping[str, float], law) -> pd.DataFrame:
    """The design's runs as loopscale trains them (wsd: 2% warmup, 20% cooldown to 0; a forked job's branches from
    its stable parent, `_job_plans`) evaluated at eval_steps(steps, warmup, cooldown_start), the curve law's loss at
    `params` (no noise): a curves table, with each row's job (`noise_clusters`), whether it is the parent's
    (`from_parent`) and its place on the job's AR(1) path (`eval_depth`, `fork_depth`). A run's steps: the
    design's `steps` column, else NOMINAL_STEPS."""
    frames = []
    design = design.reset_index(drop=True)
    parent = _parents(design)
    for i, plan in enumerate(_job_plans(design, eval_steps)):
        run, at = design.loc[i], np.array(plan["at"], dtype=int)
        frames.append(
            pd.DataFrame(
                {
                    "run": f"run{i}",
                    **{c: run[c] for c in ("r", "N_once", "N_rec")},
                    "D": float(run["D"]),
                    "step": at,
                    "tokens": at * float(run["D"]) / plan["steps"],
                    "lr_multiplier": wsd_multipliers(plan["steps"], plan["warmup"])[at],
                    PARENT_COLUMN: parent.iloc[i],
                    "from_parent": plan["shared"],
                    "job": plan["job"],
                    "eval_depth": plan["depth"],
                    "fork_depth": plan["fork"],
                }
            )
        )
    table = pd.concat(frames, ignore_index=True)
    return table.assign(L=type(law).predict_table(dict(params), table))


def job_noise_cov(rows: pd.DataFrame, noise: CurveNoise) -> np.ndarray:
    """(n, n) the log noise of rows of one job (`design_curves`): the offset s_run^2 everywhere plus s_eval^2
    rho^d, d the evaluations between two rows along the job's path: a shared (parent) row and its branches', or
    two rows of one path, |depth_a - depth_b|; rows of two branches meet where the earlier one forks
    (depth_a + depth_b - 2 min(fork_a, fork_b)); branches that share no evaluation meet nowhere (0)."""
    depth, fork = rows["eval_depth"].to_numpy(dtype=int), rows["fork_depth"].to_numpy(dtype=int)
    run, own = rows["run"].astype(str).to_numpy(), ~rows["from_parent"].astype(bool).to_numpy()
    own &= rows[PARENT_COLUMN].astype(str).to_numpy() != ""  # a run of its own is one path
    one_path = own[:, None] & own[None, :] & (run[:, None] == run[None, :])
    meet = np.where(one_path, np.minimum.outer(depth, depth), np.minimum.outer(fork, fork))
    dist = np.abs(depth[:, None] + depth[None, :] - 2 * meet)
    return noise.sigma_run_log**2 + noise.sigma_eval_log**2 * noise.rho**dist * (meet >= 0)


@dataclass(frozen=True)
class Worth:
    """What a curve is worth on a design, two ways (module docstring): `variance` = Var(phi_hat | final points) /
    Var(phi_hat | curves), the sandwiches clustered by job; `reported` = (E width finals / E width curves)^2 of the
    intervals as the fits report them (the profile's pooled scale and reference; what `power` reads), with the
    curves' Satterthwaite nu and the finals' G - p behind the two references."""

    variance: float
    reported: float
    curve_dof: float
    final_dof: float


def _phi_spread(
    J: np.ndarray, rows: pd.DataFrame, noise: CurveNoise, i: int, curves: bool
) -> tuple[float, float, float]:
    """(phi's sandwich variance, its squared profile half-width as the fit reports it / the common 1, the reference
    dof) of an l2 fit with Jacobian J on `rows` (one job per `job`) under the curve noise, linearised: the
    profile reads q (J^T J)^-1_phi,phi x the pooled scale, whose expectation under the noise is E sum_g (1'_g M e)^2
    (M = I - H) over the fit's divisor: for curves the same sum's expectation under independent unit noise with q
    F(1, nu) (`independent_moments`), for final points n (G - p) / G with q F(1, G - p)
    (`uncertainty._unweighted_threshold`)."""
    bread = np.linalg.pinv(J.T @ J)
    labels = np.unique(rows["job"].to_numpy(), return_inverse=True)[1]
    Z = np.eye(int(labels.max()) + 1)[labels]  # (n, G) the jobs
    MZ = Z - J @ (bread @ (J.T @ Z))
    meat, pooled = np.zeros_like(bread), 0.0
    for g in range(Z.shape[1]):
        on = labels == g
        cov = job_noise_cov(rows.loc[on], noise)
        meat += J[on].T @ cov @ J[on]
        pooled += float(np.sum(MZ[on] * (cov @ MZ[on])))  # E sum_h (1_h' M e)^2, the job's share of the noise
    n, p, G = J.shape[0], J.shape[1], Z.shape[1]
    if curves:
        independent, dof = independent_moments(J, bread, Z)
        scale = pooled / independent
    else:
        dof = max(1, G - p)
        scale = pooled * G / (n * dof)
    return float((bread @ meat @ bread)[i, i]), reference_quantile(dof) * scale * float(bread[i, i]), dof


def design_jacobian(design: pd.DataFrame, curve_params: Mapping[str, float], law_class, eval_steps: Callable):
    """(the curve law, the design's curves as fitted (`design_curves`, canonical), the law bound to their r, the
    Jacobian of log L in its coordinates at `curve_params`): what the curve fit is linearised with."""
    cls = law_class if isinstance(law_class, type) else type(make_law(law_class))
    law = cls.from_params(curve_params)  # holding what the pilot's law holds: looped-logn-curve's N_ref
    curves = canonical_table(design_curves(design, eval_steps, curve_params, law), cls.name)
    c_law = cls.bind(r=curves["r"].to_numpy(dtype=float)) if cls.per_r_multipliers else law
    _, J = c_law.log_predict_and_jac(c_law.from_user(dict(curve_params)), c_law.data_from_table(curves))
    return law, curves, c_law, J


def curve_worth_parts(
    design: pd.DataFrame, curve_params: Mapping[str, float], law_class, noise: CurveNoise, eval_steps: Callable
) -> Worth:
    """`Worth` of a run's curve to phi on this design (module docstring). law_class: the curve law (a registered
    one's name, or its class: a variant with its own lambda)."""
    law, curves, c_law, J = design_jacobian(design, curve_params, law_class, eval_steps)
    cls = type(law)
    v_curves, w_curves, nu = _phi_spread(J, curves, noise, c_law.internal_names.index("phi"), curves=True)
    finals = curves.loc[curves.groupby("run")["step"].idxmax()]
    final_params = law.final_point_params(dict(curve_params))
    # looped, looped-entry or looped-logn (at the curve law's N_ref, kept in final_params), as the curve law's final
    f_law = make_law(cls.final_law).from_params(final_params)
    theta_f = f_law.from_user({k: float(final_params[k]) for k in f_law.user_names})
    _, J_f = f_law.log_predict_and_jac(theta_f, f_law.data_from_table(finals))
    v_finals, w_finals, dof = _phi_spread(J_f, finals, noise, f_law.internal_names.index("phi"), curves=False)
    if not (v_curves > 0 and w_curves > 0):
        return Worth(float("nan"), float("nan"), float(nu), float(dof))
    return Worth(v_finals / v_curves, w_finals / w_curves, float(nu), float(dof))


def curve_worth(
    design: pd.DataFrame, curve_params: Mapping[str, float], law_class, noise: CurveNoise, eval_steps: Callable
) -> float:
    """n_eff: the final points a run's curve is worth to phi on this design as the two fits' intervals report it
    (`curve_worth_parts`' `reported`: what `power` divides a run's noise variance by), >= 0."""
    return curve_worth_parts(design, curve_params, law_class, noise, eval_steps).reported
