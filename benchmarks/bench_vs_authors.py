"""The CPU training step against the authors' released code at equal work: tokens/s of forward + backward +
optimizer step (MuonH on the matrices, AdamW on the rest), one torch thread, their architecture.

    .venv/bin/python benchmarks/bench_vs_authors.py --authors /path/to/looped-lm-scaling \
        [--widths 64 128] [--steps 10] [--repeats 3] [--arithmetic fp32 bf16] [--modes eager ours-compiled] \
        [--profile]

The authors' code is read from --authors (a checkout of kschwethelm/looped-lm-scaling); nothing in loopscale
needs it. Their config: the published layout 2-4-2 at r = 4 with the concat injection ("inject_init_prelude"),
full backprop, relu^2, soft-cap 15, untied head, the paper init; at the CPU grid's size (head dim 32, T = 128,
batch 16, a 512-token vocabulary). Both sides train the same batches, each from its own paper init (the same
distributions; the speed of a step does not depend on the values).

Arithmetic (`--arithmetic`): `bf16` is the published optimizer: their MuonAdamW as released (the
orthogonalisation in bf16) against loopscale's under model.precision=published, optim.ortho_dtype=bf16 (the
same arithmetic, bit for bit: tests/unit/test_authors_golden.py). `fp32` orthogonalises in fp32 on both sides
(theirs with `Tensor.bfloat16` made a float32 cast during the step, as the golden fixtures were made; ours is
loopscale's CPU default, optim.ortho_dtype=auto -> fp32). Modes (`--modes`): `eager` on both sides (their
torch.compile off through TORCHDYNAMO_DISABLE, as their own tests run on CPU); `ours-compiled`: loopscale's model
compiled (trainer.compile=model, what compile=auto trains a long CPU run with) against theirs eager;
`both-compiled`: their step as their base_train.py runs it (torch.compile of the model, their compiled fused
optimizer steps) against ours compiled (on torch 2.13's CPU Inductor their compiled Muon step fails,
pytorch/pytorch#196570); `models-compiled`: both models compiled, their optimizer's compiled steps run eagerly (the
nearest to their base_train.py step this torch runs) against ours compiled. Compile time is left out (warm-up
steps; it goes to Inductor's cache).

Each measurement is one process holding both sides, their steps interleaved (one of each in turn) so a shared
machine's load hits both alike; `--repeats` processes, the best of each side kept. Printed: tokens/s per side,
ours / theirs, and each side's forward + backward and optimizer milliseconds per step.

`--profile`: after the timed steps, PROFILED_STEPS more of each side under torch.profiler, their CPU time split
into the matrix products (mm, addmm, bmm, baddbmm: MKL's GEMMs, the same products on both sides), attention's
kernels (SDPA) and everything else (elementwise kernels, the optimizer's bookkeeping, Python), in CPU ms per step
(the profiler's own cost included, so they sum to a little more than the timed step). Why: a step cannot be faster
than its GEMMs and attention, which both sides call with the same shapes (the model's and Newton-Schulz's), so
`theirs / (our GEMMs + attention)` bounds the ratio that any rewrite of our other code can reach.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

VOCAB, T, BATCH, HEAD_DIM = 512, 128, 16, 32
LAYOUT = dict(p=2, k=4, c=2, r=4)
LRS = dict(matrix=0.014, head=0.004, embedding=0.3, norm=0.005)
WARMUP_STEPS = 3
PROFILED_STEPS = 2
GEMM_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")


def authors_model(authors: str, d: int):
    sys.path.insert(0, str(Path(authors).resolve()))
    from nanochat.gpt import GPT, GPTConfig

    config = GPTConfig(
        sequence_len=T,
        vocab_size=VOCAB,
        n_head=d // HEAD_DIM,
        n_kv_head=d // HEAD_DIM,
        n_embd=d,
        n_prelude=LAYOUT["p"],
        n_recur_block=LAYOUT["k"],
        n_coda=LAYOUT["c"],
        num_recur=LAYOUT["r"],
        bptt_k=LAYOUT["r"],
        input_injection="inject_init_prelude",
    )
    import torch

    torch.manual_seed(0)
    model = GPT(config)
    model.init_weights()
    return model


def loopscale_module(d: int, arithmetic: str, compiled: bool):
    """loopscale's LightningModule of the same model."""
    import torch

    from loopscale.config.model import ModelConfig
    from loopscale.config.schema import BudgetConfig, OptimConfig, TrainConfig, TrainerConfig
    from loopscale.train.lightning_module import LoopedLM
    from loopscale.train.plan import plan_training

    cfg = ModelConfig(
        vocab_size=VOCAB,
        d_model=d,
        head_dim=HEAD_DIM,
        n_prelude=LAYOUT["p"],
        n_rec=LAYOUT["k"],
        n_coda=LAYOUT["c"],
        r=LAYOUT["r"],
        injection="concat",
        seq_len=T,
        logit_softcap=15.0,
        init="paper",
        precision="published" if arithmetic == "bf16" else "fp32_stream",
    )
    optim = OptimConfig(
        optimizer="muonh",
        lr=LRS["matrix"],
        lr_head=LRS["head"],
        lr_embedding=LRS["embedding"],
        lr_norm=LRS["norm"],
        transfer="none",
        weight_decay=0.0,
        beta1=0.8,
        beta2=0.95,
        eps=1e-10,
        grad_clip=0.0,
        ortho_dtype="bf16" if arithmetic == "bf16" else "auto",
    )
    trainer = TrainerConfig(compile="model" if compiled else False)
    torch.manual_seed(0)
    budget = BudgetConfig(mode="tokens", tokens=100 * BATCH * T, batch_size=BATCH)  # a 100-step schedule
    plan = plan_training(TrainConfig(model=cfg, optim=optim, budget=budget, trainer=trainer))
    return LoopedLM(cfg, optim, trainer, plan)


