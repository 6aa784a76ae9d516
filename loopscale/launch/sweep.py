"""Expand a Hydra multirun without launching it: the job list of an experiment, and each job's plan.

`hydra.sweeper.params` in an experiment config holds the grid (r x (budget, width) points); this module
runs the same expansion Hydra's basic sweeper does, so `loopscale sweep experiment=isodepth` lists exactly
the jobs `loopscale-train -m experiment=isodepth` would launch (116 for the published grid).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TypedDict

from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import OverrideType
from omegaconf import OmegaConf

from loopscale.config.dirs import compose
from loopscale.config.schema import TrainConfig, with_vocab
from loopscale.launch.compile_order import compile_column
from loopscale.launch.estimate import estimate_job, launcher_limits_of
from loopscale.launch.lr_grid import LrGrid, lr_grid_jobs
from loopscale.launch.throughput import cpu_throughput
from loopscale.model.memory import GIB, estimate_memory, usable_memory
from loopscale.train.batching import device_batching, on_gpu
from loopscale.train.job_plan import JobPlan, plan_job


@dataclass(frozen=True)
class Job:
    overrides: list[str]  # the job's own overrides (after the command line's)
    cfg: TrainConfig


class JobWork(TypedDict):
    points: int
    D: int  # tokens
    steps: int  # optimizer steps
    C: float  # FLOPs


class CpuEstimate(TypedDict):
    cpu_threads: int
    cpu_tokens_per_s: float | None  # None: a GPU job, or no probe
    cpu_hours: float | None
    probe_s: float
    probe_cached: bool | None


class SweepRow(JobWork, CpuEstimate):
    """A job's row of `loopscale sweep` (`describe`; its --json lines, with the compile choice added)."""

    run_name: str
    seed: int
    sweep: str
    point: str | None
    r: int
    recipe: str
    d_model: int
    N_once: int
    N_rec: int
    N: int
    C_budget: float | None
    lr_scale: float
    lr_rule: float
    lr_loop: float
    device_batch: int
    grad_accum: int
    world: int
    gpu_hours: float
    wall_h: float
    allowed_h: float | None
    fits_limits: bool
    plan_device: str
    peak_gib: float  # predicted peak per device (loopscale/model/memory.py)
    usable_gib: float | None  # trainer.plan_device's usable memory (GPU runs)
    fits_memory: bool


def sweep_overrides(overrides: list[str]) -> list[list[str]]:
    """Each job's full override list, in Hydra's order: the sweeper params' cross product, with any
    comma-separated command-line override (e.g. model.r=1,2) taking part like in `-m`."""
    parser = OverridesParser.create()
    given = parser.parse_overrides(overrides)
    # compose once without the sweep overrides (Hydra refuses those outside -m) to read the grid
    fixed = [o.input_line for o in given if not o.is_sweep_override()]
    hydra_cfg = compose(fixed, return_hydra_config=True).hydra
    # an experiment's grid; none without an experiment (to_container refuses a plain {}: not a config)
    grid_params = hydra_cfg.sweeper.params
    params = {} if grid_params is None else OmegaConf.to_container(grid_params, resolve=False)
    # command-line overrides win over the sweeper params of the same key
    keys = {o.key_or_group for o in given}
    grid = [f"{k}={' '.join(str(v).split())}" for k, v in params.items() if k not in keys]
    parsed = parser.parse_overrides([*grid, *overrides])
    (batch,) = BasicSweeper.split_arguments(parsed, max_batch_size=None)
    jobs = [list(job) for job in batch]
    spec = OmegaConf.select(hydra_cfg, "sweeper.lr_grid")  # hydra/sweeper=lr_grid: its jobs come last, as launched
    return jobs if spec is None else jobs + lr_grid_jobs(jobs, LrGrid(**OmegaConf.to_container(spec)))


