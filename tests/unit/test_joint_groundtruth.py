"""Joint delta-phi on synthetic ground truth shaped like the published baseline grid and the
truncated-backprop probe (`loopscale.fit.synthetic`), 20 fixed seeds (slow)."""

import numpy as np
import pytest

from loopscale.fit import synthetic as S
from loopscale.fit.joint import fit_joint, joint_table
from loopscale.fit.runs_table import canonical_table

SEEDS = range(20)
N_BOOTSTRAP = 200


def joint_fit_of(sweep, seed, n_bootstrap=N_BOOTSTRAP, profile=True):
    tables = [canonical_table(t, "looped") for t in S.recipe_tables(sweep).values()]
    table, recipes = joint_table(tables, "recipe")
    with np.errstate(all="ignore"):
        return fit_joint(table, "recipe", recipes, seed=seed, n_bootstrap=n_bootstrap, profile=profile)


@pytest.mark.slow
def test_joint_delta_phi_over_20_seeds_is_accurate_covered_and_narrower_than_separate_fits():
    truth = S.PUBLISHED_PHI["tbptt"] - S.PUBLISHED_PHI["baseline"]
    est, covered, covered_profile, widths, widths_profile, widths_sep = [], 0, 0, [], [], []
    for seed in SEEDS:
        d = joint_fit_of(S.recipe_sweep(seed=seed), seed).joint["delta_phi"]["tbptt"]
        est.append(d["estimate"])
        lo, hi = d["bootstrap_ci"]
        covered += lo <= truth <= hi
        plo, phi_ = d["profile_interval"]
        covered_profile += plo <= truth <= phi_
        widths.append(hi - lo)
        widths_profile.append(phi_ - plo)
        widths_sep.append(d["separate"]["ci"][1] - d["separate"]["ci"][0])
    err = np.array(est) - truth
    ratio = np.mean(widths) / np.mean(widths_sep)
    print(
        f"joint delta-phi: mean error {err.mean():+.4f}, RMS {np.sqrt(np.mean(err**2)):.4f}; "
        f"bootstrap CI covers {covered}/20, mean width {np.mean(widths):.4f}; profile CI covers "
        f"{covered_profile}/20, mean width {np.mean(widths_profile):.4f}; separate-fit CI mean width "
        f"{np.mean(widths_sep):.4f}; width ratio joint/separate {ratio:.3f}"
    )
    assert abs(err.mean()) <= 0.01
    assert covered >= 17
    assert covered_profile >= 17
    assert ratio <= 0.7
