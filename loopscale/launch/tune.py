"""The tuning stage (`loopscale tune experiment=X [model.recipe=Y]`): the experiment's learning rate, tuned where
its models are trained, written as the lr rule every later sweep of the experiment uses (loopscale/config/lr_rule.py).

    for every r of the experiment's grid (and the recipe given), at each tuning cell (a budget and a width,
    'C2.5e11-d24'): train the runs at lr multipliers step^k around the centre (5 by default, step sqrt 2)
    -> fit a parabola of L in ln(multiplier) to the 5 lrs nearest the lowest loss (loopscale/fit/lr_optimum.py),
       the noise of one loss pooled over every grid's parabola (seed noise and the parabola's misfit together)
    -> a grid whose lowest loss is at its first or last lr, or whose vertex is outside it, does not bracket
       the optimum: it grows by two lrs on that side and trains them (at most `max_extend` times)
    -> the rule: per r, the cells' ln(best) averaged with weights 1 / se^2 (its interval from the combined se,
       the t quantile of the pooled noise's degrees of freedom); a heterogeneity test (Cochran's Q, chi^2 on
       cells - 1 df) says whether the best lr moves between the cells, which a per-r multiplier cannot follow
    -> sweeps/lr_rules/<experiment>.yaml: the multipliers and how they were measured (cells, per-cell optima,
       the noise, the runs' FLOPs and wall time, the cache key).

The lr is chosen by each run's loss only, never by what it does to a fit. Every run is an ordinary run of the
experiment (its point replaced by the cell, optim.lr_scale set, the experiment's own rule off: optim.lr_rule=1,
and a loop rule it reads off too: optim.lr_loop=1, the loop rule being tuned after the lr, at it)
under runs_dir/<cell> (runs/tune/C2.5e11-d24/... by default), named by its config (`-lrx<m>`), so a tune
resumes like any sweep and shares nothing with the experiment's own runs; a key (the hash of the tuned jobs'
identities without their lr, and the grid) is stored with the rule, and the same tune again is answered from the
file.

Cost is stated before anything trains (`plan_cost`: the round's jobs, their FLOPs and, from the throughput probe,
CPU hours); an extension round states its own.

`--axis loop` tunes the loop's own matrices instead (optim.lr_loop: the recurrent block's and the injection's
MuonH matrices at lr_loop x the other matrices' lr; loopscale/train/optim/groups.py), at the experiment's tuned lr
(its rule on; the rule file records that lr rule, and a loop rule tuned at another is refused where it is read:
config/lr_rule.stale_loop): the same grids, parabolas and extensions, varying optim.lr_loop. The optima move with
the width differently for each r (docs/results.md, "A learning rate for the loop's own matrices"), so no transfer
is fitted: the rule is each r's optimum at each cell's width (one cell a width), read between widths by the
resolver (`lr_rule.loop_multiplier`: log-linear in ln width, refused outside the tuned widths), under the file's
`loop` key.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from loopscale.config.lr_rule import lr_part, read_rule, rule_file, write_loop_rule, write_rule
from loopscale.config.tune_record import RoundCost, TuneRecord
from loopscale.errors import ConfigError
from loopscale.launch.compile_order import planned, schedule
from loopscale.launch.local_workers import train_in_workers
from loopscale.launch.lr_grid import POINT_KEY, split_point
from loopscale.launch.sweep import Job, compose_jobs, describe, sweep_overrides
from loopscale.launch.tune_grid import Grid, TuneGrid, extend, fit_grids
from loopscale.launch.tune_rules import cell_width, loop_multipliers, record_of, stale_loop_note
from loopscale.train.identity import comparable, differences, identity_hash, identity_of, stored_identity
from loopscale.train.plan import run_dir_of
from loopscale.train.run_json import RUN_FILE, is_finished, read_record_or_none

LR_SCALE = "optim.lr_scale"
LR_RULE = "optim.lr_rule"
LR_LOOP = "optim.lr_loop"
# what each axis varies and what it holds fixed: `lr` every group's lr with the experiment's rule off (and the loop's
# at 1 where the experiment reads a loop rule: `_reads_loop_rule`); `loop` the loop's matrices at the tuned lr
AXES = {"lr": (LR_SCALE, {LR_RULE: "1.0"}), "loop": (LR_LOOP, {})}


def default_cells(points: list[str], axis: str = "lr") -> list[str]:
    """Two cells from the experiment's grid points: the smallest budget at its middle width (the lower of two
    middles), and the largest budget at the largest width trained there. The loop axis: the experiment's
    smallest width at the smallest budget that trains it and its largest width at the largest budget that trains
    it, so that the rule, read between tuned widths and never past them (`lr_rule.loop_multiplier`), serves every
    width the experiment trains."""
    budgets: dict[float, dict[int, tuple[str, list[str]]]] = {}
    for point in points:
        tokens, others = split_point(point)
        width = cell_width(others)
        for b in tokens:
            budgets.setdefault(float(b), {})[width] = (b, others)
    if not budgets:
        raise ConfigError("the experiment sweeps no `point`: give the tuning cells with --cells C<budget>-d<width>")
    if axis == "loop":
        widths = sorted({w for at in budgets.values() for w in at})
        lo, hi = widths[0], widths[-1]
        cells = [
            _cell(*budgets[min(b for b in budgets if lo in budgets[b])][lo]),
            _cell(*budgets[max(b for b in budgets if hi in budgets[b])][hi]),
        ]
        return list(dict.fromkeys(cells))
    small, large = budgets[min(budgets)], budgets[max(budgets)]
    widths = sorted(small)
    cells = [_cell(*small[widths[(len(widths) - 1) // 2]]), _cell(*large[max(large)])]
    return list(dict.fromkeys(cells))


def _cell(budget: str, others: list[str]) -> str:
    return "-".join([f"C{budget}", *others])


def groups_of(
    overrides: list[str], cells: list[str] | None, axis: str = "lr"
) -> tuple[list[tuple[list[str], Any]], list[str]]:
    """(each distinct job of the experiment's sweep without its point: (its overrides, its composed config at
    the first cell), the cells): one lr grid per (group, cell). The identities are composed at the axis' 1 (the
    loop axis: optim.lr_loop=1, so an experiment that reads a loop rule composes before it has one; the lr axis
    holds such an experiment's loop at 1 too: `_reads_loop_rule`)."""
    varied, fixed = AXES[axis]
    jobs = sweep_overrides(overrides)
    points = [v for job in jobs for v in [_value(job, POINT_KEY)] if v is not None]
    cells = list(cells) if cells else default_cells(points, axis)
    for cell in cells:
        split_point(cell)  # a cell is a point: 'C<budget>...-d<width>'
    bases: dict[tuple, list[str]] = {}
    for job in jobs:
        if _value(job, varied) is not None:
            raise ConfigError(f"loopscale tune sets {varied} itself: drop it from the overrides")
        base = [o for o in job if _key(o) not in (POINT_KEY, varied, *fixed, "runs_dir")]
        bases.setdefault(tuple(base), base)
    held = [f"{k}={v}" for k, v in fixed.items()]
    composed = compose_jobs([[*base, f"{POINT_KEY}={cells[0]}", f"{varied}=1.0", *held] for base in bases.values()])
    if axis == "lr":  # before to_object resolves the loop rule, which may not exist yet
        for base, cfg in zip(bases.values(), composed):
            if _reads_loop_rule(cfg):
                base.append(f"{LR_LOOP}=1.0")
                cfg.optim.lr_loop = 1.0
    return [(base, OmegaConf.to_object(cfg)) for base, cfg in zip(bases.values(), composed)], cells


