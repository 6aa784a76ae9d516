"""Planning a run before anything is built: what a budget means in tokens and steps for one model
(RunPlan, plan_run; docs/design.md, "Parameter accounting"), what training it derives from its config
(TrainingPlan, plan_training: the device split, the predicted memory, the peak lrs), where the run lives
(run_dir_of), and how a budget.mode=forks job splits into a stable parent and cooldown branches (ForkPlan,
plan_forks; the method is described in loopscale/train/forks.py, which runs it). Pure functions over
TrainConfig: no Lightning, and no torch up to plan_training's lrs, so `loopscale sweep` / `plan` and the
launcher's estimates plan exactly what training will run.

A run's derived numbers are computed here once and passed on as the plan: the LightningModule, the Trainer and
the run's record read them from it and never recompute them from the config.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from omegaconf import DictConfig, OmegaConf

from loopscale.config.checks import r_eval_values
from loopscale.config.naming import budget_tag
from loopscale.config.schema import TrainConfig
from loopscale.data.heldout import final_val_sequences, subset_curve
from loopscale.errors import ConfigError
from loopscale.model import accounting, r_sampling
from loopscale.model.memory import MemoryEstimate, usable_memory
from loopscale.train.batching import Batching, split_and_memory
from loopscale.train.optim.lr_transfer import peak_lrs
from loopscale.train.optim.schedule import warmup_steps as schedule_warmup_steps
from loopscale.train.optim.schedule import wsd_decay_start

if TYPE_CHECKING:
    from loopscale.data.run_data import RunData

CHECKPOINT = Path("checkpoints") / "last.ckpt"
SINGLE_RUN_MODES = ("flops", "tokens", "ratio")  # the budgets of one run; budget.mode=forks is a job of several


@dataclass(frozen=True)
class RunPlan:
    """Everything the budget implies for one model, computed before training (docs/design.md,
    "Parameter accounting")."""

    N_once: int
    N_rec: int
    N: int  # N_once + N_pass + N_rec
    embedding: int
    lm_head: int
    F: float  # training FLOPs per token
    F_causal: float  # F with half the attention matmuls, what a causal kernel executes (the second MFU)
    D: int  # training tokens, whole batches
    C: float  # F * D, the compute actually spent
    C_budget: float | None  # the budget asked for (flops mode)
    steps: int
    batch_tokens: int
    # the D of the lr transfer: in flops mode the tokens C / F before rounding to whole batches (int(C / F), as
    # the published code takes it), else D
    D_target: int
    D_ref: float  # the lr transfer's reference D: its reference model's (accounting.d_ref_tokens)
    N_pass: int = 0  # parameters used once per pass (per-pass adapters): docs/design.md, "Parameter accounting"
    # variable-depth training (model/r_sampling.py): the FLOPs ledger of its schedule (F above is its realised mean)
    r_ledger: dict | None = None
    # what it scores: the passes of each loss-curve evaluation (`curve_r_evals`), the passes the finished model is
    # scored at (trainer.r_eval: train/testtime_eval.py), the forward FLOPs per token at each (accounting.eval_flops_at)
    curve_r_evals: list[int] = field(default_factory=list)
    r_evals: list[int] = field(default_factory=list)
    eval_flops: dict[int, float] = field(default_factory=dict)

    @property
    def curve_flops_per_token(self) -> float:
        """The forward FLOPs per token of one evaluation of the loss curve: each of its passes at its own."""
        return sum(self.eval_flops[r] for r in self.curve_r_evals)


def plan_run(cfg: TrainConfig) -> RunPlan:
    """Turn the budget of one run (flops, tokens, ratio) into tokens and steps for this model and batch (pure; no
    model is built), from the model's accounting asked once (`accounting.account`, with the passes the run scores).
    A sampled-r run (model.r_sampling) takes its steps from its schedule of draws. A job of several runs (a forked
    one) is planned by `loopscale.train.job_plan.plan_job`."""
    budget = cfg.budget
    if budget.mode not in SINGLE_RUN_MODES:
        raise ConfigError(f"plan_run plans one run; budget.mode={budget.mode} is a job of several (plan_job)")
    # the passes scored (config/checks): each curve point's (trainer.curve_r_eval, the trained r always among them: [r]
    # by default) and the finished model's (trainer.r_eval); then the accounting, in one trip down the layers
    passes = sorted({cfg.model.r, *r_eval_values(cfg.trainer.curve_r_eval, cfg.model.r)})
    r_evals = r_eval_values(cfg.trainer.r_eval, cfg.model.r)
    counted = accounting.account(cfg.model, {*passes, *r_evals})
    counts, F, F_causal = counted.counts, counted.F, counted.F_causal
    batch_tokens = cfg.budget.batch_size * cfg.model.seq_len
    steps = None  # a flops budget's steps come from F, or from a sampled run's draws
    if budget.mode != "flops":
        wanted = budget.tokens if budget.mode == "tokens" else budget.tokens_per_param * counts.N
        steps = max(1, round(wanted / batch_tokens))
    ledger = None
    if r_sampling.is_sampled(cfg.model):
        # its schedule of draws (model/r_sampling.py, keyed by the seed): in flops mode the steps whose realised FLOPs
        # come closest to the budget, else the steps above; its mean F is the plan's F, and C = F D the compute spent
        compute = budget.compute_flops if steps is None else None
        sched = r_sampling.schedule(cfg.model, cfg.seed, budget.batch_size, steps, compute, batch_tokens)
        F_causal *= float(sched.step_flops.mean()) / F  # MFU's causal count, scaled to the realised F
        F, steps = float(sched.step_flops.mean()), sched.steps
        ledger = r_sampling.ledger(cfg.model, sched, batch_tokens)
    elif budget.mode == "flops":
        steps = accounting.tokens_for_budget(budget.compute_flops, F, batch_tokens)[1]
    D = steps * batch_tokens
    D_target = int(budget.compute_flops / F) if budget.mode == "flops" else D
    return RunPlan(
        **counts.as_dict(),  # N_once, N_rec, N_pass, N, embedding, lm_head
        F=F,
        F_causal=F_causal,
        D=D,
        C=F * D,
        C_budget=budget.compute_flops if budget.mode == "flops" else None,
        steps=steps,
        batch_tokens=batch_tokens,
        D_target=D_target,
        r_ledger=ledger,
        curve_r_evals=passes,
        r_evals=r_evals,
        eval_flops=counted.eval_flops,
        D_ref=accounting.d_ref_tokens(cfg.model, cfg.optim.transfer_ref_size),  # last in the same trip down
    )


@dataclass(frozen=True)
class TrainingPlan:
    """What training one run derives from its config and its data, computed once (plan_training) before it trains and
    passed as the plan to the LightningModule, the Trainer and the run's record."""

    run: RunPlan  # N_once, N_rec, N, F, F_causal, D, C, steps, batch tokens, D_target
    batching: Batching  # world x device batch x gradient accumulation (loopscale/train/batching.py)
    memory: MemoryEstimate | None  # the predicted peak per device of a GPU run (loopscale/model/memory.py); None on CPU
    usable_memory: int | None  # what the plan device may allocate (GPU runs)
    lrs: dict[str, float]  # the peak lr of every optimizer group (loopscale/train/optim/lr_transfer.py)
    # the loss curve (`curve_evaluations`): the steps evaluated after, the FLOPs of one evaluation (its passes, and
    # trainer.r_eval's, with the forward FLOPs per token at each: the run's)
    curve_steps: frozenset[int]
    curve_flops_per_point: float
    data: dict | None = None  # what the run reads (run.json's `data`: RunData.record); None: planned without data

    def memory_record(self, plan_device: str) -> dict | None:
        """The predicted memory as run.json records it: the estimate's terms and peak, the device, its usable bytes."""
        if self.memory is None:
            return None
        return {**self.memory.as_dict(), "plan_device": plan_device, "usable": self.usable_memory}


