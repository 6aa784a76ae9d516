"""One joint fit over several recipes: shared dense parameters, one phi per recipe, and delta-phi.

Recipes such as truncated backprop or hyper-connections change only the looped model: their r = 1
runs are the baseline's, and E, A, alpha, B, beta describe the same dense model. Fitting each recipe
alone re-estimates the dense part from the same r = 1 runs every time, and a delta-phi from two such
fits carries both fits' dense noise. The joint law (`loopscale.fit.laws.looped_joint`)

    L = E + A (N_once + r^phi_g N_rec)^-alpha + B D^-beta,   g = the run's recipe

fits them together: an r = 1 run appears once and belongs to every recipe (1^phi_g = 1). From it:

- delta-phi_g = phi_g - phi_ref with (a) a bootstrap that resamples runs once per replicate across
  recipes (a shared r = 1 run is drawn once, for all recipes at once), (b) a profile interval on
  delta-phi (the fit's internal coordinate dphi[g], ends by root-finding) and (c) a robust
  likelihood-ratio test of delta-phi = 0 with its p-value (`uncertainty.lr_test`);
- the same comparison from separate fits (each recipe with the r = 1 runs, `fit_result.compare_param`),
  reported next to it;
- a check that the recipes do share the dense model: the joint fit against the separate fits as a
  likelihood-ratio test on the same data (`shared_parameter_check`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from scipy.stats import chi2

from loopscale.errors import InputError
from loopscale.fit.laws.form import Law, LawData
from loopscale.fit.laws.looped_joint import RECIPE_CODE, LoopedJoint
from loopscale.fit.laws.looped_joint import recipe_phi as recipe_phi  # its home before the law registry
from loopscale.fit.laws.registry import law_data_from_table, make_law
from loopscale.fit.noise import DEFAULT_INNER, NoiseFit, noise_block, noise_setup, seed_hierarchy
from loopscale.fit.noise_scale import fit_on_its_scale, residual_tails, with_pilot_noise
from loopscale.fit.objective import Loss
from loopscale.fit.optimize import adopt_optimum, fit_law, refine
from loopscale.fit.record_blocks import DeltaPhi, FitData, Joint, Profile, SeparateFit, SharedCheck
from loopscale.fit.replicates import replicate_groups
from loopscale.fit.resample import bootstrap, on_one_blas_thread
from loopscale.fit.result import FitResult, compare_param, data_summary, versions
from loopscale.fit.runs_table import SEED_COLUMN, check_clusters, cluster_labels
from loopscale.fit.two_stage import Hierarchy
from loopscale.fit.uncertainty import lr_test, percentile_ci, profile_refit, profile_threshold
from loopscale.fit.verdict import joint_checks

LAW_INPUTS = ("N_once", "N_rec", "r", "D", "L")


@dataclass(frozen=True)
class SeedNoise:
    """What a joint fit's bootstraps need of the seed noise: the joint table's noise (`noise.NoiseFit`), each
    row's sigma (None: unweighted), the --cluster, the inner resampling and the seed column."""

    nf: NoiseFit
    sigma: np.ndarray | None
    cluster: str | None
    inner: str
    seed_column: str | None
    groups: np.ndarray | None = None  # the joint table's dependence groups (`noise.dependence_groups`)
    sigma_dof: int | None = None  # the degrees of freedom behind sigma's scale (`uncertainty.scale_to_scatter`)

    @property
    def weighted(self) -> bool:
        return self.sigma is not None

    def hierarchy(self, table: pd.DataFrame, labels) -> Hierarchy | None:
        """The two-stage bootstrap of `table` (the joint table or a recipe's part), None when unweighted."""
        if not self.weighted:
            return None
        reps = replicate_groups(table, self.seed_column, RECIPE_CODE)
        return seed_hierarchy(table, reps, self.cluster, labels, self.inner)

    def record(self, table: pd.DataFrame, n_bootstrap: int, noise: str, scale: dict | None, tails=None) -> dict:
        """The fit record's noise block (`noise.noise_block`), with the scale the fit used when weighted
        (`uncertainty.scale_to_scatter`)."""
        inner = self.inner if self.weighted and n_bootstrap > 0 else None
        return noise_block(table, self.nf, inner, noise != "off", scale, tails)


