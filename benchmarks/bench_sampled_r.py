"""Sampled r against fixed r, in the same run: the cost per FLOP of training steps whose pass count is drawn
(model.r_sampling=poisson-lognormal, mean 4, per step; loopscale/model/r_sampling.py) against steps at a fixed r = 4,
eagerly and compiled. Under torch.compile a sampled-r run compiles each layer and keeps the loop over passes in
Python (one graph family whatever r is drawn: tests/unit/test_r_sampling.py counts them); the fixed-r run is timed
both that way (the same compile mode: the sampling's own cost) and compiled whole (its best mode on CPU).

    nice -n 10 .venv/bin/python benchmarks/bench_sampled_r.py [--steps 20] [--rounds 2] [--width 48] [--backend eager]

Prints seconds per step, FLOPs per step (the accounting's F at each step's draw x tokens) and seconds per TFLOP of
each mode, and the overhead of sampled r per FLOP (target <= 20%; looped_nanochat's published figure for sampled r
under torch.compile(dynamic=True) is 46-55% more wall time): the median over rounds of the ratio of the two modes'
rounds (each round times every mode back to back, so a pair sees the same load), beside the ratio of their best
rounds. Warm-up steps compile each mode's graphs first. One torch thread (BENCH_THREADS), as the pool's workers;
the machine is shared: say its load beside the numbers.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from loopscale.config.dirs import train_config
from loopscale.config.schema import with_vocab
from loopscale.data.shards import prepare
from loopscale.data.windows import batch_at
from loopscale.model import r_sampling as rs
from loopscale.train.lightning_module import LoopedLM
from loopscale.train.plan import plan_training

MODES = {  # name: (sampled r (poisson-lognormal, mean 4, per step) or fixed r = 4, trainer.compile)
    "fixed-eager": (False, "false"),
    "sampled-eager": (True, "false"),
    "fixed-blocks": (False, "blocks"),
    "sampled-blocks": (True, "blocks"),
    "fixed-model": (False, "model"),
}


def config(width: int, sampled: bool, compile_mode: str, backend: str = "inductor"):
    overrides = [
        f"trainer.compile_backend={backend}",
        "experiment=isodepth_cpu_demo",
        "budget.mode=tokens",
        "budget.tokens=1000000",
        f"model.d_model={width}",
        "model.r=4",
        f"trainer.compile={compile_mode}",
        "trainer.progress=false",
    ]
    if sampled:
        overrides += ["model.r_sampling=poisson-lognormal", "model.r_max=16"]
    return train_config(overrides)


class Runner:
    """One mode's model and optimizer, stepped by hand on the deterministic batches (benchmarks/step_timing.py's
    way), each step at its draw's pass count (fixed: r)."""

    def __init__(self, cfg, prepared):
        self.cfg = with_vocab(cfg, prepared.vocab_size)
        self.prepared = prepared
        plan = plan_training(self.cfg)
        torch.manual_seed(0)
        self.module = LoopedLM(self.cfg.model, self.cfg.optim, self.cfg.trainer, plan, seed=0)
        self.optimizer = self.module.configure_optimizers()["optimizer"]
        self.tokens = plan.run.batch_tokens
        self.step = 0

    def run(self, steps: int) -> tuple[float, float]:
        """(seconds, FLOPs) of `steps` training steps."""
        m = self.cfg.model
        seconds = flops = 0.0
        for _ in range(steps):
            n = rs.draw_step(m, 0, self.step) if rs.is_sampled(m) else m.r
            x, y = batch_at(self.prepared, self.step, 0, 0, self.cfg.budget.batch_size, m.seq_len)
            t0 = time.perf_counter()
            self.module.model(x, y, r=n, n_grad=rs.grad_passes_at(m, n)).backward()
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
            seconds += time.perf_counter() - t0
            flops += rs.train_flops_at(m, n) * self.tokens
            self.step += 1
        return seconds, flops


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20, help="timed steps per mode and round")
    p.add_argument("--warmup", type=int, default=12, help="steps before timing (compiles the graphs)")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--width", type=int, default=48)
    p.add_argument("--modes", default=",".join(MODES), help="comma-separated mode names")
    p.add_argument(
        "--backend",
        default="inductor",
        choices=["inductor", "eager"],
        help="torch.compile backend of the compiled modes: inductor (code generation), or eager (Dynamo's tracing, "
        "guards and recompiles without code generation: what a recompile per r costs, minutes faster to start)",
    )
    args = p.parse_args()
    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "1")))  # one thread: the pool runs one per worker
    modes = [m.strip() for m in args.modes.split(",")]
    prepared = prepare(config(args.width, False, "false").data, progress=False)
    runners = {name: Runner(config(args.width, *MODES[name], args.backend), prepared) for name in modes}
    for runner in runners.values():
        runner.run(args.warmup)
    per_round = {name: [] for name in modes}  # seconds per TFLOP of each round
    per_step = {}
    for _ in range(args.rounds):
        for name, runner in runners.items():
            seconds, flops = runner.run(args.steps)
            per_round[name].append(seconds / flops * 1e12)
            per_step[name] = (seconds / args.steps, flops / args.steps)
    print(
        f"load {os.getloadavg()[0]:.1f}; width {args.width}, backend {args.backend}, {args.steps} steps x "
        f"{args.rounds} rounds (modes alternating within each round)"
    )
    for name in modes:
        s, f = per_step[name]
        best, median = min(per_round[name]), statistics.median(per_round[name])
        print(
            f"{name:<16} {s * 1e3:8.1f} ms/step  {f / 1e9:6.2f} GFLOP/step  "
            f"s/TFLOP best {best:7.1f} median {median:7.1f}"
        )
    for sampled, fixed in (
        ("sampled-eager", "fixed-eager"),
        ("sampled-blocks", "fixed-blocks"),
        ("sampled-blocks", "fixed-model"),
    ):
        if sampled in per_round and fixed in per_round:
            # the two modes' rounds ran back to back: their ratio round by round sees the same machine load
            ratios = [a / b - 1 for a, b in zip(per_round[sampled], per_round[fixed])]
            print(
                f"overhead per FLOP, {sampled} vs {fixed}: median {100 * statistics.median(ratios):+.1f}% "
                f"(rounds {', '.join(f'{100 * x:+.0f}%' for x in ratios)}); best rounds "
                f"{100 * (min(per_round[sampled]) / min(per_round[fixed]) - 1):+.1f}%"
            )


if __name__ == "__main__":
    main()