def _reads_loop_rule(cfg) -> bool:
    """Whether a composed (unresolved) config's optim.lr_loop is the experiment's loop rule
    (`${ls.lr_loop_rule:...}`). The lr axis trains such an experiment at lr_loop = 1: the loop rule is tuned after
    the lr rule, at the tuned lr, and records it (config/lr_rule.stale_loop); an lr tuned at the loop rule would
    make that very loop rule stale and the lr rule depend on the rule it invalidates, and before the loop rule
    exists the experiment would not compose at all. An lr_loop the experiment or the overrides give as a number is
    the experiment's own and kept."""
    if not OmegaConf.is_interpolation(cfg.optim, "lr_loop"):
        return False
    return "ls.lr_loop_rule" in str(OmegaConf.to_container(cfg.optim, resolve=False)["lr_loop"])


def tune_key(groups: list[tuple[list[str], Any]], cells: list[str], grid: TuneGrid, axis: str = "lr") -> str:
    """The cache key of a tune: its jobs' identities at the centre lr (what is trained, not where), the grid and
    the axis (absent for `lr`: rules tuned before the loop axis keep their key)."""
    ids = sorted(identity_hash(identity_of(cfg)) for _, cfg in groups)
    spec = {"ids": ids, "cells": cells, "points": grid.points, "step": float(grid.step), "centre": grid.first_ks()}
    if axis != "lr":
        spec["axis"] = axis
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def grid_jobs(
    grids: list[Grid], tg: TuneGrid, runs_dir: str, extra: list[str], axis: str = "lr"
) -> list[tuple[Grid, int, Job]]:
    """Every (grid, k) run as (grid, k, Job): the group's overrides, the cell as its point, the axis' multiplier
    step^k (the lr axis: the experiment's rule off), under runs_dir/<cell> (run names carry the width, not the
    budget: two cells of one width must not share a run dir)."""
    varied, fixed = AXES[axis]
    keyed, overrides = [], []
    for g in grids:
        for k in g.ks:
            overrides.append(
                [
                    *g.overrides,
                    f"{POINT_KEY}={g.cell}",
                    f"{varied}={tg.multiplier(k)!r}",
                    *(f"{key}={value}" for key, value in fixed.items()),
                    f"runs_dir={Path(runs_dir) / g.cell}",
                    *extra,
                ]  # fmt: skip
            )
            keyed.append((g, k))
    cfgs = compose_jobs(overrides)
    return [(g, k, Job(o, OmegaConf.to_object(c))) for (g, k), o, c in zip(keyed, overrides, cfgs)]


