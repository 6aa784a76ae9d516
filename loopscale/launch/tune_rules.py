"""What a tune writes (loopscale/launch/tune.py): the record of how its rule was measured (each r's cells combined,
the per-cell optima and losses, the width transfer, the cost), the loop axis' rule (each r's optimum at each
cell's width), in plain YAML types."""

from __future__ import annotations

from typing import Any

import numpy as np

from loopscale.config.lr_rule import stale_loop
from loopscale.config.naming import paper_width
from loopscale.config.tune_record import RuleAtR, TuneRecord, WidthTransfer
from loopscale.errors import ConfigError
from loopscale.fit.lr_optimum import FAILED_RATIO, combine_optima, width_transfer
from loopscale.launch.compile_order import planned
from loopscale.launch.lr_grid import split_point
from loopscale.launch.tune_grid import FIT_POINTS, failed_ks
from loopscale.provenance import git_commit
from loopscale.train.job_plan import plan_job
from loopscale.train.run_json import read_record_or_none


def cell_width(others: list[str]) -> int:
    """A cell's d_model, what the rules are keyed and read by (`${model.d_model}`): '-d<width>' as written, a
    paper size '-s<size>' as the published grid's width (`naming.paper_width`: s10 -> 640), never the size itself."""
    for part in others:
        if part[:1] in ("d", "s") and part[1:].isdigit():
            return int(part[1:]) if part[0] == "d" else paper_width(int(part[1:]))
    raise ConfigError(f"a tuning cell needs a width ('-d<width>' or '-s<size>'); got {others}")


def record_of(grids, fits, noise, settings, cells, key, rounds, jobs, wall_s) -> TuneRecord:
    """How the rule was measured, for the rule file: per r the combined multiplier and each cell's optimum;
    the cost of every run of the final grids (FLOPs, and the runs' own wall seconds from their records, which
    add up over resumed launches) and this launch's wall time."""
    rule: dict[int, RuleAtR] = {}
    for r in sorted({g.r for g in grids}):
        at_r = [g for g in grids if g.r == r]
        combined = combine_optima([fits[id(g)] for g in at_r], noise["dof"])
        per_cell = {}
        for g in at_r:
            f = fits[id(g)]
            per_cell[g.cell] = {
                "multipliers": [settings.grid.multiplier(k) for k in g.ks],
                "L": [float(np.mean(g.L[k])) for k in g.ks],
                "failed": [settings.grid.multiplier(k) for k in failed_ks(g)],
                **({} if f is None else {
                    "best": f.best, "interval": list(f.interval) if f.interval else None, "L_best": f.L_best,
                    "bracketed": f.side == 0, "reason": f.reason}),
            }  # fmt: skip
        rule[r] = {**combined, "cells": per_cell}
    return plain(
        {
            "key": key,
            "cells": cells,
            "grid": {"points": settings.grid.points, "step": float(settings.grid.step), "centre": settings.grid.centre},
            "fit": (
                f"parabola in ln(multiplier), the {FIT_POINTS} lrs nearest each grid's lowest loss, noise pooled; runs "
                f"over {FAILED_RATIO:g}x the grid's lowest loss did not train and are left out"
            ),
            "noise": noise,
            "rule": rule,
            "transfer": transfer_of(grids, fits, cells, noise["dof"]),
            "cost": {
                "runs": len(jobs),
                "flops": sum(planned(job.cfg).flops for job in jobs),  # at the data's vocabulary, as trained
                "runs_wall_s": sum(run_wall_s(job.cfg) for job in jobs),
                "launch_wall_s": wall_s,
                "rounds": rounds,
            },
            "overrides": settings.overrides,
            "code": git_commit(),
        }
    )


def transfer_of(grids, fits, cells, dof) -> WidthTransfer:
    """The optima of every r and cell as one width transfer (fit/lr_optimum.width_transfer, the first cell's
    width the reference), used in the rule when the cells hold two or more widths and the exponent differs from
    0 by 2 standard errors (else the per-r multipliers, the cells combined, are the rule)."""
    usable = [(g, fits[id(g)]) for g in grids if fits[id(g)] is not None and fits[id(g)].log_se]
    widths = {g.cell: cell_width(split_point(g.cell)[1]) for g in grids}
    ref = widths[cells[0]]
    if len({widths[g.cell] for g, _ in usable}) < 2:
        return {"used": False, "reason": "the cells hold one width"}
    at_r: dict[int, set[int]] = {}
    for g, _ in usable:
        at_r.setdefault(g.r, set()).add(widths[g.cell])
    if all(len(w) < 2 for w in at_r.values()):  # each r's intercept takes its one width: gamma is not identified
        return {"used": False, "reason": "no r has optima at two widths"}
    return width_transfer(
        np.array([g.r for g, _ in usable]),
        np.array([widths[g.cell] for g, _ in usable]),
        np.log([f.best for _, f in usable]),
        np.array([f.log_se for _, f in usable]),
        ref,
        dof,
    )


def run_wall_s(cfg) -> float:
    """A finished run's wall seconds as its records say (a forked cell: the parent's and the branch's)."""
    records = [read_record_or_none(path) for path in plan_job(cfg).record_files]
    return float(sum(rec.wall_time_s or 0.0 for rec in records if rec is not None))


def plain(value: Any) -> Any:
    """Plain YAML types (numbers to 4 significant digits; tuples to lists)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(f"{float(value):.4g}")
    return value


def loop_multipliers(grids, fits, path) -> dict[int, dict[int, float]]:
    """The loop axis' rule: {r: {width: each cell's optimum, 3 significant digits}}; ConfigError naming the first r
    and cell without one (nothing is written). A cell's optimum is what the lr axis would combine
    (`combine_optima`): a parabola curving upwards with its se, or the last lr that trained before lrs that failed;
    a grid whose losses do not curve upwards (flat within the noise) has only its lowest loss, which is no optimum,
    and one cell a width leaves no other cell to take its place."""
    by_r: dict[int, dict[int, float]] = {}
    for g in grids:
        f = fits[id(g)]
        if f is None or not (f.log_se or f.bounded):
            why = "fewer than 3 lrs" if f is None else f.reason or "no noise estimate for its interval"
            raise ConfigError(
                f"no optimum at r = {g.r}, {g.cell} ({why}): nothing written to {path} (see the losses above; "
                "a wider grid, --points or --step, may show the curvature)"
            )
        by_r.setdefault(g.r, {})[cell_width(split_point(g.cell)[1])] = float(f"{f.best:.3g}")
    return {r: dict(sorted(w.items())) for r, w in sorted(by_r.items())}


def stale_loop_note(rule, experiment: str, recipe: str) -> str | None:
    """The line an lr tune says when the rule file (`rule`, as read after the new lr rule is written) holds a loop
    rule of the recipe tuned at another lr rule (`lr_rule.stale_loop`): the file keeps it as it was, and every
    sweep that reads it is refused until it is retuned; None when there is none or the lr rule is unchanged."""
    if stale_loop(rule, recipe) is None:
        return None
    return (
        f"note: recipe {recipe}'s loop rule (the file's `loop:` block) was tuned at the lr rule before this one and "
        "is kept as it was; sweeps that read it are refused until it is retuned: rerun "
        f"`loopscale tune experiment={experiment} model.recipe={recipe} --axis loop`"
    )