def expand(overrides: list[str]) -> list[Job]:
    """Every job of the multirun with its validated config, in launch order."""
    jobs = sweep_overrides(overrides)
    return [Job(job, OmegaConf.to_object(cfg)) for job, cfg in zip(jobs, compose_jobs(jobs))]


def compose_jobs(jobs: list[list[str]]) -> list:
    """Each job's composed config (a DictConfig, as `compose(job)` returns it).

    A full Hydra composition costs ~0.1 s, which makes the 116-job paper grid slow to list. Jobs that
    differ only in plain values (model.r=4, point=C1e18-s10) share their defaults list, so the first job
    is composed and each other job applies its own values to a copy with Hydra's override code: the
    result is what composing it would give. A sweep over config groups (model=tiny,cpu), or one that adds
    or deletes keys, is composed job by job."""
    if not jobs:
        return []
    first = compose(jobs[0])
    parser = OverridesParser.create()
    parsed = [parser.parse_overrides(job) for job in jobs]
    varying = {o.key_or_group for job in parsed for o in job} - {
        o.key_or_group for o in parsed[0] if all(o.input_line in job for job in jobs)
    }
    absent = object()

    def plain_value(o) -> bool:  # a CHANGE of a leaf that exists in the composed config (not a group)
        if o.type != OverrideType.CHANGE or o.package is not None or isinstance(o.value(), (dict, list)):
            return False
        node = OmegaConf.select(first, o.key_or_group, default=absent)
        return node is not absent and not OmegaConf.is_config(node)

    if not all(plain_value(o) for job in parsed for o in job if o.key_or_group in varying):
        return [first, *(compose(job) for job in jobs[1:])]
    out = [first]
    for job in parsed[1:]:
        cfg = copy.deepcopy(first)
        ConfigLoaderImpl._apply_overrides_to_config([o for o in job if o.key_or_group in varying], cfg)
        out.append(cfg)
    return out


def work(job: JobPlan) -> JobWork:
    """What a job's row says it trains (a forked job: its stable parent and every cooldown branch, not the parent's
    plan alone): points, tokens D, optimizer steps and FLOPs C."""
    return {"points": len(job.points), "D": job.tokens, "steps": job.steps, "C": job.flops}


def cpu_estimate(cfg: TrainConfig, tokens: int, device_batch: int, probe: bool) -> CpuEstimate:
    """A CPU job's measured tokens/s (loopscale/launch/throughput.py, cached per machine) and its CPU wall
    hours at the job's torch threads (trainer.num_threads, 0: one, as on the local pool); None for GPU jobs
    or without the probe."""
    threads = cfg.trainer.num_threads or 1
    none = CpuEstimate(cpu_threads=threads, cpu_tokens_per_s=None, cpu_hours=None, probe_s=0.0, probe_cached=None)
    if not probe or on_gpu(cfg.trainer):
        return none

    measured = cpu_throughput(cfg, device_batch, threads)
    return {
        "cpu_threads": threads,
        "cpu_tokens_per_s": measured.tokens_per_s,
        "cpu_hours": tokens / measured.tokens_per_s / 3600,
        "probe_s": measured.probe_s,
        "probe_cached": measured.cached,
    }