def points_of(cfg) -> list[Any]:
    """The configs whose run.json hold a job's points (`JobPlan.points`: a forked job's branches, else its own),
    planned at the data's vocabulary as the run is: the steps, and with them a warmup_frac's warmup, depend on it."""
    return [point.cfg for point in planned(cfg).points]


def job_loss(cfg) -> float | None:
    """The final validation loss of a finished tuning run (a forked cell has one branch), None when not done.
    ConfigError when the dir holds a finished run of another config (run names do not carry every field: a tune
    of another model must not read its losses; loopscale/train/identity.py)."""
    points = points_of(cfg)
    if not all(is_finished(run_dir_of(p)) for p in points):
        return None
    for point in points:
        old, new = comparable(stored_identity(run_dir_of(point)) or {}, identity_of(point))
        if old != new:
            raise ConfigError(
                f"{run_dir_of(point)} holds a finished run of another config ({'; '.join(differences(old, new)[:2])}): "
                "tune into another --runs-dir"
            )
    return float(read_record_or_none(run_dir_of(points[-1]) / RUN_FILE).L)


def plan_cost(jobs: list[Job], probe: bool) -> RoundCost:
    """What the jobs not yet finished will cost: how many, their FLOPs (a forked cell: its parent and cooldown)
    and, with the probe (CPU jobs), CPU hours in one process at the measured speed (loopscale/launch/sweep.py)."""
    todo = [job for job in jobs if job_loss(job.cfg) is None]
    rows = [describe(job, probe=probe) for job in todo]
    hours = [row.get("cpu_hours") for row in rows]
    return {
        "jobs": len(jobs),
        "todo": len(todo),
        "flops": float(sum(row["C"] for row in rows)),
        "cpu_hours": float(sum(hours)) if rows and all(h is not None for h in hours) else None,
    }


@dataclass
class TuneSettings:
    overrides: list[str]  # the experiment and any other Hydra overrides (model.recipe=..., seed=...)
    cells: list[str] | None = None  # None: default_cells of the experiment's grid
    grid: TuneGrid = field(default_factory=TuneGrid)
    runs_dir: str = "runs/tune"
    out: Path | None = None  # None: the experiment's rule file (loopscale/config/lr_rule.py)
    workers: int = 2
    threads_per_worker: int = 1
    probe: bool = True  # the throughput probe behind the stated CPU hours
    force: bool = False  # tune again even when the rule file holds this tune's key
    dry_run: bool = False  # state the first round's cost and stop
    axis: str = "lr"  # lr: every group's lr (optim.lr_scale); loop: the loop's matrices' (optim.lr_loop)

    def __post_init__(self) -> None:
        if self.axis not in AXES:
            raise ConfigError(f"axis={self.axis!r} is not one of {sorted(AXES)}")