def joint_table(tables: Sequence[pd.DataFrame], column: str) -> tuple[pd.DataFrame, tuple[str, ...]]:
    """Several canonical runs tables -> one table with each run once, and the recipe names.

    The recipe of a looped run (r > 1) is its value in `column`; r = 1 runs are the shared dense
    runs whatever their label. A run found in several tables (the baseline's r = 1 runs repeat in
    every probe's table) is kept once: runs are the same when their law inputs (N_once, N_rec, r,
    D, L) are equal, and, for r > 1, their recipe too. Recipes are ordered by first appearance
    (the first is the reference, usually the baseline). Raises ValueError for a missing column,
    unlabelled looped runs, fewer than two recipes or no r = 1 runs.
    """
    parts = []
    for i, t in enumerate(tables):
        looped = t["r"].to_numpy(dtype=float) > 1
        if column not in t.columns:
            raise InputError(f"--joint column {column!r} is not in table {i + 1} {list(t.columns)}")
        if t.loc[looped, column].isna().any():
            raise InputError(
                f"--joint column {column!r} is empty on {int(t.loc[looped, column].isna().sum())} "
                f"looped (r > 1) rows of table {i + 1}"
            )
        parts.append(t)
    table = pd.concat(parts, ignore_index=True)
    looped = table["r"].to_numpy(dtype=float) > 1
    label = np.where(looped, table[column].astype(str), "")
    key = table[list(LAW_INPUTS)].astype(float).assign(_label=label)
    keep = ~key.duplicated().to_numpy()
    table, looped, label = table[keep].reset_index(drop=True), looped[keep], label[keep]
    recipes = tuple(dict.fromkeys(label[looped]))
    if len(recipes) < 2:
        raise InputError(
            f"a joint fit needs looped runs of two or more recipes in column {column!r}; found {list(recipes)}"
        )
    if not (~looped).any():
        raise InputError("a joint fit needs r = 1 runs (the dense runs the recipes share); none found")
    n_params = 5 + len(recipes)
    if len(table) < 2 * n_params:
        raise InputError(
            f"{len(table)} distinct runs is too few for a joint fit of {len(recipes)} recipes "
            f"with {n_params} parameters (need at least {2 * n_params})"
        )
    codes = {g: i for i, g in enumerate(recipes)}
    table[RECIPE_CODE] = [codes[g] if g else 0 for g in label]
    return table, recipes


def joint_data(table: pd.DataFrame, law: str = "looped-joint") -> LawData:
    """LawData of a `joint_table` with its recipe codes (the RECIPE_CODE column), for the per-recipe `law`."""
    return law_data_from_table(table, law)


def recipe_rows(table: pd.DataFrame, code: int) -> np.ndarray:
    """Rows of one recipe's separate fit: the shared r = 1 runs and the recipe's looped runs."""
    return (table["r"].to_numpy(dtype=float) == 1) | (table[RECIPE_CODE].to_numpy() == code)


def check_joint_inputs(table: pd.DataFrame, recipes: Sequence[str], n_bootstrap: int, cluster: str | None):
    """The joint fit's data-dependent preconditions, before the first solve: with a clustered bootstrap,
    the cluster labels of the joint table and of each recipe's separate fit (its runs and the shared r = 1
    runs), each with at least MIN_CLUSTERS clusters. Returns the joint table's labels (None: rows)."""
    if not n_bootstrap or cluster is None:
        return None
    labels = cluster_labels(table, cluster)
    check_clusters(labels, cluster)
    for i, g in enumerate(recipes):
        check_clusters(labels[recipe_rows(table, i)], cluster, f" in recipe {g}'s rows (its separate fit)")
    return labels


