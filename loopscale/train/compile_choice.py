"""Whether compiling a CPU training job pays (trainer.compile=auto): the eager time it saves against what the
compile costs, a cache hit costing seconds (loopscale/train/compile_cache.py).

    saving_s = steps x eager_step_s x (1 - 1 / SPEEDUP)
    compile  when  saving_s > WARM_COMPILE_S                                     (the graphs are in the cache)
           or      saving_s + sum over later jobs of the key (saving_s - WARM_COMPILE_S)^+ > COLD_COMPILE_S

The later jobs are those of the same sweep that train the same model (seeds, other budgets of a forked
width...) and will load this job's graphs: a sweep compiles a shape once when its jobs together pay for it
(loopscale/launch/compile_order.py orders them so). A job alone (`loopscale-train` without a sweep) counts
only its own saving. eager_step_s comes from the CPU throughput probe where one measured the job's model
(`loopscale plan` / `sweep`, the local pool), else from its FLOPs at `eager_cpu_flops(d_model)`: one thread's eager
FLOP/s grows with the width while per-kernel overhead dominates the small matrices, up to the GEMMs' own rate.

The constants were measured on this project's CPU (AMD EPYC, one torch thread per process, the demo's
shapes d = 16-48, T = 64, batch 16, whole-model compile; benchmarks/bench_compile.py and docs/results.md,
issue 37's section); they are deliberately cautious: a wrong "eager" costs some speed, a wrong "compile"
can cost a short job most of its time.
"""

from __future__ import annotations

from dataclasses import dataclass

# Measured (docs/results.md, issue 37's section): compiled / eager step 1.22-1.73 at d = 16-48, r = 1-8;
# first compiled step 69 s (d16 r4, load < 7) to 82-450 s (load 5-12) cold, 3-21 s from the cache.
SPEEDUP = 1.4  # compiled / eager training-step tokens/s (fwd + bwd + MuonH step)
COLD_COMPILE_S = 120.0  # the first compile of a whole demo-sized model (training graphs), one thread
WARM_COMPILE_S = 15.0  # the same graphs loaded from the cache (Dynamo still traces the model)
# One thread's eager training FLOP/s (6N + attention a token, at the probe's steps, 2026-12-05, quiet machine):
# 7.3-9.4e9 at d16 and 2.2e10 at d48 (the demo's T = 64), 4.6-5.2e10 at d64 (model=tiny), 4.5-4.9e10 at d128
# (model=cpu, T = 128): ~EAGER_CPU_FLOPS_PER_WIDTH x d until the GEMMs' own rate. A single 4e9 before it was 1.8x
# (d16) to 12x (d128) too slow, so a short job of a wide model compiled for a saving it would not see.
EAGER_CPU_FLOPS_PER_WIDTH = 4.5e8
EAGER_CPU_PEAK_FLOPS = 4.6e10
COMPILED_MODE = "model"  # what auto compiles: the whole model (the loop unrolled), as the published runs


@dataclass(frozen=True)
class CompileChoice:
    compile: str | bool  # COMPILED_MODE or False
    warm: bool  # its graphs are expected in the cache when it starts
    saving_s: float  # the eager time compiling saves this job (before the compile cost)
    compile_s: float  # what compiling costs this job (COLD_COMPILE_S or WARM_COMPILE_S)

    @property
    def label(self) -> str:
        """'compiles' (cold), 'cached' (compiled from the cache) or 'eager', for plan / sweep tables."""
        if not self.compile:
            return "eager"
        return "cached" if self.warm else "compiles"


def eager_cpu_flops(d_model: int) -> float:
    """One torch thread's eager training FLOP/s for a model of width d_model (the constants' comment)."""
    return min(EAGER_CPU_PEAK_FLOPS, EAGER_CPU_FLOPS_PER_WIDTH * d_model)


def eager_step_s_from_flops(step_tokens: int, flops_per_token: float, d_model: int) -> float:
    """An eager CPU step's seconds from its FLOPs (6N + attention per token, eq. in docs/design.md) at
    `eager_cpu_flops(d_model)`, for a job no probe measured."""
    return step_tokens * flops_per_token / eager_cpu_flops(d_model)


def saving_s(steps: int, eager_step_s: float) -> float:
    """The eager time compiling saves over `steps` steps (before paying for the compile)."""
    return steps * eager_step_s * (1.0 - 1.0 / SPEEDUP)


def choose_compile(own_saving_s: float, warm: bool, later_savings_s: tuple[float, ...] = ()) -> CompileChoice:
    """The rule of the module docstring for one job: its own saving, whether its graphs are cached, and the
    savings of the later jobs of its sweep that would load its graphs."""
    if warm:
        pays = own_saving_s > WARM_COMPILE_S
        return CompileChoice(COMPILED_MODE if pays else False, True, own_saving_s, WARM_COMPILE_S if pays else 0.0)
    shared = sum(max(0.0, s - WARM_COMPILE_S) for s in later_savings_s)
    pays = own_saving_s + shared > COLD_COMPILE_S
    return CompileChoice(COMPILED_MODE if pays else False, False, own_saving_s, COLD_COMPILE_S if pays else 0.0)


def choose_for_sweep(keys: list[str], savings_s: list[float], warm: list[bool]) -> list[CompileChoice]:
    """Each job's choice in a sweep, jobs in launch order: the first job of a key compiles for every later job of
    that key (they load its graphs: warm), the later ones decide as cached jobs."""
    out, compiled = [], set()
    for i, key in enumerate(keys):
        if warm[i] or key in compiled:
            out.append(choose_compile(savings_s[i], True))
            continue
        later = tuple(savings_s[j] for j in range(i + 1, len(keys)) if keys[j] == key)
        choice = choose_compile(savings_s[i], False, later)
        if choice.compile:
            compiled.add(key)
        out.append(choice)
    return out