def build(side: str, d: int, arithmetic: str, compiled: bool, authors: str, optimizer_compiled: bool = False):
    """(model, optimizer, parameters, optimizer-step context) of one side; `optimizer_compiled`: their optimizer's
    own torch.compile'd steps run compiled (else eagerly)."""
    import contextlib

    import torch

    if side == "authors":
        theirs = authors_model(authors, d)
        model = torch.compile(theirs) if compiled else theirs
        optimizer = theirs.setup_optimizer(
            unembedding_lr=LRS["head"], embedding_lr=LRS["embedding"], matrix_lr=LRS["matrix"], d_ref=d
        )
        orthogonalisation = fp32_orthogonalisation if arithmetic == "fp32" else contextlib.nullcontext

        @contextlib.contextmanager
        def patch():
            # their optimizer's compiled steps run eagerly except in `both-compiled` (Dynamo is on in every mode
            # but `eager`, for our model; released, their compiled Muon step fails on torch 2.13's CPU Inductor,
            # pytorch/pytorch#196570)
            stance = contextlib.nullcontext() if optimizer_compiled else torch.compiler.set_stance("force_eager")
            with stance, orthogonalisation():
                yield

        return model, optimizer, list(theirs.parameters()), patch
    module = loopscale_module(d, arithmetic, compiled)
    return module.model, module.configure_optimizers()["optimizer"], list(module.model.parameters()), None


def fp32_orthogonalisation():
    """The golden fixtures' patch of their optimizer: their bf16 cast made a float32 one."""
    import contextlib

    import torch

    @contextlib.contextmanager
    def patched():
        original = torch.Tensor.bfloat16
        torch.Tensor.bfloat16 = lambda self, *args, **kwargs: self.float()
        try:
            yield
        finally:
            torch.Tensor.bfloat16 = original

    return patched()


def step_split_ms(step, n_steps: int) -> dict:
    """CPU ms per step of `step()` (run n_steps times under torch.profiler) in GEMMs, attention and the rest."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(n_steps):
            step()
    events = prof.key_averages()
    total_us = sum(e.self_cpu_time_total for e in events)
    gemm_us = sum(e.self_cpu_time_total for e in events if e.key in GEMM_OPS)
    attention_us = sum(e.self_cpu_time_total for e in events if "scaled_dot_product" in e.key)
    split = {"gemm": gemm_us, "attention": attention_us, "other": total_us - gemm_us - attention_us}
    return {f"{k}_ms": v / 1e3 / n_steps for k, v in split.items()}


def measure(d: int, arithmetic: str, mode: str, authors: str, steps: int, profile: bool = False) -> dict:
    """Both sides' tokens/s, forward + backward and optimizer ms, in this process (run by main() in a child):
    their steps interleaved (one of each in turn, the first side alternating) so the machine's load hits both."""
    import contextlib

    import torch

    torch.set_num_threads(1)
    compiled = {"loopscale": mode != "eager", "authors": mode in ("both-compiled", "models-compiled")}
    sides = {
        side: build(side, d, arithmetic, compiled[side], authors, optimizer_compiled=mode == "both-compiled")
        for side in ("loopscale", "authors")
    }
    g = torch.Generator().manual_seed(1)
    batches = [
        (torch.randint(0, VOCAB, (BATCH, T), generator=g), torch.randint(0, VOCAB, (BATCH, T), generator=g))
        for _ in range(WARMUP_STEPS + steps)
    ]
    spent = {side: [0.0, 0.0] for side in sides}

    def train_step(side: str, x, y) -> tuple[float, float]:
        """One step of `side`: (forward + backward s, optimizer s)."""
        model, optimizer, params, patch = sides[side]
        t0 = time.perf_counter()
        model(x, y).backward()
        t1 = time.perf_counter()
        with (patch or contextlib.nullcontext)():
            optimizer.step()
        for p in params:
            p.grad = None
        return t1 - t0, time.perf_counter() - t1

    for step, (x, y) in enumerate(batches):
        turn = list(sides) if step % 2 == 0 else list(reversed(sides))
        for side in turn:
            fwd_bwd_s, opt_s = train_step(side, x, y)
            if step >= WARMUP_STEPS:
                spent[side][0] += fwd_bwd_s
                spent[side][1] += opt_s
    out = {
        side: {
            "tokens_per_s": steps * BATCH * T / (fwd_bwd_s + opt_s),
            "fwd_bwd_ms": 1e3 * fwd_bwd_s / steps,
            "opt_ms": 1e3 * opt_s / steps,
        }
        for side, (fwd_bwd_s, opt_s) in spent.items()
    }
    if profile:
        for side in sides:
            out[side] |= step_split_ms(lambda side=side: train_step(side, *batches[-1]), PROFILED_STEPS)
    return out


