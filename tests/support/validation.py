"""Hand-built pieces of `loopscale validate`'s record (loopscale/fit/validation/record.py) for the tests that read
it field by field: the flags (test_validation_folds_flags_exact.py) and the Markdown (test_validation_text_exact.py)."""

from __future__ import annotations


def held(mean_abs: float, bias: float, worst: float, rms: float) -> dict[str, float]:
    """A fold result's `held_out` block: the mean |relative error|, its signed mean (the bias), the worst
    |relative error| and the rms of the log error on the fold's test rows."""
    return {"mean_abs_rel_error": mean_abs, "mean_rel_error": bias, "max_abs_rel_error": worst, "rms_log": rms}


def held_out_fit(form: int, fold: int, params: dict, train_rms_log: float, held_out: dict) -> dict:
    """One FoldResult's fields: form `form` refitted without fold `fold`'s rows, its parameters, the rms log
    error on the rows it kept and `held_out` (held(...)) on the ones it did not."""
    return {"form": form, "fold": fold, "ok": True, "params": params, "train_rms_log": train_rms_log,
            "held_out": held_out}  # fmt: skip
