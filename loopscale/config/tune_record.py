"""The records of `loopscale tune` (loopscale/launch/tune.py): the lr rule file's blocks (loopscale/config/lr_rule.py
reads and writes the file) and the cost a tune states before each round, as TypedDicts: what is written to the
YAML is these dicts as they are, so a file written before they were typed reads the same.

    RuleFile:  experiment, multipliers {recipe: {r: m}}, transfer {recipe: WidthScaling}, recipes {recipe: TuneRecord},
               loop (LoopRule: multipliers {recipe: {r: {width: m}}}, recipes {recipe: TuneRecord},
                     lr_rule {recipe: LrRuleOf, the lr rule it was tuned at})
    TuneRecord: key, cells, grid, fit, noise, rule {r: RuleAtR (CombinedOptimum + cells {cell: CellOptimum})},
                transfer (WidthTransfer), cost (runs, FLOPs, wall seconds, rounds), overrides, code
"""

from __future__ import annotations

from typing import TypedDict


class CombinedOptimum(TypedDict, total=False):
    """One r's cells combined (fit/lr_optimum.combine_optima): ln(best) weighted by 1 / se^2 and Cochran's Q; only
    `best` None and a `reason` when no cell's losses curve upwards."""

    best: float | None
    interval: list[float]  # 95%
    log_se: float
    cells_used: int
    heterogeneity_Q: float
    heterogeneity_p: float | None  # None with one cell
    reason: str


class WidthTransfer(TypedDict, total=False):
    """ln best = a_r + gamma ln(width / ref_width) over every r and cell (fit/lr_optimum.width_transfer); only
    `used` False and a `reason` when the cells hold one width."""

    a: dict[float, float]
    a_se: dict[float, float]
    gamma: float
    gamma_se: float
    chi2: float
    dof: int
    chi2_p: float | None
    ref_width: float
    intervals_at_ref: dict[float, list[float]]  # r -> [lo, hi] of the multiplier at ref_width, 95%
    used: bool  # |gamma| >= 2 se: the rule
    reason: str


class CellOptimum(TypedDict, total=False):
    """One grid (an r at a cell): its multipliers and mean losses, and its parabola's optimum when it has one."""

    multipliers: list[float]
    L: list[float]
    best: float
    interval: list[float] | None
    L_best: float
    bracketed: bool
    reason: str | None
    failed: list[float]  # the multipliers with a run that did not train (lr_optimum.failed): left out of the fit


class RuleAtR(CombinedOptimum, total=False):
    cells: dict[str, CellOptimum]


class TuneNoise(TypedDict):
    """The noise of one loss, pooled over every grid's parabola (fit/lr_optimum.pooled_noise)."""

    sigma_nats: float | None  # None: no grid has more than 3 lrs
    dof: int


class TuneRound(TypedDict):
    round: int  # 0: the first grids; k: the k-th extension
    jobs: int
    trained: int
    wall_s: float
    noise: TuneNoise


class TuneCost(TypedDict):
    runs: int
    flops: float
    runs_wall_s: float  # the runs' own records, summed over resumed launches
    launch_wall_s: float
    rounds: list[TuneRound]


class TuneGridSpec(TypedDict):
    points: int
    step: float
    centre: float


class TuneRecord(TypedDict):
    """How one recipe's multipliers were measured (`recipes[recipe]` of the rule file)."""

    key: str  # the tune's cache key (launch/tune.tune_key)
    cells: list[str]
    grid: TuneGridSpec
    fit: str
    noise: TuneNoise
    rule: dict[int, RuleAtR]
    transfer: WidthTransfer
    cost: TuneCost
    overrides: list[str]
    code: str | None  # git commit


class WidthScaling(TypedDict):
    width_exponent: float
    ref_width: float


class LrRuleOf(TypedDict):
    """One recipe's lr rule as the file writes it (config/lr_rule.lr_part): what a loop rule was tuned at."""

    multipliers: dict[int, float]  # r -> multiplier; empty: no lr rule (the untuned lr)
    transfer: WidthScaling | None


class LoopRule(TypedDict, total=False):
    """`loopscale tune --axis loop`'s part of the rule file: optim.lr_loop per recipe, r and width."""

    multipliers: dict[str, dict[int, dict[int, float]]]  # recipe -> r -> width -> multiplier
    recipes: dict[str, TuneRecord]
    lr_rule: dict[str, LrRuleOf]  # recipe -> the lr rule its loop multipliers were tuned at


class RuleFile(TypedDict, total=False):
    experiment: str
    multipliers: dict[str, dict[int, float]]  # recipe -> r -> multiplier (at ref_width with a transfer)
    transfer: dict[str, WidthScaling]
    recipes: dict[str, TuneRecord]
    loop: LoopRule


class RoundCost(TypedDict):
    """What a tune's round will cost, stated before it trains (launch/tune.plan_cost)."""

    jobs: int
    todo: int  # not finished yet
    flops: float
    cpu_hours: float | None  # at the probed speed; None without the probe or for GPU jobs
