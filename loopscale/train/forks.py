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
apart (2.06x at c = 0.2, sweeps/grid/cpu_wsd.yaml). The parent writes fork_parent.json, never run.json, so
`collect` does not take it for a point of the law.

Layout: runs_dir/sweep/<run_name>/ is the parent (and the Hydra job dir); branch i is the sibling
runs_dir/sweep/<run_name>-<tag_i>, tag_i = C2.5e11 (fork_flops) or D1.2e5 (fork_tokens).
"""

from __future__ import annotations

import logging
from pathlib import Path

from loopscale.config.schema import TrainConfig, with_vocab
from loopscale.data.run_data import RunData, usable
from loopscale.errors import ConfigError
from loopscale.train.checkpoint import fork_checkpoint_path
from loopscale.train.identity import IdentityMismatch, data_identity
from loopscale.train.job_plan import JobPlan, PointPlan, plan_job
from loopscale.train.lock import RunLocked
from loopscale.train.plan import CHECKPOINT, branch_name, plan_run, run_dir_of
from loopscale.train.run_json import (
    PARENT_FILE,
    RUN_FILE,
    ForkedJob,
    ForkKeys,
    RunRecord,
    claim_run_dir,
    is_finished,
    read_record_or_none,
)
from loopscale.train.runner import claimed_record, launching_rank, run_dir_lock, running_elsewhere, train_run

log = logging.getLogger("loopscale.train.forks")


def run_forks(cfg: TrainConfig, run_data: RunData | Exception, task_cfg=None) -> ForkedJob:
    """Run (or resume, or skip) the parent and the branches of one model that cfg.budget.fork_stage asks
    for; return the parent's record and the branches' records (a parent another job trains: its
    running-elsewhere record and no branch).

    Resumable at every stage: a finished branch (or a parent-only job whose parent finished) is skipped, an
    interrupted one resumes from its own last.ckpt, the parent is (re)run only while some wanted branch has
    neither a checkpoint of its own nor its fork checkpoint. A failed or diverged branch is recorded and the
    others still run; the first such error is raised at the end. `run_data`: the job's data, opened before it
    (`run_data.open_or_error`), for the parent and every branch. `task_cfg`: Hydra's composed config, saved into
    the parent dir's .hydra/ once that dir is claimed."""
    run_data = usable(run_data)  # data that cannot be opened ends the job here: no dir of it is claimed yet
    # the job planned once, with the data's vocabulary: its stable parent (`run_cfg`, `run`) and its points
    job = plan_job(with_vocab(cfg, run_data.vocab_size))
    data = data_identity(run_data)  # every claim below: the same config on the same data
    parent_dir = job.run_dir
    stage = job.cfg.budget.fork_stage
    wanted = _wanted_branches(job, stage)
    # the parent dir must hold this model's parent (loopscale/train/identity.py); each branch dir is checked
    # when its turn comes (_run_branch)
    if launching_rank():
        claim_run_dir(parent_dir, job.run_cfg, task_cfg, restart=cfg.restart, record_file=PARENT_FILE, data=data)

    def needs_fork(point: PointPlan) -> bool:
        branch_dir = run_dir_of(point.cfg)
        done = is_finished(branch_dir) or (branch_dir / CHECKPOINT).exists()
        return not (done or _fork_ckpt(parent_dir, point).exists())

    parent_record = read_record_or_none(parent_dir / PARENT_FILE)  # a garbage record: the parent resumes
    parent_done = parent_record is not None and parent_record.status == "done"
    missing = [p for p in wanted if needs_fork(p)]
    if stage == "parent" and parent_done:  # a finished parent-only job relaunched: skipped, as a finished run is
        return ForkedJob(parent_record, [])
    if stage == "parent" or missing:
        if parent_done:
            raise FileNotFoundError(
                f"{parent_dir} finished but fork checkpoints are gone: "
                f"{', '.join(str(_fork_ckpt(parent_dir, p)) for p in missing)}; delete {PARENT_FILE} to redo it"
            )
        if stage not in ("all", "parent"):
            raise FileNotFoundError(
                f"branch {stage} needs {_fork_ckpt(parent_dir, missing[0])}: run budget.fork_stage=parent "
                "first (e.g. as the SLURM job this one depends on)"
            )
        try:
            parent_record = _train_parent(job, parent_dir, run_data)
        except RunLocked as err:  # another job trains this parent: its branches are that job's
            return ForkedJob(running_elsewhere(err, parent_dir), [])
    records, first_error = _run_branches(job, wanted, parent_dir, run_data)
    if first_error is not None:
        raise first_error
    return ForkedJob(parent_record, records)


