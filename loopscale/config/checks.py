"""Field checks shared by the config dataclasses (config.py, model_config.py): each raises `ValueError`
naming the field and what it may be, so a bad sweep point fails at start, not an hour into training."""

from __future__ import annotations

import math
from typing import Any

from loopscale.errors import ConfigError


def check_choice(name: str, value: Any, allowed: tuple) -> None:
    if value not in allowed:
        raise ConfigError(f"{name}={value!r} is not allowed; choose one of {', '.join(map(repr, allowed))}")


def check_positive(name: str, value: Any) -> None:
    if value is None or not math.isfinite(value) or value <= 0:  # NaN <= 0 is False: test finiteness too
        raise ConfigError(f"{name}={value!r} must be a finite number > 0")


def check_finite(name: str, value: Any) -> None:
    if value is None or not math.isfinite(value):
        raise ConfigError(f"{name}={value!r} must be a finite number")