def plan_training(cfg: TrainConfig, run: RunPlan | None = None, run_data: RunData | None = None, fork_steps=()):
    """The run's plan (`run`, else plan_run(cfg)) on its data (`run_data`, opened before the run), made before anything
    is built: the peak lrs at the plan's batch tokens, D_target and D_ref, the split over devices (ConfigError when the
    batch does not split) and a GPU run's predicted memory at it, what it reads (DataError when a packed set is too
    small for D), its loss curve on the final set (`curve_evaluations`; none without data): one trip down the layers."""
    run = plan_run(cfg) if run is None else run
    # D_target is 0 when C < F (less than one token): the lr transfer then takes the tokens trained, D
    lrs = peak_lrs(cfg.model, cfg.optim, run.batch_tokens, run.D_target or run.D, run.D_ref)
    corners = curve_corners(cfg, run.steps, fork_steps)
    batching, memory = split_and_memory(cfg.budget, cfg.model, cfg.trainer, cfg.optim.optimizer)
    usable = usable_memory(cfg.trainer.plan_device) if memory is not None else None
    T = cfg.model.seq_len
    data = run_data.record(cfg.data, run.steps, cfg.budget.batch_size, T) if run_data is not None else None
    val_sequences = (data.get("val_rows") or final_val_sequences(cfg.data, T)) if data is not None else 0
    steps, per_point = subset_curve(cfg.trainer, val_sequences, T, run.curve_flops_per_token, run.steps, run.C, corners)
    return TrainingPlan(run, batching, memory, usable, lrs, frozenset(steps), per_point, data)


