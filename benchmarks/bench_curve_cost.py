"""What the loss curves cost an experiment (issue 55): each job's curve evaluations (trainer.curve_points,
thinned to trainer.curve_share) priced by the plan, against the FLOPs the job trains; no training.

    .venv/bin/python benchmarks/bench_curve_cost.py [--experiment isodepth_cpu_demo]

For a forked job: the parent's points (its fork steps among them) and each branch's own points after its fork,
against the parent's FLOPs plus each branch's cooldown (what the job trains). The points and the FLOPs per point
are `loopscale.train.plan.curve_evaluations`, what training evaluates (`loopscale.train.job_plan.curve_cost`, which
the launch estimates count too; trainer.curve_r_eval's passes each at their own forward FLOPs).
"""

from __future__ import annotations

import argparse

from loopscale.data.heldout import final_val_sequences
from loopscale.launch.sweep import expand
from loopscale.train.job_plan import curve_cost, plan_job


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--experiment", default="isodepth_cpu_demo")
    args = p.parse_args()
    total_curve = total = 0.0
    for expanded in expand([f"experiment={args.experiment}"]):
        cfg = expanded.cfg
        job = plan_job(cfg)
        points, curve = curve_cost(job, final_val_sequences(cfg.data, cfg.model.seq_len))
        trained = job.flops  # the parent's FLOPs plus each branch's cooldown (a single run: its C)
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