def child(args: argparse.Namespace) -> None:
    spec = json.loads(args.child)
    print(json.dumps(measure(**spec, authors=args.authors, steps=args.steps, profile=args.profile)))


def run_child(spec: dict, args: argparse.Namespace) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    if spec["mode"] == "eager":
        env["TORCHDYNAMO_DISABLE"] = "1"  # their optimizer's torch.compile off: eager on both sides
    cmd = [sys.executable, __file__, "--authors", args.authors, "--steps", str(args.steps), "--child", json.dumps(spec)]
    cmd += ["--profile"] if args.profile else []
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{spec}: failed\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def best_of(a: dict, b: dict) -> dict:
    """The better of two measurements, field by field (the most tokens/s, the fewest ms)."""
    return {k: max(v, b[k]) if k == "tokens_per_s" else min(v, b[k]) for k, v in a.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--authors", required=True, help="a checkout of the authors' code (read only)")
    parser.add_argument("--widths", type=int, nargs="+", default=[64, 128])
    parser.add_argument("--arithmetic", nargs="+", default=["fp32", "bf16"], choices=["fp32", "bf16"])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--modes",
        nargs="+",
        default=["eager"],
        choices=["eager", "ours-compiled", "models-compiled", "both-compiled"],
        help="eager: both eager; ours-compiled: loopscale's model compiled (what trainer.compile=auto trains a long "
        "CPU run with), theirs eager; models-compiled: their model compiled too, their optimizer eager; "
        "both-compiled: their base_train.py's torch.compile of the model and optimizer (minutes cold)",
    )
    parser.add_argument(
        "--profile", action="store_true", help="also split each side's step into GEMMs, attention and the rest"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)
    print(
        f"1 thread, layout {LAYOUT}, head dim {HEAD_DIM}, T = {T}, batch {BATCH}, vocab {VOCAB}, {args.steps} steps "
        f"after {WARMUP_STEPS}, both sides' steps interleaved in one process, best of {args.repeats} processes; "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    print(
        f"{'d':>4} {'arith':>5} {'mode':>13} {'ours tok/s':>11} {'theirs tok/s':>13} {'ours/theirs':>11} "
        f"{'fwd+bwd ms ours/theirs':>23} {'opt ms ours/theirs':>19}"
    )
    rows = [(d, a, mode) for mode in args.modes for d in args.widths for a in args.arithmetic]
    for d, arithmetic, mode in rows:
        best = {"loopscale": None, "authors": None}
        for _ in range(args.repeats):
            got = run_child(dict(d=d, arithmetic=arithmetic, mode=mode), args)
            best = {side: got[side] if best[side] is None else best_of(best[side], got[side]) for side in best}
        ours, theirs = best["loopscale"], best["authors"]
        print(
            f"{d:>4} {arithmetic:>5} {mode:>13} {ours['tokens_per_s']:>11,.0f} "
            f"{theirs['tokens_per_s']:>13,.0f} {ours['tokens_per_s'] / theirs['tokens_per_s']:>11.2f} "
            f"{ours['fwd_bwd_ms']:>11.1f} / {theirs['fwd_bwd_ms']:<9.1f} "
            f"{ours['opt_ms']:>8.1f} / {theirs['opt_ms']:<8.1f}",
            flush=True,
        )
        if args.profile:
            print(
                f"{'':>24} CPU ms a step, GEMMs / attention / rest: "
                + "; ".join(
                    f"{name} {s['gemm_ms']:.1f} / {s['attention_ms']:.1f} / {s['other_ms']:.1f}"
                    for name, s in (("ours", ours), ("theirs", theirs))
                )
                + f"; theirs / (our GEMMs + attention) = "
                f"{(theirs['fwd_bwd_ms'] + theirs['opt_ms']) / (ours['gemm_ms'] + ours['attention_ms']):.2f}",
                flush=True,
            )
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
