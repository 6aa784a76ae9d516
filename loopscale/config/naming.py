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


def lr_tag(lr_scale: Any, lr_loop: Any = 1.0) -> str:
    """The run-name suffix of an lr grid's multiplier (optim.lr_scale): '' at 1 (every grid run keeps its name),
    '-lrx0.707' otherwise, so an lr-grid run never shares a run dir with the grid run it varies; then the loop's
    own lr (optim.lr_loop): '' at 1, '-lrloop0.5' otherwise."""
    scale, loop = float(lr_scale), float(lr_loop)
    return ("" if scale == 1.0 else f"-lrx{scale:.3g}") + ("" if loop == 1.0 else f"-lrloop{loop:.3g}")


def lr_rule_tag(lr_rule: Any) -> str:
    """The run-name suffix of a tuned lr rule's multiplier (optim.lr_rule, `loopscale tune`): '' at 1 (no rule),
    '-lrt1.93' otherwise, so a run trained at a retuned lr never takes an earlier rule's run dir (finished
    runs are skipped by their dir)."""
    rule = float(lr_rule)
    return "" if rule == 1.0 else f"-lrt{rule:.3g}"


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