@on_one_blas_thread
def fit_joint(
    table: pd.DataFrame,
    column: str,
    recipes: Sequence[str],
    loss: Loss | None = None,
    seed: int = 0,
    n_bootstrap: int = 0,
    cluster: str | None = None,
    profile: bool = True,
    n_refine: int = 16,
    separate: bool = True,
    level: float = 0.95,
    jobs: int = 1,
    progress=None,
    law_name: str = "looped-joint",
    noise: str = "auto",
    seed_column: str | None = SEED_COLUMN,
    inner: str = DEFAULT_INNER,
    starts=None,
) -> FitResult:
    """Fit the per-recipe law `law_name` to a `joint_table` and attach delta-phi, the shared-parameter check and the
    conditioning checks (`loopscale.fit.verdict.joint_checks`).

    The result's params are E, A, alpha, B, beta and phi[<recipe>]; `result.joint` holds the recipes,
    delta_phi per non-reference recipe (estimate; bootstrap CI and se; profile interval; LR test of
    delta-phi = 0), the separate fits and their delta-phi comparison (with `separate`), and the
    shared-parameter check. A delta-phi profile below the fit moves the fit there first (`_profiles`).
    Bootstrap seeds are seed + 1 (joint) and seed + 2 + i (separate fit i); `jobs` worker processes and
    the `progress` stream as in `resample.bootstrap`. The separate fits use the law's `recipe_law`.
    Seeds, starts as in `fit_table.fit_table`; the separate fits use the joint sigma."""
    labels = check_joint_inputs(table, recipes, n_bootstrap, cluster)
    nf, data, loss = noise_setup(table, joint_data(table, law_name), loss or Loss(), noise, seed_column, RECIPE_CODE)
    law = make_law(law_name, recipes=recipes).with_data(data)  # what it holds of the joint table: looped-logn's N_ref
    result, state = fit_law(data, law, loss, seed, n_refine, starts)
    state, scale = fit_on_its_scale(result, state, nf.reps.point)  # sigma bounded below by the scatter about the law
    seeds = SeedNoise(nf, state.data.sigma, cluster, inner, seed_column, state.data.noise_group, state.data.sigma_dof)
    profiles, state = _profiles(result, state, recipes, profile)
    if n_bootstrap > 0:
        boot_args = (n_bootstrap, seed + 1, labels, cluster, level, jobs, progress, seeds.hierarchy(table, labels))
        _attach_bootstrap(result, state, recipes, *boot_args)
    deltas = {g: _delta_phi(result, state, recipes[0], g, profiles.get(g)) for g in recipes[1:]}
    joint = Joint(column, list(recipes), recipes[0], deltas, _rows_by_recipe(table, recipes))
    if separate:
        sep = separate_fits(
            table, recipes, loss, seed, n_bootstrap, cluster, n_refine, jobs, progress, law.separate_law(), seeds
        )
        joint = _with_separate(joint, sep, state, table, level, seed)
    result.joint = joint
    result.settings = result.settings.replace(
        n_bootstrap=n_bootstrap, cluster=cluster, law=law.name, joint_column=column
    )
    result.versions = versions()
    result.noise = seeds.record(table, n_bootstrap, noise, scale, residual_tails(state))
    result.noise = with_pilot_noise(result.noise, state, table, nf.row_sigma, nf.reps.point)
    result.conditioning = joint_checks(table, result, table[RECIPE_CODE].to_numpy())  # judged against the noise
    result.data = _joint_summary(table, recipes)
    return result


def _joint_summary(table: pd.DataFrame, recipes: Sequence[str]) -> FitData:
    """The models and ranges fitted, as a single fit records them (advise reads), and each recipe's shapes."""
    by_recipe = {g: data_summary(table[recipe_rows(table, i)]).shapes for i, g in enumerate(recipes)}
    return data_summary(table).replace(shapes_by_recipe=by_recipe)


def _with_separate(joint: Joint, sep: dict, state, table: pd.DataFrame, level: float, seed: int) -> Joint:
    """`joint` with the separate fits' summaries, their delta-phi beside each joint one, and the shared-parameter
    check."""
    deltas = {}
    for g, d in joint.delta_phi.items():
        cmp = compare_param(sep[joint.reference][0], sep[g][0], "phi", level, seed)
        deltas[g] = d.replace(
            separate={"delta": cmp.delta, "ci": cmp.ci, "se": cmp.se, "n_replicates": cmp.n_replicates}
        )
    separate = {g: _summary(f) for g, (f, _) in sep.items()}
    return joint.replace(delta_phi=deltas, separate=separate, shared_check=shared_parameter_check(state, table, sep))


