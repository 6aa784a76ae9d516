"""A sweep design as the points of the law it will train, and the designs next to it (`loopscale power`).

`design_points(overrides)` expands a multirun exactly as `loopscale sweep` does (`launch.sweep.expand`) and
lists every point it trains with its exact accounting (`train.plan`): one row per run, or per cooldown branch of
a forked job (its `parent` is the job: branches share its stable phase, and a seed is a different parent), with
the columns of a runs table (r, N_once, N_rec, N_pass, N, D, C, F, C_budget, width, recipe, seed, parent). No
loss: the simulation draws it (`loopscale.fit.power`).

The candidate designs are the same multirun with one thing added, written as Hydra overrides so that their
points and costs come from the same expansion: seeds (`seed=0,1,...`), a budget above the largest (the grid's
own ratio between its two largest budgets) and a size above the largest (the grid's own last step), read from
the `point` sweep values. Two point forms are understood (`config.naming`): a forked job's
'C2.5e11_3.54e11-d16' (budgets of one width) and an independent run's 'C1e18-s10' / 'C3e13-d128' (one budget,
one size).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from loopscale.config.naming import parse_fork_point
from loopscale.config.schema import with_vocab
from loopscale.errors import ConfigError
from loopscale.launch.sweep import expand, sweep_overrides
from loopscale.train.job_plan import plan_job


def design_points(overrides: list[str]) -> pd.DataFrame:
    """One row per point the multirun trains (module docstring), in launch order."""
    rows = []
    for job in expand(overrides):
        cfg = with_vocab(job.cfg, job.cfg.data.vocab_size)
        plan = plan_job(cfg)
        common = {
            "r": cfg.model.r,
            "N_once": plan.run.N_once,
            "N_rec": plan.run.N_rec,
            "N_pass": plan.run.N_pass,
            "N": plan.run.N,
            "F": plan.run.F,
            "width": cfg.model.d_model,
            "recipe": cfg.model.recipe,
            "seed": cfg.seed,
        }
        for p in plan.points:
            point = {"D": float(p.D), "C": p.C, "C_budget": p.C_budget or p.C, "steps": p.steps, "parent": plan.parent}
            rows.append({**common, **point})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------------------------
# The grid's points, and one more budget or size
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Point:
    """A `point` sweep value: its budgets (FLOPs) and its size, as 's10' (paper size) or 'd128' (d_model)."""

    budgets: tuple[float, ...]
    size: str

    @property
    def size_value(self) -> int:
        return int(self.size[1:])

    def label(self) -> str:
        return "C" + "_".join(short_flops(b) for b in self.budgets) + f"-{self.size}"


def short_flops(x: float) -> str:
    """A budget as the grid files write it: 3.54e11, 1e18, 2.15e19."""
    return f"{float(x):.3g}".replace("e+", "e").replace("e0", "e")


def parse_point(text: str) -> Point:
    """'C2.5e11_3.54e11-d16' or 'C1e18-s10' -> Point (ConfigError for anything else)."""
    parts = dict((item[0], item[1:]) for item in str(text).split("-") if item)
    if "s" in parts and "C" in parts:
        return Point((float(parts["C"]),), f"s{int(parts['s'])}")
    budgets, width = parse_fork_point(text)
    return Point(tuple(budgets), f"d{width}")


def grid_points(overrides: list[str]) -> list[Point]:
    """The multirun's distinct `point` values, in order (ConfigError when it sweeps none)."""
    seen: dict[str, None] = {}
    for job in sweep_overrides(overrides):
        for o in job:
            if o.startswith("point="):
                seen[o.removeprefix("point=")] = None
    if not seen:
        raise ConfigError("the sweep has no `point` values: budgets and sizes cannot be added to it")
    return [parse_point(p) for p in seen]


def _step(values: list[float], ratio: bool) -> float:
    """The grid's last step: the ratio (or difference) of its two largest distinct values (x2 / +1 if one)."""
    v = sorted(set(values))
    if len(v) < 2:
        return 2.0 if ratio else 1.0
    return v[-1] / v[-2] if ratio else v[-1] - v[-2]


