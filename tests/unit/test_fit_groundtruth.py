"""Ground-truth recovery of phi over 20 fixed seeds on the published-shaped grid (slow)."""

import numpy as np
import pytest

from loopscale.fit.fit_table import fit_table
from loopscale.fit.runs_table import canonical_table
from loopscale.fit.synthetic import TRUE_PARAMS, published_grid_table

SEEDS = range(100, 120)


@pytest.mark.slow
def test_phi_recovery_and_bootstrap_coverage_over_20_seeds():
    phi_true = TRUE_PARAMS["phi"]
    estimates, covered = [], 0
    for seed in SEEDS:
        table = canonical_table(published_grid_table(seed, noise=0.005), "looped")
        with np.errstate(all="ignore"):
            result = fit_table(table, "looped", seed=seed, n_bootstrap=200, profile=False)
        estimates.append(result.params["phi"])
        lo, hi = result.ci95["phi"]
        covered += lo <= phi_true <= hi
    err = np.array(estimates) - phi_true
    print(f"phi-hat mean error {err.mean():+.4f}, RMS {np.sqrt(np.mean(err**2)):.4f}, coverage {covered}/20")
    assert abs(err.mean()) <= 0.015
    assert np.sqrt(np.mean(err**2)) <= 0.045
    assert covered >= 17
