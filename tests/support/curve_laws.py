"""What the curve laws' tests share: a law's analytic Jacobian against central finite differences, and a curves
table of runs held at their peak lr (where a curve law's schedule terms vanish)."""

from __future__ import annotations

import numpy as np
import pandas as pd


def assert_jacobian_exact(law, theta: np.ndarray, data, step: float = 1e-6) -> None:
    """d log L_hat / d theta from `law.log_predict_and_jac` equals (f(theta + h e_i) - f(theta - h e_i)) / 2h in
    every internal coordinate i (named in the failure)."""
    _, J = law.log_predict_and_jac(theta, data)
    for i in range(len(theta)):
        h = np.zeros_like(theta)
        h[i] = step
        fd = (law.log_predict(theta + h, data) - law.log_predict(theta - h, data)) / (2 * step)
        np.testing.assert_allclose(J[:, i], fd, rtol=1e-5, atol=1e-10, err_msg=law.internal_names[i])


def peak_lr_curves(grid: pd.DataFrame, batch_tokens: int, at=(0, 1, 5, 40, 200, 600)) -> pd.DataFrame:
    """Each run of `grid` (r, N_once, N_rec) evaluated at steps `at` of a run at its peak lr from step 1 to the
    last (lr 0 at step 0, 1 after): S1 = the tokens seen, S2 = 0 at every evaluation after step 0."""
    at = np.asarray(at)
    frames = [
        pd.DataFrame({"run": f"run{i}", **{c: run[c] for c in ("r", "N_once", "N_rec")}, "D": at[-1] * batch_tokens,
                      "step": at, "tokens": at * batch_tokens, "lr_multiplier": np.where(at > 0, 1.0, 0.0)})
        for i, run in grid.iterrows()
    ]  # fmt: skip
    return pd.concat(frames, ignore_index=True)