@dataclass
class TuneResult:
    rule_path: Path
    multipliers: dict[int, float]
    record: TuneRecord
    cached: bool
    trained: int = 0


def run_tune(settings: TuneSettings, say: Callable[[str], None] = print, progress=None) -> TuneResult | None:
    """The module docstring's stages; the rule file's path and what it holds (None after a dry run). `say`
    prints a line, `progress(total)` gives a callable to advance per finished job (None: no bar)."""
    axis = settings.axis
    groups, cells = groups_of(settings.overrides, settings.cells, axis)
    experiment = groups[0][1].sweep
    recipe = _one_recipe(groups)
    path = Path(settings.out) if settings.out else rule_file(experiment)
    # the lr rule the loop axis' runs train at: the experiment's own file (the resolver's), whatever --out says
    tuned_at = lr_part(read_rule(rule_file(experiment)), recipe)
    key = tune_key(groups, cells, settings.grid, axis)
    cached = None if settings.force else _cached(path, recipe, axis, key)
    if cached is not None:
        say(f"already tuned: {path} holds recipe {recipe}'s {axis} rule for this grid (key {key}); --force tunes again")
        return cached
    widths = [cell_width(split_point(cell)[1]) for cell in cells]
    if axis == "loop" and len(set(widths)) != len(widths):
        raise ConfigError(f"the loop axis tunes one cell a width (its rule is per width); the cells {cells} repeat one")
    grids = [
        Grid(recipe, int(cfg.model.r), cell, base, settings.grid.first_ks()) for base, cfg in groups for cell in cells
    ]
    # the loss at the trained r is all a tune reads: no scoring at other r (trainer.r_eval; not in the identity)
    extra = ["trainer.progress=false", f"trainer.num_threads={settings.threads_per_worker}", "trainer.r_eval=off"]
    trained, wall_s, rounds = 0, 0.0, []
    for round_ in range(settings.grid.max_extend + 1):
        jobs = grid_jobs(grids, settings.grid, settings.runs_dir, extra, axis)
        cost = plan_cost([job for _, _, job in jobs], settings.probe)
        say(_cost_line(round_, cost, settings))
        if settings.dry_run:
            return None
        done, seconds = _train([job for _, _, job in jobs], settings, progress, say)
        trained, wall_s = trained + done, wall_s + seconds
        _read_losses(grids, jobs)
        fits, noise = fit_grids(grids, settings.grid)
        grow = [(g, fits[id(g)].side) for g in grids if fits[id(g)] is not None and fits[id(g)].side != 0]
        rounds.append({"round": round_, "jobs": len(jobs), "trained": done, "wall_s": seconds, "noise": noise})
        if grow and round_ == settings.grid.max_extend:
            g, side = grow[0]
            why = f" ({fits[id(g)].reason})" if fits[id(g)].reason else ""
            raise ConfigError(
                f"r = {g.r} at {g.cell}: the lowest loss is still on the grid's {'upper' if side > 0 else 'lower'} "
                f"edge{why} "
                f"after {round_} extension(s) (x{settings.grid.multiplier(min(g.ks)):.3g} .. "
                f"x{settings.grid.multiplier(max(g.ks)):.3g}): nothing written to {path}; rerun with --centre "
                f"nearer the optimum or a larger --max-extend (the runs so far are reused)"
            )
        if not grow:
            break
        for g, side in grow:
            new = extend(g, side)
            say(f"  r = {g.r} at {g.cell}: the lowest loss is at the grid's {'upper' if side > 0 else 'lower'} "
                f"edge: adding x{', x'.join(f'{settings.grid.multiplier(k):.3g}' for k in new)}")  # fmt: skip
    record = record_of(grids, fits, noise, settings, cells, key, rounds, [job for _, _, job in jobs], wall_s)
    if axis == "loop":
        return _write_loop_rule(path, experiment, recipe, grids, fits, record, trained, tuned_at)
    return _write_lr_rule(path, experiment, recipe, grids, record, trained, say)


def _one_recipe(groups: list[tuple[list[str], Any]]) -> str:
    recipes = sorted({cfg.model.recipe for _, cfg in groups})
    if len(recipes) != 1:
        raise ConfigError(f"one recipe a tune (the rule is per recipe); the overrides give {recipes}")
    return recipes[0]


