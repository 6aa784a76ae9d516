"""A fit record (`FitResult`) built by hand from a law's parameters, as `loopscale fit` would write it, with bootstrap
replicates, the model shapes it saw and other data blocks when given: what the advice tests feed `advise`."""

from __future__ import annotations

from loopscale.fit.result import FitResult


def fit_record(params, law="looped", replicates=None, shapes=None, data=None) -> FitResult:
    fit = FitResult(
        law=law,
        params=dict(params),
        objective=0.0,
        grad_norm=0.0,
        n_starts=1,
        n_refined=1,
        n_best_basin=1,
        settings={},
    )
    if replicates is not None:
        fit.bootstrap = {"params": {k: list(v) for k, v in replicates.items()}, "n_replicates": len(replicates["E"])}
    if shapes is not None or data is not None:
        fit.data = {"shapes": shapes or [], **(data or {})}
    return fit
