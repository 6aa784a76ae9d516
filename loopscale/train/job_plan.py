"""A job of a sweep, single or forked, planned before anything is trained: `plan_job(cfg) -> JobPlan`, the one place
that tells a single run (budget flops / tokens / ratio) from a forked one (budget.mode=forks: a stable parent and its
cooldown branches, loopscale/train/forks.py). Everything that prices, orders, estimates or watches a job (`plan`,
`sweep`, `power`, the demo, the local pool, the SLURM launcher's estimates, the compile order) reads its points,
tokens, FLOPs, run directories, record files and compile key from the plan, never from the budget's mode."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from loopscale.config.schema import TrainConfig
from loopscale.train.batching import device_batching
from loopscale.train.compile_cache import compile_key, key_hash, run_context
from loopscale.train.compile_choice import COMPILED_MODE
from loopscale.train.plan import (
    ForkPlan,
    RunPlan,
    branch_config,
    curve_evaluations,
    parent_config,
    plan_forks,
    plan_run,
    r_eval_scoring_flops,
    run_dir_of,
)
from loopscale.train.run_json import PARENT_FILE, RUN_FILE


@dataclass(frozen=True)
class PointPlan:
    """One point of the law a job trains: the run itself, or one branch of a forked job."""

    cfg: TrainConfig  # the point's own config (a branch: an ordinary wsd run of its steps, `branch_config`)
    D: int  # its training tokens (a branch: its cooldown included)
    C: float  # C = F x D
    C_budget: float | None  # the budget asked for (flops budgets), else None
    steps: int  # its optimizer steps
    fork_step: int | None  # a branch's first cooldown step on the parent; None for a single run


@dataclass(frozen=True)
class JobPlan:
    """One job: its own training (`run`: the run, or a forked job's stable parent), its points and what it costs."""

    cfg: TrainConfig  # the job's config
    run: RunPlan  # N's, F, batch tokens; a forked job's: its stable parent's
    forks: ForkPlan | None  # a forked job's branches; None for a single run
    points: tuple[PointPlan, ...]  # in increasing steps
    tokens: int  # what the job trains: its run's D, or the parent to its last fork plus every cooldown
    flops: float  # what it spends (eq. C = F x D; forked: F (D_parent + sum_i cooldown tokens_i))
    flops_independent: float  # its points trained as separate runs: F sum_i D_i
    run_cfg: TrainConfig  # the config `run` plans: the job's own, or its stable parent's (`parent_config`)

    @property
    def steps(self) -> int:
        """The optimizer steps the job trains (a forked job: the parent to its last fork plus each cooldown)."""
        return round(self.tokens / self.run.batch_tokens)

    @property
    def run_dir(self) -> Path:
        return run_dir_of(self.cfg)

    @property
    def parent(self) -> str:
        """The run whose stable phase the points share (a runs table's `parent`): the job's name if forked."""
        return self.cfg.run_name if self.forks is not None else ""

    @property
    def record_files(self) -> tuple[Path, ...]:
        """The records the job writes: its run.json, or the parent's record and each branch's run.json."""
        own = self.run_dir / (PARENT_FILE if self.forks is not None else RUN_FILE)
        return (own, *sorted(run_dir_of(p.cfg) / RUN_FILE for p in self.points if p.fork_step is not None))

    @property
    def compile_key(self) -> dict:
        """The compiled-graph key of its model (compile_cache.compile_key, whole-model compile) as it trains (its
        precision, device batch and optimizer: compile_cache.run_context): jobs with equal keys load each other's
        graphs."""
        cfg = self.cfg
        batching = device_batching(cfg.budget, cfg.model, cfg.trainer, cfg.optim.optimizer)
        run = run_context(cfg.trainer.precision, batching.device_batch, cfg.optim.optimizer)
        return compile_key(cfg.model, COMPILED_MODE, cfg.trainer.compile_backend, run=run)

    @property
    def graph_key(self) -> str:
        return key_hash(self.compile_key)


def plan_job(cfg: TrainConfig) -> JobPlan:
    """The job's plan, with the model's vocabulary as `cfg` gives it (the planners set the configured one, the demo
    the tokenizer's: `with_vocab`). ConfigError for a forked job that cannot fork (`plan_forks`)."""
    if cfg.budget.mode != "forks":
        run = plan_run(cfg)
        point = PointPlan(cfg, run.D, run.C, run.C_budget, run.steps, None)
        return JobPlan(cfg, run, None, (point,), run.D, run.C, run.C, cfg)
    forks = plan_forks(cfg)
    points = tuple(
        PointPlan(branch_config(cfg, forks, b), b.D, b.D * forks.F, b.C_budget, b.steps, b.fork_step)
        for b in forks.branches
    )
    parent = parent_config(cfg, forks)
    run = plan_run(parent)
    assert run.steps == forks.parent_steps
    return JobPlan(
        cfg, run, forks, points, round(forks.C_forked / forks.F), forks.C_forked, forks.C_independent, parent
    )


def curve_cost(job: JobPlan, val_sequences: int) -> tuple[int, float]:
    """(evaluations, FLOPs) of the job's loss curves (`plan.curve_evaluations`, each r_eval of trainer.curve_r_eval
    at its own forward FLOPs) on a final validation set of `val_sequences`: a single run's points; a forked job's
    parent's (its fork steps among them) and each branch's own after its fork (it inherits the parent's before)."""
    steps, per_point = curve_evaluations(job.run_cfg, job.run, val_sequences, job.forks.fork_steps if job.forks else ())
    points, flops = len(steps), len(steps) * per_point
    for point in job.points if job.forks is not None else ():
        steps, per_point = curve_evaluations(point.cfg, plan_run(point.cfg), val_sequences)
        own = [s for s in steps if s > point.fork_step]
        points, flops = points + len(own), flops + len(own) * per_point
    return points, flops


def scoring_flops(job: JobPlan, val_sequences: int) -> float:
    """The forward FLOPs the job spends scoring besides its validations at r: its loss curves (`curve_cost`) and each
    point's final set at trainer.r_eval's other pass counts (`plan.r_eval_scoring_flops`; a stable parent is not
    scored)."""
    return curve_cost(job, val_sequences)[1] + sum(r_eval_scoring_flops(p.cfg, val_sequences) for p in job.points)
