"""The analytic Hessian of every law (loopscale/fit/laws/lse.py, `Law.log_predict_jac_hess`) against central finite
differences of the analytic gradient: the joint and free laws' too, which the bootstrap's Newton polish
(loopscale/fit/resample.py) and the joint profiles now use."""

from __future__ import annotations

import numpy as np
import pytest

from loopscale.fit import synthetic as S
from loopscale.fit.joint import joint_data, joint_table
from loopscale.fit.laws.registry import law_data_from_table, make_law
from loopscale.fit.objective import Loss, objective_and_grad, objective_grad_hess
from loopscale.fit.runs_table import canonical_table

SWEEP = S.small_recipe_sweep(seed=0)


def _case(name: str):
    if name == "looped-joint":
        table, recipes = joint_table([canonical_table(SWEEP, "looped-joint")], "recipe")
        return make_law(name, recipes=recipes), joint_data(table), [0.4, 4.0, 0.25, 7.0, 0.4, 0.45, -0.1]
    data = law_data_from_table(canonical_table(SWEEP, "looped"), "looped")
    if name == "looped-free":
        return make_law(name, data.r), data, [0.4, 4.0, 0.25, 7.0, 0.4, 0.3, 0.6]
    return make_law(name), data, [0.4, 4.0, 0.25, 7.0, 0.4, 0.45]


@pytest.mark.parametrize("name", ["looped", "looped-joint", "looped-free"])
@pytest.mark.parametrize("kind", ["huber", "l2"])
def test_hessian_matches_finite_differences_of_the_gradient(name, kind):
    law, data, theta = _case(name)
    theta, loss = np.array(theta), Loss(kind)
    assert law.has_hessian
    _, _, H, _ = objective_grad_hess(theta, law, data, loss)
    eps = 1e-6
    steps = np.eye(len(theta)) * eps
    numeric = np.array(
        [
            (objective_and_grad(theta + s, law, data, loss)[1] - objective_and_grad(theta - s, law, data, loss)[1])
            / (2 * eps)
            for s in steps
        ]
    )
    assert np.max(np.abs(H - numeric)) <= 1e-6 * np.max(np.abs(H))