def _run_branches(job: JobPlan, wanted: list[PointPlan], parent_dir, run_data: RunData):
    """Each wanted branch in turn: its record (or the lock holder's, when another job trains it), and the
    first error of a branch that failed or belongs to another config (the others still run)."""
    records, first_error = [], None
    for point in wanted:
        branch_dir = run_dir_of(point.cfg)
        try:
            records.append(_run_branch(job, point, parent_dir, run_data))
        except RunLocked as err:
            records.append(running_elsewhere(err, branch_dir))
        except IdentityMismatch as err:  # another config's branch: not touched, not ours to report as done
            log.error("branch %s: %s", branch_dir, err)
            first_error = first_error or err
        except Exception as err:  # recorded in the branch's run.json by train_run; the other branches go on
            log.error("branch %s failed: %s", branch_dir, err)
            first_error = first_error or err
            records.append(read_record_or_none(branch_dir / RUN_FILE))
    return records, first_error


def _wanted_branches(job: JobPlan, stage: str) -> list[PointPlan]:
    """The branches budget.fork_stage asks for: all, none (the parent alone) or the one with that tag."""
    tags = [b.tag for b in job.forks.branches]
    if stage == "all":
        return list(job.points)
    if stage == "parent":
        return []
    if stage in tags:
        return [job.points[tags.index(stage)]]
    raise ConfigError(f"budget.fork_stage={stage!r}: choose 'all', 'parent' or a branch tag: {', '.join(tags)}")


def _fork_ckpt(parent_dir: Path, point: PointPlan) -> Path:
    return fork_checkpoint_path(parent_dir / CHECKPOINT.parent, point.fork_step)


def _train_parent(job: JobPlan, parent_dir: Path, run_data: RunData) -> RunRecord:
    """The stable parent under its lock, keeping a checkpoint at every fork step (RunLocked propagates)."""
    plan = job.forks
    log.info(
        "stable parent %s: %d steps (warmup %d), forks at %s",
        parent_dir,
        plan.parent_steps,
        plan.warmup_steps,
        plan.fork_steps,
    )
    summary = ForkKeys(
        role="stable-parent",
        fork_steps=plan.fork_steps,
        branches=[branch_name(job.cfg, b) for b in plan.branches],
        C_independent=plan.C_independent,
        C_forked=plan.C_forked,
    )
    with run_dir_lock(parent_dir):
        return train_run(
            job.run_cfg,
            parent_dir,
            run_data,
            fork_steps=plan.fork_steps,
            record_file=PARENT_FILE,
            validate=False,
            extra_record=summary,
        )


def _run_branch(job: JobPlan, point: PointPlan, parent_dir: Path, run_data: RunData) -> RunRecord:
    """One branch under its own lock: its record if finished, else trained from its fork checkpoint (or
    resumed from its own last.ckpt). RunLocked, IdentityMismatch and training errors propagate."""
    branch_dir = run_dir_of(point.cfg)
    assert plan_run(point.cfg).steps == point.steps
    with run_dir_lock(branch_dir):
        done = claimed_record(branch_dir, point.cfg, data_identity(run_data))
        if done is not None:
            return done
        start = _fork_ckpt(parent_dir, point)
        log.info("branch %s: from %s, cooldown steps %d..%d", branch_dir, start.name, point.fork_step, point.steps)
        extra = ForkKeys(parent=str(parent_dir), fork_step=point.fork_step, role="branch")
        return train_run(point.cfg, branch_dir, run_data, start_ckpt=start, extra_record=extra)