def with_budget(points: list[Point]) -> list[Point]:
    """The grid with one budget above its largest, at the grid's ratio: a forked point that reaches the largest
    budget gains a branch there; independent runs get the largest budget's sizes plus one size above them (the
    optimum moves to larger models as the budget grows)."""
    budgets = [b for p in points for b in p.budgets]
    top = max(budgets)
    new = float(short_flops(top * _step(budgets, ratio=True)))
    if _forked(points):
        return [Point((*p.budgets, new), p.size) if top in p.budgets else p for p in points]
    at_top = [p for p in points if top in p.budgets]
    sizes = sorted({p.size_value for p in at_top})
    kind = at_top[0].size[0]
    sizes.append(sizes[-1] + int(_step(sizes, ratio=False)))
    return [*points, *(Point((new,), f"{kind}{s}") for s in sizes)]


def with_size(points: list[Point]) -> list[Point]:
    """The grid with one size above its largest: a forked grid gains a width (the grid's last width step)
    with the largest width's budgets; independent runs gain, at every budget, one size above that budget's
    largest."""
    if _forked(points):
        widest = max(points, key=lambda p: p.size_value)
        step = int(_step([p.size_value for p in points], ratio=False))
        return [*points, Point(widest.budgets, f"{widest.size[0]}{widest.size_value + step}")]
    out = list(points)
    for budget in sorted({p.budgets[0] for p in points}):
        sizes = sorted(p.size_value for p in points if p.budgets[0] == budget)
        kind = next(p.size[0] for p in points if p.budgets[0] == budget)
        out.append(Point((budget,), f"{kind}{sizes[-1] + int(_step(sizes, ratio=False))}"))
    return out


def _forked(points: list[Point]) -> bool:
    """Whether the grid's points are forked jobs' (several budgets in one point): a grid of single-budget
    points is treated as independent runs."""
    return any(len(p.budgets) > 1 for p in points)


def point_override(points: list[Point]) -> str:
    return "point=" + ",".join(p.label() for p in points)


def seed_override(n_seeds: int) -> str:
    """seed=0,1,...,n-1: n runs of every point (Hydra's multirun over the top-level seed)."""
    return "seed=" + ",".join(str(s) for s in range(n_seeds))


def without(overrides: list[str], key: str) -> list[str]:
    """The overrides without any that set `key` (so a variant's own value replaces it)."""
    return [o for o in overrides if o.split("=", 1)[0].lstrip("+~") != key]


def n_seeds(overrides: list[str]) -> int:
    """Runs of every point the multirun trains: the values of its `seed` override (1 without one)."""
    values = {o.removeprefix("seed=") for job in sweep_overrides(overrides) for o in job if o.startswith("seed=")}
    return max(1, len(values))


def with_seeds(overrides: list[str], seeds: int) -> list[str]:
    """The multirun with `seeds` runs of every point (seed=0..seeds-1 replacing any seed override)."""
    return [*without(overrides, "seed"), seed_override(seeds)]


def candidate_designs(overrides: list[str]) -> list[tuple[str, list[str]]]:
    """The small menu `loopscale power` prices: (name, overrides) of the design as given, with twice and four
    times its seeds, with a budget more, a size more, and both (ConfigError from `grid_points` when the sweep
    has no points to extend: then seeds only)."""
    k = n_seeds(overrides)
    menu = [("as given", list(overrides)), (f"{2 * k} seeds", with_seeds(overrides, 2 * k))]
    menu.append((f"{4 * k} seeds", with_seeds(overrides, 4 * k)))
    try:
        points = grid_points(overrides)
    except ConfigError:
        return menu
    grids = {
        "+1 budget": with_budget(points),
        "+1 size": with_size(points),
        "+1 budget, +1 size": with_size(with_budget(points)),
    }
    return menu + [(name, [*without(overrides, "point"), point_override(grid)]) for name, grid in grids.items()]


def looped_overrides(overrides: list[str], r_values, extra: list[str] = ()) -> list[str]:
    """The multirun's looped jobs only (model.r = the r > 1 values), with `extra` overrides: the second recipe
    of a comparison trains these (it reuses the first recipe's r = 1 runs)."""
    looped = ",".join(str(int(r)) for r in sorted(set(r_values)) if r > 1)
    return [*without(overrides, "model.r"), f"model.r={looped}", *extra]