def _cached(path: Path, recipe: str, axis: str, key: str) -> TuneResult | None:
    """The rule file's answer when it holds this tune (its key) for the recipe on this axis, else None."""
    section = read_rule(path) if axis == "lr" else (read_rule(path).get("loop") or {})
    stored = (section.get("recipes") or {}).get(recipe) or {}
    if stored.get("key") != key:
        return None
    return TuneResult(path, {int(r): m for r, m in section["multipliers"][recipe].items()}, stored, cached=True)


def _write_lr_rule(path, experiment, recipe, grids, record, trained, say) -> TuneResult:
    """The lr axis' rule: per r the cells' combined optimum, or the width transfer's where it was measured;
    a note when the file's loop rule of the recipe was tuned at the lr rule it replaces."""
    transfer = record["transfer"] if record["transfer"].get("used") else None
    best = {r: (math.exp(transfer["a"][r]) if transfer else v.get("best")) for r, v in record["rule"].items()}
    multipliers = {int(r): float(f"{m:.3g}") for r, m in best.items() if m}  # as written
    missing = sorted({g.r for g in grids} - set(multipliers))
    if missing:
        raise ConfigError(f"no optimum at r = {missing}: nothing written to {path} (see the losses above)")
    width = {"width_exponent": transfer["gamma"], "ref_width": transfer["ref_width"]} if transfer else None
    write_rule(path, experiment, recipe, multipliers, record, width)
    note = stale_loop_note(read_rule(path), experiment, recipe)
    if note:
        say(note)
    return TuneResult(path, multipliers, record, cached=False, trained=trained)


def _write_loop_rule(path, experiment, recipe, grids, fits, record, trained, tuned_at=None) -> TuneResult:
    """The loop axis' rule: each r's optimum at each cell's width (no transfer, no combining: one cell a width),
    with the lr rule its runs trained at (`tuned_at`; None: the file's own)."""
    multipliers = loop_multipliers(grids, fits, path)
    record = {**record, "axis": "loop", "transfer": {"used": False, "reason": "the loop axis' rule is per width"}}
    write_loop_rule(path, experiment, recipe, multipliers, record, tuned_at)
    return TuneResult(path, multipliers, record, cached=False, trained=trained)


def _read_losses(grids: list[Grid], jobs: list[tuple[Grid, int, Job]]) -> None:
    """Every grid's losses (Grid.L, by k) read afresh from its finished runs."""
    for g in grids:
        g.L = {}
    for g, k, job in jobs:
        L = job_loss(job.cfg)
        if L is None:
            raise ConfigError(f"tuning run {job.cfg.run_name} did not finish")
        g.L.setdefault(k, []).append(L)


def _cost_line(round_: int, cost: RoundCost, settings: TuneSettings) -> str:
    what = "tuning grid" if round_ == 0 else f"extension {round_}"
    hours = cost["cpu_hours"]
    wall = f", ~{hours * 60 / max(settings.workers, 1):.0f} min wall on {settings.workers} worker(s)" if hours else ""
    cpu = f", {hours:.2f} CPU h at the probed speed" if hours is not None else ""
    return f"{what}: {cost['todo']} of {cost['jobs']} runs to train, {cost['flops']:.3g} FLOPs{cpu}{wall}"


def _train(jobs: list[Job], settings: TuneSettings, progress, say) -> tuple[int, float]:
    """Train the jobs not finished yet on the worker pool, longest first, a line per finished job; (how many,
    wall seconds)."""
    todo = [job.cfg for job in jobs if job_loss(job.cfg) is None]
    if not todo:
        return 0, 0.0
    todo = schedule(todo, [planned(cfg).tokens for cfg in todo])
    advance = progress(len(todo)) if progress else None
    started = time.perf_counter()
    for cfg, _record, wall in train_in_workers(todo, settings.workers, settings.threads_per_worker):
        say(f"  {cfg.runs_dir.rsplit('/', 1)[-1]}  {cfg.run_name:<28} L = {job_loss(cfg):.4f}  ({wall:.0f} s)")
        if advance:
            advance()
    return len(todo), time.perf_counter() - started


def _key(override: str) -> str:
    return override.partition("=")[0].lstrip("+~")


def _value(job: list[str], key: str) -> str | None:
    return next((o.partition("=")[2] for o in job if _key(o) == key), None)
