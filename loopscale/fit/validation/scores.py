"""How a fitted form is scored: held-out errors, its free parameters and information criteria.

AICc and BIC come from a Gaussian working likelihood of the log residuals at each form's optimum (the fits
minimise a Huber loss, which has no likelihood of its own; every form is scored on the same residuals, so
the differences compare the forms):

    AIC = n ln(RSS / n) + 2 k,   AICc = AIC + 2 k (k + 1) / (n - k - 1),   BIC = n ln(RSS / n) + k ln n

(Burnham & Anderson 2002; Hurvich & Tsai 1989), k the free parameters (a coordinate held by its box, such as
a pinned E, is not one).
"""

from __future__ import annotations

from typing import TypedDict

import numpy as np

from loopscale.fit.laws.form import Law


def free_params(law: Law) -> int:
    """The coordinates the fit moves: those whose box is not a single value."""
    return int(sum(lo < hi for lo, hi in law.bounds()))


class Information(TypedDict):
    """A fit's information criteria (`information`): rows n, free parameters k, the RSS of log L, AICc, BIC."""

    n: int
    k: int
    rss: float
    aicc: float | None  # None when n <= k + 1
    bic: float


def information(log_residuals: np.ndarray, k: int) -> Information:
    """The information criteria of residuals log L_hat - log L."""
    res = np.asarray(log_residuals, dtype=float)
    n = len(res)
    rss = float(res @ res)
    log_like = n * np.log(max(rss, 1e-300) / n)
    aicc = None if n <= k + 1 else float(log_like + 2 * k + 2 * k * (k + 1) / (n - k - 1))
    return Information(n=n, k=k, rss=rss, aicc=aicc, bic=float(log_like + k * np.log(n)))


def held_out_errors(predicted: np.ndarray, observed: np.ndarray) -> dict[str, float]:
    """Relative errors L_hat / L - 1 of held-out rows: mean |.|, worst |.|, mean (the bias) and the RMS of the
    log residuals (what `train_rms_log` is compared with)."""
    pred, obs = np.asarray(predicted, dtype=float), np.asarray(observed, dtype=float)
    rel = pred / obs - 1
    log_res = np.log(pred) - np.log(obs)
    return {
        "mean_abs_rel_error": float(np.mean(np.abs(rel))),
        "max_abs_rel_error": float(np.max(np.abs(rel))),
        "mean_rel_error": float(np.mean(rel)),
        "rms_log": float(np.sqrt(np.mean(log_res**2))),
    }
