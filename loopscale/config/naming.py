"""Run, sweep and point names: safe path components, grid-point labels, budget tags, and the OmegaConf
resolvers that compute them in the YAML under loopscale/conf/ (`${ls.point_flops:${point}}` etc.).
Importable from loopscale.config.schema too."""

from __future__ import annotations

import re
from typing import Any

from loopscale.errors import ConfigError

# Run, sweep and point names become path components under runs_dir: letters, digits and . _ , = + -,
# starting with a letter, digit or _, and no '..' (so no name can climb out of runs_dir or be absolute).
NAME_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.,=+-]{0,199}")


def check_name(field_name: str, value: Any) -> None:
    """ValueError unless `value` is a safe single path component (see NAME_PATTERN)."""
    if not isinstance(value, str) or not NAME_PATTERN.fullmatch(value) or ".." in value:
        raise ConfigError(
            f"{field_name}={value!r} is not a safe name: use 1-200 letters, digits and . _ , = + - "
            "(starting with a letter, digit or _), no '/' and no '..'"
        )


def _parse_point(point: str) -> dict[str, float]:
    """A sweep grid point label like 'C1e18-s10' (budget 1e18 FLOPs, paper size s=10) or 'C3e13-d128'
    (budget 3e13 FLOPs, d_model 128): one string per (budget, width) pair, so a Hydra sweep over points
    maps budgets to their own widths instead of taking a full cross product."""
    parts = dict((item[0], item[1:]) for item in str(point).split("-") if item)
    if "C" not in parts or not ({"s", "d"} & parts.keys()):
        raise ConfigError(
            f"point={point!r} must look like 'C1e18-s10' (budget, paper size) or 'C3e13-d128' (budget, d_model)"
        )
    out = {"C": float(parts["C"])}
    if "s" in parts:
        out["d_model"] = paper_width(int(parts["s"]))
    else:
        out["d_model"] = int(parts["d"])
    return out


def paper_width(size: int) -> int:
    """The published grid's width for size s: d = 64 * s rounded up to a multiple of 128."""
    return -(-64 * size // 128) * 128


def budget_tag(mode: str, compute_flops: Any, tokens: Any, tokens_per_param: Any) -> str:
    """Short, deterministic budget label for run names: C1e+18 -> 'C1e18', tokens -> 'D2e6', ratio -> 'R20'."""

    def short(x: Any) -> str:
        return f"{float(x):.3g}".replace("e+", "e").replace("e0", "e")

    if mode == "flops":
        return f"C{short(compute_flops)}"
    if mode == "tokens":
        return f"D{short(tokens)}"
    if mode == "forks":  # one job trains several budgets (loopscale/train/forks.py names each branch itself)
        return "forks"
    return f"R{short(tokens_per_param)}"


def seed_tag(seed: Any) -> str:
    """The run-name suffix of a seed: '' for seed 0 (run names from before seeds were named stay valid),
    '-seed<N>' otherwise, so runs that differ only in their seed never share a run dir."""
    return "" if int(seed) == 0 else f"-seed{int(seed)}"


def _safe_name(field_name: str, value: Any) -> str:
    check_name(field_name, str(value))
    return str(value)


def parse_fork_point(point: str) -> tuple[list[float], int]:
    """A forked grid point 'C2.5e11_5e11_1e12-d64' -> ([2.5e11, 5e11, 1e12] FLOPs, d_model 64): one model
    (width) and the budgets its branches stop at, '_'-separated (',' would split a Hydra sweep)."""
    parts = dict((item[0], item[1:]) for item in str(point).split("-") if item)
    try:
        budgets = [float(x) for x in parts["C"].split("_")]
        width = int(parts["d"])
    except (KeyError, ValueError):
        raise ConfigError(f"fork point {point!r} must look like 'C2.5e11_5e11_1e12-d64' (budgets, d_model)") from None
    return budgets, width


def recipe_label(model: Any) -> str:
    """`${ls.recipe:${model}}`: the recipe label the model node resolves to (model.recipe, or for recipe=auto
    the published recipe its fields describe, else a name made from them; loopscale/config/model.py)."""
    from omegaconf import OmegaConf

    from loopscale.config.model import ModelConfig

    fields = OmegaConf.to_container(model, resolve=True) if OmegaConf.is_config(model) else dict(model)
    try:
        return ModelConfig(**fields).recipe
    except (TypeError, ValueError):  # an invalid model: the run fails on it and records why, under this name
        return str(fields.get("recipe"))


def register_resolvers() -> None:
    """OmegaConf resolvers used by loopscale/conf/*.yaml (`${ls.point_flops:${point}}` etc.)."""
    from omegaconf import OmegaConf

    for name, fn in (
        ("ls.point_flops", lambda p: _parse_point(p)["C"]),
        ("ls.point_width", lambda p: _parse_point(p)["d_model"]),
        ("ls.budget_tag", budget_tag),
        ("ls.ceil_half", lambda r: -(-int(r) // 2)),
        ("ls.seed_tag", seed_tag),
        ("ls.recipe", recipe_label),
        ("ls.safe_name", _safe_name),
        ("ls.fork_flops", lambda p: parse_fork_point(p)[0]),  # sweeps/grid/cpu_wsd.yaml
        ("ls.fork_width", lambda p: parse_fork_point(p)[1]),
    ):
        if not OmegaConf.has_resolver(name):
            OmegaConf.register_new_resolver(name, fn)