def _profiles(result, state, recipes, profile: bool, max_passes: int = 3):
    """({recipe: its delta-phi profile}, state): each non-reference recipe's dphi profile (`profile_refit`);
    when one finds a lower objective the fit moves there (`adopt_optimum`, said in the warnings) and every
    profile is drawn again around the new optimum."""
    if not profile:
        return {}, state
    for _ in range(max_passes):
        out, any_moved = {}, False
        for g in recipes[1:]:
            out[g], moved = profile_refit(state, f"dphi[{g}]")
            if moved is not None:
                note = (
                    f"the delta-phi[{g}] profile found a lower objective than the multi-start "
                    f"({moved.objective:.8g} < {state.best.objective:.8g}): refitted from the profile's lowest point"
                )
                state, any_moved = adopt_optimum(result, state, moved, note), True
        if not any_moved:  # every profile drawn around the final optimum
            break
    else:  # the last pass still moved the optimum: profiles drawn before that move are around an older one
        result.warnings.append(
            f"delta-phi profiles: the optimum still moved on the last of {max_passes} passes; a profile drawn "
            "before that move is centred on an earlier optimum"
        )
    for g, prof in out.items():
        if "warning" in prof:
            result.warnings.append(f"delta-phi[{g}]: {prof['warning']}")
    return out, state


param = LoopedJoint.recipe_param  # phi[<recipe>], delta_phi[<recipe>]: the law's names


def _attach_bootstrap(
    result, state, recipes, n_bootstrap, seed, labels, cluster, level, jobs=1, progress=None, two_stage=None
):
    """The joint fit's bootstrap (seed `seed`; `two_stage`: over points and seeds, `noise.Hierarchy`, instead of
    the cluster `labels`), with delta_phi[g] = phi[g] - phi[reference] per replicate, and its percentile CIs."""
    labels = None if two_stage is not None else labels
    boot = bootstrap(
        state, n_bootstrap, seed, labels, jobs=jobs, progress=progress, label="joint fit", hierarchy=two_stage
    )
    boot["cluster"] = cluster
    cols = boot["params"]
    for g in recipes[1:]:
        phi_g, phi_ref = np.asarray(cols[param(g)]), np.asarray(cols[param(recipes[0])])
        cols[param(g, delta=True)] = (phi_g - phi_ref).tolist()
    result.bootstrap = boot
    result.ci95 = percentile_ci(cols, level)


def _delta_phi(result, state, ref: str, g: str, prof: Profile | None) -> DeltaPhi:
    """delta-phi of recipe g against the reference: estimate, bootstrap CI and se (when bootstrapped),
    profile interval (when profiled: `prof`) and the LR test of dphi = 0."""
    boot, profiled = {}, {}
    if result.bootstrap:
        reps = np.asarray(result.bootstrap.params[param(g, delta=True)])
        boot = {"bootstrap_ci": result.ci95[param(g, delta=True)], "se": float(np.std(reps, ddof=1))}
        boot["n_replicates"] = len(reps)
    if prof is not None:
        shown = {k: prof.get(k) for k in ("x", "objective", "threshold", "reference_dof", "groups")}
        profiled = {"profile_interval": prof["interval"], "profile": shown}
    estimate = result.params[param(g)] - result.params[param(ref)]
    return DeltaPhi(estimate, **boot, **profiled, lr_test=lr_test(state, f"dphi[{g}]", 0.0))


def _rows_by_recipe(table: pd.DataFrame, recipes: Sequence[str]) -> dict[str, int]:
    looped = table["r"].to_numpy(dtype=float) > 1
    out = {"shared r = 1": int((~looped).sum())}
    for i, g in enumerate(recipes):
        out[g] = int((looped & (table[RECIPE_CODE].to_numpy() == i)).sum())
    return out