def run_dir_of(cfg: TrainConfig) -> Path:
    """runs_dir/sweep/run_name: where the run's checkpoints, metrics and run.json live."""
    return Path(cfg.runs_dir) / cfg.sweep / cfg.run_name


def to_train_config(cfg: DictConfig | TrainConfig) -> TrainConfig:
    """Resolve interpolations and build the validated dataclasses (their __post_init__ checks run here)."""
    if isinstance(cfg, TrainConfig):
        return cfg
    return OmegaConf.to_object(cfg)


# --- forked warmup-stable-decay plans (loopscale/train/forks.py) -------------------------------------------


@dataclass(frozen=True)
class Branch:
    tag: str  # C2.5e11 | D1.2e5: the budget label of this point
    C_budget: float | None  # the budget asked for (fork_flops), else None
    steps: int  # the branch's total optimizer steps (stable part + cooldown)
    fork_step: int  # s_i: the parent step it starts from = first cooldown step
    D: int  # training tokens of the branch, cooldown included

    @property
    def cooldown_steps(self) -> int:
        return self.steps - self.fork_step


@dataclass(frozen=True)
class ForkPlan:
    """One model's forked plan (pure accounting; nothing is trained)."""

    F: float  # training FLOPs per token
    batch_tokens: int
    warmup_steps: int  # shared by the parent and every branch
    branches: tuple[Branch, ...]  # in increasing steps

    @property
    def parent_steps(self) -> int:
        return max(b.fork_step for b in self.branches)

    @property
    def fork_steps(self) -> list[int]:
        return sorted({b.fork_step for b in self.branches})

    @property
    def C_independent(self) -> float:
        """FLOPs of training every point as its own run: F sum_i D_i."""
        return self.F * sum(b.D for b in self.branches)

    @property
    def C_forked(self) -> float:
        """FLOPs of the forked plan: F (D_parent + sum_i cooldown tokens_i)."""
        steps = self.parent_steps + sum(b.cooldown_steps for b in self.branches)
        return self.F * steps * self.batch_tokens


def plan_forks(cfg: TrainConfig) -> ForkPlan:
    """The branches of a budget.mode=forks config (vocab_size as given; run_forks sets the real one)."""
    budget, optim = cfg.budget, cfg.optim
    if not (budget.fork_flops or budget.fork_tokens):
        raise ConfigError("plan_forks needs budget.fork_flops or budget.fork_tokens (budget.mode=forks)")
    if r_sampling.is_sampled(cfg.model):  # a branch's steps come from one F; a sampled run's from its draws
        raise ConfigError(
            f"model.r_sampling={cfg.model.r_sampling} needs budget.mode=flops or tokens (independent runs), not forks"
        )
    if optim.optimizer == "muonh" and optim.transfer == "published":  # lr ~ D^-0.32: one per branch, no shared parent
        raise ConfigError(
            "budget.mode=forks needs lrs that do not depend on D, and optim.transfer='published' "
            "scales the MuonH lr with each run's D: use optim.transfer=none (explicit lrs) for forks"
        )
    if optim.schedule != "wsd":
        raise ConfigError(
            f"budget.mode=forks needs optim.schedule=wsd (use optim=wsd), got {optim.schedule!r}: "
            "a branch is a warmup-stable-decay run whose stable part is shared"
        )
    F = accounting.flops_per_token(cfg.model)
    batch_tokens = budget.batch_size * cfg.model.seq_len
    points = []  # (tag, C_budget, steps)
    if budget.fork_flops:
        for C in sorted(set(budget.fork_flops)):
            # the steps, then the tag: the accounting and the naming in one trip down the layers
            steps = accounting.tokens_for_budget(C, F, batch_tokens)[1]
            points.append((budget_tag("flops", C, None, None), C, steps))
    else:
        for D in sorted(set(budget.fork_tokens)):
            points.append((budget_tag("tokens", None, D, None), None, max(1, round(D / batch_tokens))))
    # warmup in absolute steps, shared by all branches: warmup_frac of the SHORTEST branch unless given
    shortest = min(steps for _, _, steps in points)
    n_warmup = schedule_warmup_steps(shortest, optim.warmup_frac, optim.warmup_steps)
    branches = []
    for tag, C, steps in points:
        fork = wsd_decay_start(steps, optim.decay_frac)
        if fork < max(1, n_warmup):
            raise ConfigError(
                f"fork point {tag} ({steps} steps) would fork at step {fork}, before the end of the "
                f"{n_warmup}-step warmup (or at step 0): lower optim.decay_frac or warmup, or drop it"
            )
        branches.append(Branch(tag=tag, C_budget=C, steps=steps, fork_step=fork, D=steps * batch_tokens))
    return ForkPlan(F=F, batch_tokens=batch_tokens, warmup_steps=n_warmup, branches=tuple(branches))


