"""A small learning-rate grid beside a sweep (issue 39, the lr confound): extra jobs at the smallest compute
budget, one width, every r (and every recipe or any other swept value), at lr multipliers around the
transferred lr.

If the best lr moves with r, a shared lr under-trains some r and phi absorbs the tuning error (Porian et al.
2024 explain most of the Kaplan / Chinchilla gap by such tuning; the published study swept lr at r = 1 and 4
only). `loopscale validate` reads these runs (loopscale/fit/validation/lr_confound.py): the best lr per r, and
phi refitted at each r's best lr.

The multipliers are step^k for k = -(n-1)/2 .. (n-1)/2 (5 points, step sqrt 2: 0.5 .. 2); the multiplier 1 is
the grid's own run at that budget and width, so only the others are new jobs (optim.lr_scale=m, run names
ending in `-lrx<m>`, `naming.lr_tag`). A forked grid point ('C2.5e11_3.54e11-d24') becomes one job at its
smallest budget ('C2.5e11-d24'): its branch there is the grid's branch, the same warmup (the shortest branch's)
and the same stable phase up to that branch's cooldown. The width: `width` if given, else the middle of the
widths the grid trains at the smallest budget (the lower one of two middles).

Used by the sweeper of hydra/sweeper=lr_grid (hydra_plugins/loopscale_sweeper.py) and by `loopscale sweep`
(launch/sweep.py), so the dry run lists exactly the jobs the launch starts.
"""

from __future__ import annotations

from dataclasses import dataclass

from loopscale.errors import ConfigError

POINT_KEY = "point"
LR_SCALE_KEY = "optim.lr_scale"


@dataclass(frozen=True)
class LrGrid:
    """points: odd, >= 3 (the grid's own run is the middle one); step: the ratio of neighbouring lrs (> 1);
    width: the d_model (or paper size s, for 's' points) to vary, None for the middle width."""

    points: int = 5
    step: float = 2**0.5
    width: int | None = None

    def __post_init__(self) -> None:
        if not (isinstance(self.points, int) and self.points >= 3 and self.points % 2 == 1):
            raise ConfigError(
                f"lr_grid.points={self.points!r} must be an odd integer >= 3 (the grid's run is the middle)"
            )
        if not (float(self.step) > 1.0):
            raise ConfigError(f"lr_grid.step={self.step!r} must be > 1 (the ratio of neighbouring learning rates)")

    def multipliers(self) -> list[float]:
        """The lr multipliers, smallest first; the middle one is 1."""
        half = (self.points - 1) // 2
        return [float(f"{float(self.step) ** k:.12g}") for k in range(-half, half + 1)]  # 0.5, not 0.49999999999999994


def split_point(point: str) -> tuple[list[str], list[str]]:
    """'C2.5e11_3.54e11-d24' -> (['2.5e11', '3.54e11'], ['d24']): the budget tokens as written and the point's
    other parts. ConfigError for a point without a C part."""
    parts = [p for p in str(point).split("-") if p]
    budgets = [p[1:] for p in parts if p.startswith("C")]
    if len(budgets) != 1 or not budgets[0]:
        raise ConfigError(f"the lr grid reads the budget of each grid point ('C<budget>...-d<width>'); got {point!r}")
    try:
        [float(b) for b in budgets[0].split("_")]
    except ValueError:
        raise ConfigError(f"point {point!r}: its budgets are not numbers") from None
    return budgets[0].split("_"), [p for p in parts if not p.startswith("C")]


def _width(others: list[str]) -> int:
    """The d_model (or paper size) of a point's other parts, for choosing and ordering widths."""
    for part in others:
        if part[:1] in ("d", "s") and part[1:].isdigit():
            return int(part[1:])
    raise ConfigError(f"the lr grid needs a width ('-d<width>' or '-s<size>') in every grid point; got {others}")


def lr_grid_jobs(jobs: list[list[str]], grid: LrGrid) -> list[list[str]]:
    """The extra jobs of the lr grid, given the sweep's jobs (each a list of 'key=value' overrides, Hydra's
    order): for every combination of the other swept values (r, recipe, seed, ...), the width chosen at the
    smallest budget at every multiplier but 1. ConfigError when the jobs sweep no `point`, or the grid does not
    train the chosen width at the smallest budget."""
    if not jobs:
        return []
    points = [_value(job, POINT_KEY) for job in jobs]
    if any(p is None for p in points):
        raise ConfigError("hydra/sweeper=lr_grid needs a sweep over `point` (budget and width per job)")
    if any(_value(job, LR_SCALE_KEY) is not None for job in jobs):
        raise ConfigError("hydra/sweeper=lr_grid sets optim.lr_scale itself: drop optim.lr_scale from the sweep")
    parsed = [split_point(p) for p in points]
    smallest = min(float(b) for budgets, _ in parsed for b in budgets)
    groups: dict[tuple, list[tuple[int, str, list[str]]]] = {}
    for job, (budgets, others) in zip(jobs, parsed):
        at_smallest = [b for b in budgets if float(b) == smallest]
        if not at_smallest:
            continue
        key = tuple(o for o in job if not o.startswith(f"{POINT_KEY}="))
        single = "-".join([f"C{at_smallest[0]}", *others])
        groups.setdefault(key, []).append((_width(others), single, job))
    extra = []
    for choices in groups.values():
        choices.sort(key=lambda c: c[0])
        widths = [w for w, _, _ in choices]
        if grid.width is not None and grid.width not in widths:
            raise ConfigError(
                f"lr_grid.width={grid.width} is not at the smallest budget {smallest:.3g}: the grid has {widths}"
            )
        width = grid.width if grid.width is not None else widths[(len(widths) - 1) // 2]
        _, single, job = next(c for c in choices if c[0] == width)
        for m in grid.multipliers():
            if m != 1.0:
                extra.append(
                    [f"{POINT_KEY}={single}" if o.startswith(f"{POINT_KEY}=") else o for o in job]
                    + [f"{LR_SCALE_KEY}={m!r}"]
                )
    return extra


def _value(job: list[str], key: str) -> str | None:
    for override in job:
        name, _, value = override.partition("=")
        if name.lstrip("+~") == key:
            return value
    return None
