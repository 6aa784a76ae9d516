"""What the loss curves cost an experiment (issue 55): each job's curve evaluations (trainer.curve_points,
thinned to trainer.curve_share) priced by the plan, against the FLOPs the job trains; no training.

    .venv/bin/python benchmarks/bench_curve_cost.py [--experiment isodepth_cpu_demo]

For a forked job: the parent's points (its fork steps among them) and each branch's own points after its fork,
against the parent's FLOPs plus each branch's cooldown (what the job trains). The points and the FLOPs per point
are `loopscale.train.plan.curve_evaluations`, what training evaluates.
"""

from __future__ import annotations

import argparse

from loopscale.data.heldout import final_val_sequences
from loopscale.launch.sweep import expand
from loopscale.train.plan import branch_config, curve_evaluations, parent_config, plan_forks, plan_run


def job_cost(cfg) -> tuple[int, float, float]:
    """(points, curve FLOPs, trained FLOPs) of one job."""
    val = final_val_sequences(cfg.data, cfg.model.seq_len)
    if cfg.budget.mode != "forks":
        run = plan_run(cfg)
        steps, per = curve_evaluations(cfg, run, val)
        return len(steps), len(steps) * per, run.C
    forks = plan_forks(cfg)
    parent = parent_config(cfg, forks)
    run = plan_run(parent)
    steps, per = curve_evaluations(parent, run, val, [b.fork_step for b in forks.branches])
    points, curve, trained = len(steps), len(steps) * per, run.C
    for b in forks.branches:
        branch = branch_config(cfg, forks, b)
        brun = plan_run(branch)
        own = [s for s in curve_evaluations(branch, brun, val)[0] if s > b.fork_step]
        points += len(own)
        curve += len(own) * curve_evaluations(branch, brun, val)[1]
        trained += brun.F * (brun.steps - b.fork_step) * brun.batch_tokens
    return points, curve, trained


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--experiment", default="isodepth_cpu_demo")
    args = p.parse_args()
    total_curve = total = 0.0
    for job in expand([f"experiment={args.experiment}"]):
        cfg = job.cfg
        points, curve, trained = job_cost(cfg)
        total_curve, total = total_curve + curve, total + trained
        print(
            f"  {cfg.run_name:<28} {points:>3} points  {curve:.3g} of {trained:.3g} FLOPs = "
            f"{100 * curve / trained:.2f}%"
        )
    print(
        f"{args.experiment}: curve evaluations {total_curve:.3g} FLOPs = {100 * total_curve / total:.2f}% "
        f"of {total:.3g}"
    )


if __name__ == "__main__":
    main()