def curve_corners(cfg: TrainConfig, steps: int, fork_steps=()) -> tuple[list[int], int | None]:
    """The schedule's corners a run of `steps` evaluates its loss curve at (the warmup's end, a stable parent's
    `fork_steps`, a wsd cooldown's start: `curve_plan` keeps them), and that cooldown's start (None without one)."""
    warmup = schedule_warmup_steps(steps, cfg.optim.warmup_frac, cfg.optim.warmup_steps)
    cooldown = wsd_decay_start(steps, cfg.optim.decay_frac) if cfg.optim.schedule == "wsd" else None
    return [warmup, *fork_steps, *([cooldown] if cooldown is not None else [])], cooldown


def curve_evaluations(cfg: TrainConfig, run: RunPlan, val_sequences: int, fork_steps=()) -> tuple[list[int], float]:
    """(the optimizer steps after which the run evaluates its loss curve, the FLOPs of one evaluation) on a final set
    of `val_sequences` (data/heldout.py's `subset_curve`), each of `curve_r_evals` at its own forward FLOPs per token
    (accounting.eval_flops_at), within trainer.curve_share of the run's C (more r_evals: fewer steps)."""
    corners = curve_corners(cfg, run.steps, fork_steps)
    T, per_token = cfg.model.seq_len, run.curve_flops_per_token
    return subset_curve(cfg.trainer, val_sequences, T, per_token, run.steps, run.C, corners)


def r_eval_scoring_flops(cfg: TrainConfig, val_sequences: int) -> float:
    """The FLOPs of scoring the finished model at trainer.r_eval's other pass counts (train/testtime_eval.py): the
    final set of `val_sequences`, T tokens each, at each r_eval's own forward FLOPs per token; the trained r's
    score is the run's own validation (counted with it)."""
    others = [r for r in r_eval_values(cfg.trainer.r_eval, cfg.model.r) if r != cfg.model.r]
    return val_sequences * cfg.model.seq_len * sum(accounting.eval_flops_at(cfg.model, r) for r in others)


def parent_config(cfg: TrainConfig, plan: ForkPlan) -> TrainConfig:
    """The stable parent: warmup then constant peak lr for max_i s_i steps (a `tokens` run)."""
    budget = dataclasses.replace(cfg.budget, mode="tokens", tokens=plan.parent_steps * plan.batch_tokens)
    optim = dataclasses.replace(cfg.optim, schedule="constant", warmup_steps=plan.warmup_steps)
    return dataclasses.replace(cfg, budget=budget, optim=optim)


def branch_name(cfg: TrainConfig, branch: Branch) -> str:
    return f"{cfg.run_name}-{branch.tag}"


def branch_config(cfg: TrainConfig, plan: ForkPlan, branch: Branch) -> TrainConfig:
    """Branch i as an ordinary wsd run of steps_i steps with the shared warmup (what an independent run of
    the same point would be); run_forks starts it from the parent's fork checkpoint instead of from scratch."""
    if branch.C_budget is not None:
        budget = dataclasses.replace(cfg.budget, mode="flops", compute_flops=branch.C_budget)
    else:
        budget = dataclasses.replace(cfg.budget, mode="tokens", tokens=branch.D)
    optim = dataclasses.replace(cfg.optim, warmup_steps=plan.warmup_steps)
    return dataclasses.replace(
        cfg, budget=budget, optim=optim, run_name=branch_name(cfg, branch), point=f"{branch.tag}-d{cfg.model.d_model}"
    )