def describe(job: Job, limits=None, probe: bool = False) -> SweepRow:
    """One job's row: what it trains (a forked job's own points, tokens, steps and C: `JobPlan`), its device
    batch and accumulation, its launch estimate against `limits` (a launch.LaunchLimits, or None when the
    launcher has no time limit; loopscale/launch/estimate.py) and, with `probe`, its CPU hours."""
    cfg = with_vocab(job.cfg, job.cfg.data.vocab_size)
    planned = plan_job(cfg)
    plan = planned.run
    batching = device_batching(cfg.budget, cfg.model, cfg.trainer, cfg.optim.optimizer)
    estimate = estimate_job(cfg, limits, planned)
    memory = estimate_memory(
        cfg.model, batching.device_batch, cfg.trainer.compile, cfg.optim.optimizer, True, batching.world
    )
    usable = usable_memory(cfg.trainer.plan_device) if on_gpu(cfg.trainer) else None
    return {
        "run_name": cfg.run_name,
        "seed": cfg.seed,
        "sweep": cfg.sweep,
        "point": cfg.point,
        "r": cfg.model.r,
        "recipe": cfg.model.recipe,
        "d_model": cfg.model.d_model,
        "N_once": plan.N_once,
        "N_rec": plan.N_rec,
        "N": plan.N,
        "C_budget": plan.C_budget,
        "lr_scale": cfg.optim.lr_scale,
        "lr_rule": cfg.optim.lr_rule,  # the experiment's tuned multiplier (`loopscale tune`), 1 without a rule
        "lr_loop": cfg.optim.lr_loop,  # the loop's matrices' lr over the others' (`loopscale tune --axis loop`)
        **work(planned),
        "device_batch": batching.device_batch,
        "grad_accum": batching.grad_accum,
        "world": batching.world,
        "gpu_hours": estimate.gpu_hours,
        "wall_h": estimate.wall_h,
        "allowed_h": estimate.allowed_h,
        "fits_limits": estimate.fits,
        "plan_device": cfg.trainer.plan_device,
        "peak_gib": memory.peak / GIB,
        "usable_gib": None if usable is None else usable / GIB,
        "fits_memory": usable is None or memory.peak <= usable,
        **cpu_estimate(cfg, planned.tokens, batching.device_batch, probe),
    }


def with_compile(rows: list[dict], cfgs: list[TrainConfig], tokens_key: str) -> list[dict]:
    """The rows with each job's compile choice (`compile`, `compile_s`) as the local pool would start the sweep:
    each model compiled once, by its first job, when its jobs pay for it (loopscale/launch/compile_order.py)."""
    eager_s = [None if row.get("cpu_hours") is None else 3600 * row["cpu_hours"] for row in rows]
    column = compile_column(cfgs, [row[tokens_key] for row in rows], eager_s)
    return [{**row, **extra} for row, extra in zip(rows, column)]


def plan_rows(overrides: list[str], probe: bool = False) -> list[dict]:
    """One row per job: run_name, points, C_independent, C_forked (FLOPs, from accounting), its launch
    estimate (gpu_hours, wall_h, allowed_h, fits_limits: loopscale/launch/estimate.py) and, with `probe`,
    its measured CPU tokens/s and hours (cpu_estimate)."""
    rows = []
    limits = launcher_limits_of(overrides)
    jobs = expand(overrides)
    for job in jobs:
        # the tokenizer vocabulary is only known after data prepare; plan with the configured one
        cfg = with_vocab(job.cfg, job.cfg.data.vocab_size)
        planned = plan_job(cfg)
        row = {
            "run_name": cfg.run_name,
            "seed": cfg.seed,
            "r": cfg.model.r,
            "d_model": cfg.model.d_model,
            "points": len(planned.points),
            "steps": [p.steps for p in planned.points],  # each point's (branch's) optimizer steps
            "fork_steps": [p.fork_step for p in planned.points if p.fork_step is not None],
            "steps_trained": planned.steps,  # what the job trains: the parent to its last fork + each cooldown
            "tokens": planned.tokens,
            "C_independent": planned.flops_independent,
            "C_forked": planned.flops,
        }
        estimate = estimate_job(cfg, limits, planned)
        row.update(
            gpu_hours=estimate.gpu_hours,
            wall_h=estimate.wall_h,
            allowed_h=estimate.allowed_h,
            fits_limits=estimate.fits,
        )
        batching = device_batching(cfg.budget, cfg.model, cfg.trainer, cfg.optim.optimizer)
        row.update(cpu_estimate(cfg, planned.tokens, batching.device_batch, probe))
        rows.append(row)
    return with_compile(rows, [job.cfg for job in jobs], "tokens")
