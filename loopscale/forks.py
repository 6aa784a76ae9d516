"""Forked warmup-stable-decay sweeps: many (N, D) points of the law for the price of one run per model.

With budget.mode=forks a job trains, for one model, a list of token counts D_i (or compute budgets C_i,
D_i = C_i / F rounded to whole batches) this way:

    parent   warmup (absolute steps, shared) -> constant peak lr up to max_i s_i, saving
             checkpoints/fork-<s_i>.ckpt after optimizer step s_i (weights, AdamW state, global step);
    branch i starts from fork-<s_i>.ckpt and runs the wsd schedule of a run of steps_i steps: the cooldown
             covers the last round(decay_frac x steps_i) steps, so s_i = steps_i - round(decay_frac x steps_i)
             (schedule.wsd_decay_start), and ends with the usual final validation and its own run.json.

Because the lr is a pure function of the step (schedule.py) and the batch of step s a pure function of
(seed, s, rank) (data.py), branch i is the same computation as an independent wsd run of steps_i steps with
the same warmup: its stable part is the parent's first s_i steps, bit for bit. Its record holds its true
D = steps_i x batch tokens (cooldown included), C = F x D and `parent` = the parent's run dir.

Cost (accounting, eq. C = F x D):  independent = F sum_i D_i;  forked = F (D_parent + sum_i D_cooldown,i)
with D_parent = max_i s_i x batch tokens. Per model the saving is about sum_i D_i / ((1 - c) max_i D_i +
c sum_i D_i) for cooldown fraction c, which never exceeds sum_i D_i / max_i D_i: token counts a factor 2
apart save at most 1.75x whatever c (1.52x at c = 0.2); 2x needs closer counts, e.g. five a factor sqrt(2)
apart (2.06x at c = 0.2, loopscale/conf/grid/cpu_wsd.yaml). The parent writes fork_parent.json, never run.json, so
`collect` does not take it for a point of the law.

Layout: runs_dir/sweep/<run_name>/ is the parent (and the Hydra job dir); branch i is the sibling
runs_dir/sweep/<run_name>-<tag_i>, tag_i = C2.5e11 (fork_flops) or D1.2e5 (fork_tokens).
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loopscale import accounting
from loopscale.config import TrainConfig, budget_tag, with_vocab
from loopscale.records import PARENT_FILE, is_finished, read_record
from loopscale.schedule import warmup_steps as schedule_warmup_steps
from loopscale.schedule import wsd_decay_start

log = logging.getLogger("loopscale.forks")


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
    if budget.mode != "forks":
        raise ValueError(f"plan_forks needs budget.mode=forks, got {budget.mode!r}")
    if optim.optimizer == "muonh" and optim.transfer == "published":  # lr ~ D^-0.32: one per branch, no shared parent
        raise ValueError("budget.mode=forks needs lrs that do not depend on D, and optim.transfer='published' "
                         "scales the MuonH lr with each run's D: use optim.transfer=none (explicit lrs) for forks")
    if optim.schedule != "wsd":
        raise ValueError(f"budget.mode=forks needs optim.schedule=wsd (use optim=wsd), got {optim.schedule!r}: "
                         "a branch is a warmup-stable-decay run whose stable part is shared")
    F = accounting.flops_per_token(cfg.model)
    batch_tokens = budget.batch_size * cfg.model.seq_len
    points = []  # (tag, C_budget, steps)
    if budget.fork_flops:
        for C in sorted(set(budget.fork_flops)):
            points.append((budget_tag("flops", C, None, None), C, accounting.tokens_for_budget(C, F, batch_tokens)[1]))
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
            raise ValueError(f"fork point {tag} ({steps} steps) would fork at step {fork}, before the end of the "
                             f"{n_warmup}-step warmup (or at step 0): lower optim.decay_frac or warmup, or drop it")
        branches.append(Branch(tag=tag, C_budget=C, steps=steps, fork_step=fork, D=steps * batch_tokens))
    return ForkPlan(F=F, batch_tokens=batch_tokens, warmup_steps=n_warmup, branches=tuple(branches))


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
    return dataclasses.replace(cfg, budget=budget, optim=optim, run_name=branch_name(cfg, branch),
                               point=f"{branch.tag}-d{cfg.model.d_model}")


def run_forks(cfg: TrainConfig) -> dict[str, Any]:
    """Run (or resume, or skip) the parent and the branches of one model that cfg.budget.fork_stage asks
    for; return the parent's record with the branches' records under "branches".

    Resumable at every stage: a finished branch is skipped, an interrupted one resumes from its own
    last.ckpt, the parent is (re)run only while some wanted branch has neither a checkpoint of its own nor
    its fork checkpoint. A failed or diverged branch is recorded and the others still run; the first such
    error is raised at the end."""
    from loopscale.checkpoint import fork_checkpoint_path
    from loopscale.identity import IdentityMismatch, claim
    from loopscale.runlock import RunLocked
    from loopscale.shards import prepare
    from loopscale.train import (CHECKPOINT, fit_run, launching_rank, plan_run, run_dir_lock, run_dir_of,
                                 running_elsewhere)

    prepared = prepare(cfg.data, progress=cfg.trainer.progress)
    cfg = with_vocab(cfg, prepared.vocab_size)
    plan = plan_forks(cfg)
    parent_dir = run_dir_of(cfg)
    stage = cfg.budget.fork_stage
    tags = [b.tag for b in plan.branches]
    if stage == "all":
        wanted = list(plan.branches)
    elif stage == "parent":
        wanted = []
    elif stage in tags:
        wanted = [plan.branches[tags.index(stage)]]
    else:
        raise ValueError(f"budget.fork_stage={stage!r}: choose 'all', 'parent' or a branch tag: {', '.join(tags)}")

    # the parent dir must hold this model's parent (loopscale/identity.py); each branch dir is checked
    # when its turn comes, below
    parent_cfg = parent_config(cfg, plan)
    if launching_rank():
        claim(parent_dir, parent_cfg, restart=cfg.restart, record_file=PARENT_FILE)

    def fork_ckpt(branch: Branch) -> Path:
        return fork_checkpoint_path(parent_dir / CHECKPOINT.parent, branch.fork_step)

    def needs_fork(branch: Branch) -> bool:
        branch_dir = run_dir_of(branch_config(cfg, plan, branch))
        return not (is_finished(branch_dir) or (branch_dir / CHECKPOINT).exists() or fork_ckpt(branch).exists())

    parent_record = read_record(parent_dir, PARENT_FILE)
    parent_done = parent_record is not None and parent_record.get("status") == "done"
    missing = [b for b in wanted if needs_fork(b)]
    if stage == "parent" or missing:
        if parent_done:
            raise FileNotFoundError(f"{parent_dir} finished but fork checkpoints are gone: "
                                    f"{', '.join(str(fork_ckpt(b)) for b in missing)}; delete {PARENT_FILE} to redo it")
        if stage not in ("all", "parent"):
            raise FileNotFoundError(f"branch {stage} needs {fork_ckpt(missing[0])}: run budget.fork_stage=parent "
                                    "first (e.g. as the SLURM job this one depends on)")
        assert plan_run(parent_cfg).steps == plan.parent_steps
        log.info("stable parent %s: %d steps (warmup %d), forks at %s", parent_dir, plan.parent_steps,
                 plan.warmup_steps, plan.fork_steps)
        try:
            with run_dir_lock(parent_dir):
                parent_record = fit_run(parent_cfg, parent_dir, fork_steps=plan.fork_steps,
                                        record_file=PARENT_FILE, validate=False,
                                        extra_record={"role": "stable-parent", "fork_steps": plan.fork_steps,
                                                      "branches": [branch_name(cfg, b) for b in plan.branches],
                                                      "C_independent": plan.C_independent,
                                                      "C_forked": plan.C_forked})
        except RunLocked as err:  # another job trains this parent: its branches are that job's
            return running_elsewhere(err, parent_dir)
    records, first_error = [], None
    for branch in wanted:
        branch_cfg = branch_config(cfg, plan, branch)
        branch_dir = run_dir_of(branch_cfg)
        assert plan_run(branch_cfg).steps == branch.steps
        try:
            with run_dir_lock(branch_dir):
                if launching_rank():
                    claim(branch_dir, branch_cfg, restart=cfg.restart)
                if is_finished(branch_dir):
                    records.append(read_record(branch_dir))
                    continue
                log.info("branch %s: from %s, cooldown steps %d..%d", branch_dir, fork_ckpt(branch).name,
                         branch.fork_step, branch.steps)
                records.append(fit_run(branch_cfg, branch_dir, start_ckpt=fork_ckpt(branch),
                                       extra_record={"parent": str(parent_dir), "fork_step": branch.fork_step,
                                                     "role": "branch"}))
        except RunLocked as err:
            records.append(running_elsewhere(err, branch_dir))
        except IdentityMismatch as err:  # another config's branch: not touched, not ours to report as done
            log.error("branch %s: %s", branch_dir, err)
            first_error = first_error or err
        except Exception as err:  # recorded in the branch's run.json by fit_run; the other branches go on
            log.error("branch %s failed: %s", branch_dir, err)
            first_error = first_error or err
            records.append(read_record(branch_dir))
    if first_error is not None:
        raise first_error
    return {**(parent_record or {}), "branches": records}


# --- sweep labels ----------------------------------------------------------------------------------------

def parse_fork_point(point: str) -> tuple[list[float], int]:
    """A forked grid point 'C2.5e11_5e11_1e12-d64' -> ([2.5e11, 5e11, 1e12] FLOPs, d_model 64): one model
    (width) and the budgets its branches stop at, '_'-separated (',' would split a Hydra sweep)."""
    parts = dict((item[0], item[1:]) for item in str(point).split("-") if item)
    try:
        budgets = [float(x) for x in parts["C"].split("_")]
        width = int(parts["d"])
    except (KeyError, ValueError):
        raise ValueError(f"fork point {point!r} must look like 'C2.5e11_5e11_1e12-d64' (budgets, d_model)") from None
    return budgets, width


def register_fork_resolvers() -> None:
    """`${ls.fork_flops:${point}}` and `${ls.fork_width:${point}}` for loopscale/conf/grid/cpu_wsd.yaml."""
    from omegaconf import OmegaConf

    for name, fn in (("ls.fork_flops", lambda p: parse_fork_point(p)[0]),
                     ("ls.fork_width", lambda p: parse_fork_point(p)[1])):
        if not OmegaConf.has_resolver(name):
            OmegaConf.register_new_resolver(name, fn)
