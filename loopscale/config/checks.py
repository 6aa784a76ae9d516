"""Field checks shared by the config dataclasses (config.py, model_config.py): each raises `ValueError`
naming the field and what it may be, so a bad sweep point fails at start, not an hour into training."""

from __future__ import annotations

import math
from typing import Any

from loopscale.errors import ConfigError, not_one_of


def check_choice(name: str, value: Any, allowed: tuple) -> None:
    """`value` is one of `allowed`; else a ConfigError naming them and the closest (errors.not_one_of)."""
    if value not in allowed:
        raise not_one_of(name, value, allowed)


def check_positive(name: str, value: Any) -> None:
    if value is None or not math.isfinite(value) or value <= 0:  # NaN <= 0 is False: test finiteness too
        raise ConfigError(f"{name}={value!r} must be a finite number > 0")


def check_finite(name: str, value: Any) -> None:
    if value is None or not math.isfinite(value):
        raise ConfigError(f"{name}={value!r} must be a finite number")


def check_r_eval(value: Any, name: str = "r_eval"):
    """trainer.r_eval (or trainer.curve_r_eval: `name`): "auto", "off" (also None, false, an empty list: none) or
    whole numbers >= 1 (a list, or one number), returned as "auto", "off" or a sorted list without repeats;
    ConfigError otherwise."""
    if value is None or value is False or (isinstance(value, str) and value.lower() in ("off", "none", "false")):
        return "off"
    if isinstance(value, str) and value.lower() == "auto":
        return "auto"
    items = [value] if isinstance(value, (int, float, str)) else list(value) if hasattr(value, "__iter__") else None
    try:
        numbers = [float(v) for v in items]
    except (TypeError, ValueError):
        numbers = None
    if numbers is None or any(not (math.isfinite(v) and v >= 1 and v == int(v)) for v in numbers):
        raise ConfigError(f"{name}={value!r} must be auto, off, or whole numbers >= 1 (e.g. [1,2,4,8])")
    return sorted({int(v) for v in numbers}) or "off"


def r_eval_values(spec, r: int) -> list[int]:
    """The passes a model trained at r is scored at: auto = {1, 2, r/2, r, 2r, 4r} (r/2 rounded down, each at
    least 1, each once, sorted), a list as given (check_r_eval sorted it), off: none."""
    if spec == "off":
        return []
    if spec == "auto":
        return sorted({max(1, v) for v in (1, 2, r // 2, r, 2 * r, 4 * r)})
    return sorted({int(v) for v in spec})


R_SAMPLINGS = ("fixed", "poisson-lognormal", "uniform")


def check_r_sampling(cfg) -> None:
    """A ModelConfig's variable-depth fields (model/r_sampling.py): the scheme, per step or sequence, sigma > 0,
    uniform's r_set (whole numbers >= 1, normalised to a sorted list), r_max >= r, the gradient rule."""
    check_choice("r_sampling", cfg.r_sampling, R_SAMPLINGS)
    check_choice("r_sampling_per", cfg.r_sampling_per, ("step", "sequence"))
    check_choice("r_grad", cfg.r_grad, ("bptt", "half"))
    if not (math.isfinite(cfg.r_sigma) and cfg.r_sigma > 0):
        raise ConfigError(f"r_sigma={cfg.r_sigma!r} must be > 0")
    if cfg.r_sampling == "uniform":
        values = [] if cfg.r_set is None else list(cfg.r_set)
        if not values or any(not (float(v) == int(v) and int(v) >= 1) for v in values):
            raise ConfigError(f"r_sampling=uniform needs r_set, whole numbers >= 1 (e.g. [2,4,6]); got {cfg.r_set!r}")
        cfg.r_set = sorted({int(v) for v in values})
    if cfg.r_max is not None and cfg.r_max < cfg.r:
        raise ConfigError(f"r_max={cfg.r_max!r} must be >= r={cfg.r}")
    if cfg.r_sampling != "fixed" and cfg.r == 1 and cfg.r_sampling != "uniform":
        raise ConfigError("r_sampling=poisson-lognormal needs r > 1 (r is the mean of lambda)")
