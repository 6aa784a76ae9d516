"""Fitting a scaling law to a runs table: robust log-space objective, global multi-start, bootstrap,
profile, holdout (docs/design.md, "Fitting").

The method, one module per step:
- `loopscale.fit.objective`: sum_i w_i rho(log L_hat_i - log L_i), rho = Huber(delta = 1e-3) or 0.5 x^2
  (Hoffmann et al. 2022, eq. 10 fitted in log space; Besiroglu et al. 2024), with analytic gradients;
- `loopscale.fit.starts`: the classic grid and exponent-projected starts (the law is linear in (E, A, B)
  for fixed exponents), screened in one vectorised pass;
- `loopscale.fit.optimize`: the best starts refined (batched LM or exact Newton, then L-BFGS-B with tight
  tolerances); the lowest optimum wins and `n_best_basin` counts the refined starts that reached it;
- `loopscale.fit.uncertainty`: bootstrap (rows or clusters), profile intervals and likelihood-ratio tests,
  and the held-out largest budget;
- `loopscale.fit.result`: the record (`FitResult`, its JSON) and what reads it without the optimiser;
  `loopscale.fit.bounds`: the box the search stays in.

Here: `fit_table`, which runs them in order on one table. Every name this module held before the split is
still importable from it (`from loopscale import fit as F; F.bootstrap(...)`).
"""

from __future__ import annotations

import numpy as np

from loopscale.errors import InputError
from loopscale.fit.bounds import BOUNDS, DPHI_BOUNDS, LOG_K_BOUNDS, bounds_for
from loopscale.fit.objective import (
    CHUNK_ELEMENTS,
    DEFAULT_DELTA,
    Loss,
    batch_objective,
    chunk_size,
    objective,
    objective_and_grad,
    objective_grad_hess,
)
from loopscale.fit.optimize import (
    BASIN_ABS_TOL,
    BASIN_REL_TOL,
    EXPONENT_TOL,
    FINISH_RATIO,
    LBFGSB_OPTIONS,
    SMALL_BASIN_SHARE,
    FitState,
    Refined,
    fit_law,
    lm_batch,
    multistart,
    newton,
    refine,
    same_basin,
)
from loopscale.fit.result import FitResult, compare_param, data_summary, file_sha256, load_fit, predict_loss, versions
from loopscale.fit.starts import SCREEN_ROWS, classic_grid, projected_starts, screen_starts, screen_subsample
from loopscale.fit.tables import budget_clusters, budget_column, table_warnings
from loopscale.fit.uncertainty import (
    CHI2_1_95,
    bootstrap,
    holdout_largest,
    lr_test,
    percentile_ci,
    profile_param,
    profile_phi,
    profile_solve,
    profile_threshold,
    profile_value,
    profile_values,
)

__all__ = [
    "BASIN_ABS_TOL",
    "BASIN_REL_TOL",
    "BOUNDS",
    "CHI2_1_95",
    "CHUNK_ELEMENTS",
    "DEFAULT_DELTA",
    "DPHI_BOUNDS",
    "EXPONENT_TOL",
    "FINISH_RATIO",
    "LBFGSB_OPTIONS",
    "LOG_K_BOUNDS",
    "SCREEN_ROWS",
    "SMALL_BASIN_SHARE",
    "FitResult",
    "FitState",
    "Loss",
    "Refined",
    "batch_objective",
    "bootstrap",
    "bounds_for",
    "budget_clusters",
    "budget_column",
    "chunk_size",
    "classic_grid",
    "compare_param",
    "data_summary",
    "file_sha256",
    "fit_law",
    "fit_table",
    "holdout_largest",
    "lm_batch",
    "load_fit",
    "lr_test",
    "multistart",
    "newton",
    "objective",
    "objective_and_grad",
    "objective_grad_hess",
    "percentile_ci",
    "predict_loss",
    "profile_param",
    "profile_phi",
    "profile_solve",
    "profile_threshold",
    "profile_value",
    "profile_values",
    "projected_starts",
    "refine",
    "same_basin",
    "screen_starts",
    "screen_subsample",
    "versions",
]


def fit_table(
    table,
    law: str = "looped",
    loss: Loss | None = None,
    seed: int = 0,
    n_bootstrap: int = 0,
    cluster: str | None = None,
    holdout: bool = False,
    profile: bool | None = None,
    n_refine: int = 16,
) -> FitResult:
    """Fit a canonical runs table (see `loopscale.fit.tables`) and attach the uncertainty steps.

    cluster: None (resample rows), "C" (whole compute budgets, grouped by `budget_clusters`) or
    any other column (e.g. "width"). profile defaults to True for the looped law. The bootstrap
    uses seed + 1 and the holdout refit uses seed, so results are reproducible from `seed`.
    """
    from loopscale.fit.laws import law_data_from_table

    loss = loss or Loss()
    data = law_data_from_table(table, law)
    result, state = fit_law(data, law, loss, seed, n_refine)
    result.warnings.extend(table_warnings(table, law))  # repeated rows, impossible magnitudes
    if n_bootstrap > 0:
        labels = None
        if cluster is not None:
            if cluster not in table.columns:
                raise InputError(f"cluster column {cluster!r} is not in the table")
            labels = budget_clusters(budget_column(table)) if cluster == "C" else table[cluster].to_numpy()
            if len(np.unique(labels)) < 3:
                raise InputError(f"cluster column {cluster!r} has fewer than 3 distinct values")
        boot = bootstrap(state, n_bootstrap, seed=seed + 1, clusters=labels)
        boot["cluster"] = cluster
        result.bootstrap = boot
        result.ci95 = percentile_ci(boot["params"])
    if profile is None:
        profile = law == "looped"
    if profile and law == "looped":
        result.profile_phi = profile_phi(state)
        if "warning" in result.profile_phi:
            result.warnings.append(result.profile_phi["warning"])
    if holdout:
        result.holdout = holdout_largest(data, budget_column(table), law, loss, seed, n_refine)
    result.settings.update({"n_bootstrap": n_bootstrap, "cluster": cluster, "law": law, "holdout_largest": holdout})
    result.versions = versions()
    result.data = data_summary(table)
    return result