def separate_fits(
    table: pd.DataFrame,
    recipes: Sequence[str],
    loss: Loss,
    seed: int = 0,
    n_bootstrap: int = 0,
    cluster: str | None = None,
    n_refine: int = 16,
    jobs: int = 1,
    progress=None,
    law: str | Law = "looped",
    seeds: SeedNoise | None = None,
):
    """{recipe: (FitResult, FitState)}: `law` (the joint law's `recipe_law`) fitted to each recipe with the r = 1
    runs; with `seeds` (a weighted joint fit) each on the joint table's seed sigma, bootstrapped in two stages."""
    out = {}
    for i, g in enumerate(recipes):
        rows = recipe_rows(table, i)
        part = table[rows].reset_index(drop=True)
        data = law_data_from_table(part, law)
        if seeds is not None and seeds.groups is not None:
            data = replace(data, noise_group=np.unique(seeds.groups[rows], return_inverse=True)[1])
        if seeds is not None and seeds.weighted:
            data = replace(data, sigma=seeds.sigma[rows], sigma_dof=seeds.sigma_dof)
        result, state = fit_law(data, law, loss, seed, n_refine)
        if n_bootstrap > 0:
            labels = None if cluster is None else cluster_labels(part, cluster)
            two_stage = None if seeds is None else seeds.hierarchy(part, labels)
            labels = None if two_stage is not None else labels
            boot = bootstrap(
                state,
                n_bootstrap,
                seed + 2 + i,
                labels,
                jobs=jobs,
                progress=progress,
                label=f"{g} alone",
                hierarchy=two_stage,
            )
            boot["cluster"] = cluster
            result.bootstrap, result.ci95 = boot, percentile_ci(boot["params"])
        out[g] = (result, state)
    return out


def _summary(result: FitResult) -> SeparateFit:
    r = result
    return SeparateFit(r.params, r.ci95, r.objective, r.n_rows, r.n_best_basin, r.n_refined, r.warnings)


def shared_parameter_check(state, table: pd.DataFrame, separate: dict) -> SharedCheck:
    """Do the recipes share E, A, alpha, B, beta? A robust likelihood-ratio test on the same data.

    The separate fits see the shared r = 1 runs once each, so the data both models are scored on
    is the recipes' tables stacked: each r = 1 run counted once per recipe (weight K), each looped
    run once. The joint law is refitted with those weights (restricted model: one dense part) and
    compared with the sum of the separate fits' objectives (unrestricted: one dense part per
    recipe, 5 (K - 1) more parameters). Statistic T = 2 Delta mean(psi') / mean(psi^2), psi at the
    separate fits' residuals, asymptotically chi-square with 5 (K - 1) degrees of freedom; a small
    p-value says the recipes do not share the dense model, and the joint delta-phi is then suspect.
    """
    law, data, loss = state.law, state.data, state.loss
    K = len(law.recipes)
    weights = np.where(data.r == 1, float(K), 1.0)
    # the second start: the reference's separate fit (its dense part and own parameters, kappa or psi) with every
    # recipe's separate phi, through the law's own coordinates
    phis = {law.recipe_param(g): fit.params["phi"] for g, (fit, _) in separate.items()}
    starts = [state.best.theta, law.from_user({**separate[law.recipes[0]][0].params, **phis})]
    restricted = min((refine(s, law, data, loss, weights) for s in starts), key=lambda r: r.objective)
    f_sep = float(sum(s.best.objective for _, s in separate.values()))
    psi2, dpsi, n = 0.0, 0.0, 0
    for _, s in separate.values():
        _, stats = profile_threshold(s)
        m = len(s.data)
        psi2, dpsi, n = psi2 + stats["mean_psi_sq"] * m, dpsi + stats["mean_psi_prime"] * m, n + m
    gap = max(0.0, restricted.objective - f_sep)
    T = 2 * gap * (dpsi / n) / (psi2 / n)
    df = 5 * (K - 1)
    method = (
        "robust LR (Schrader-Hettmansperger): joint law vs separate fits on the stacked recipe tables (r = 1 runs "
        "weighted by the number of recipes)"
    )
    return SharedCheck(restricted.objective, f_sep, float(T), df, float(chi2.sf(T, df)), method)
