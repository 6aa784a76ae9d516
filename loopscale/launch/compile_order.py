"""Which jobs of a sweep compile, and the order they start in, so that each model is compiled once and every
other job of it (its seeds, its other budgets, a relaunch) loads the graphs from the cache
(loopscale/train/compile_cache.py).

Jobs that train the same model share a graph key. `compile_first_order` starts the first job of every key
before any second one, longest first within each of the two groups (the last job to start then ends close
to the others, as before): with `seed=0,1,2` the first seed of each shape compiles while the other shapes'
first seeds do, and the later seeds find the cache warm. `compile_choices` resolves trainer.compile=auto for
every job by the rule of loopscale/train/compile_choice.py in that order, so a shape is compiled when its
jobs together pay for it; jobs with an explicit trainer.compile keep it.
"""

from __future__ import annotations

import copy
import dataclasses

from omegaconf import DictConfig, open_dict

from loopscale.config.schema import TrainConfig, with_vocab
from loopscale.launch.throughput import cached_throughput
from loopscale.train.batching import device_batching, on_gpu
from loopscale.train.compile_cache import is_warm
from loopscale.train.compile_choice import (
    SPEEDUP,
    CompileChoice,
    choose_for_sweep,
    eager_step_s_from_flops,
    saving_s,
)
from loopscale.train.job_plan import JobPlan, plan_job
from loopscale.train.plan import to_train_config


def planned(cfg: TrainConfig) -> JobPlan:
    """The job's plan with the data's vocabulary (what the tokenizer has; the planners' assumption): its steps,
    its FLOPs per token and its compiled-graph key (`JobPlan.compile_key`, whole-model compile)."""
    return plan_job(with_vocab(cfg, cfg.data.vocab_size))


def graph_key(cfg: TrainConfig) -> str:
    """The hash of the job's compiled-graph key: jobs with equal ones load each other's graphs."""
    return planned(cfg).graph_key


def compile_first_order(keys: list[str], tokens: list[int]) -> list[int]:
    """Job indices in start order: the longest job of each key (longest first: it compiles the key's graphs),
    then the others (longest first)."""
    by_length = sorted(range(len(keys)), key=lambda i: -tokens[i])  # stable: ties keep the sweep's order
    first: dict[str, int] = {}
    for i in by_length:
        first.setdefault(keys[i], i)
    leaders = set(first.values())
    return [i for i in by_length if i in leaders] + [i for i in by_length if i not in leaders]


def measured_eager_s(cfgs: list[TrainConfig], tokens: list[int]) -> list[float | None]:
    """Each CPU job's eager seconds (its tokens at the tokens/s a throughput probe measured for its shape on this
    machine, loopscale/launch/throughput.py: `plan` and `sweep` measure and cache them); None for GPU jobs, jobs
    not set to auto and shapes never probed (their choice then reads their FLOPs). Nothing is measured here: the
    pool's parent starts its sweep without loading torch."""

    out: list[float | None] = []
    for cfg, n in zip(cfgs, tokens):
        if cfg.trainer.compile != "auto" or on_gpu(cfg.trainer):
            out.append(None)
            continue
        cfg = with_vocab(cfg, cfg.data.vocab_size)
        batching = device_batching(cfg.budget, cfg.model, cfg.trainer, cfg.optim.optimizer)
        known = cached_throughput(cfg, batching.device_batch, cfg.trainer.num_threads or 1)
        out.append(None if known is None else n / known.tokens_per_s)
    return out


def compile_choices(
    cfgs: list[TrainConfig], order: list[int], eager_s: list[float | None] | None = None
) -> dict[int, CompileChoice]:
    """trainer.compile=auto resolved for each CPU job (index into cfgs) when the jobs start in `order`; jobs
    with another trainer.compile, or on GPUs, are left out (they keep theirs). eager_s: each job's eager
    seconds where a throughput probe measured them (`measured_eager_s`), else from its FLOPs."""

    auto = [i for i in order if cfgs[i].trainer.compile == "auto" and not on_gpu(cfgs[i].trainer)]
    keys, savings, warm = [], [], []
    for i in auto:
        job = planned(cfgs[i])  # steps: a forked job's parent and every cooldown
        keys.append(job.graph_key)
        measured = None if eager_s is None else eager_s[i]
        if measured is None:
            step_s = eager_step_s_from_flops(job.run.batch_tokens, job.run.F, cfgs[i].model.d_model)
        else:
            step_s = measured / max(1, job.steps)
        savings.append(saving_s(job.steps, step_s))
        warm.append(is_warm(job.compile_key))
    return dict(zip(auto, choose_for_sweep(keys, savings, warm)))


def schedule(cfgs: list[TrainConfig], tokens: list[int]) -> list[TrainConfig]:
    """The jobs in start order (compile_first_order), trainer.compile=auto resolved in each (compile_choices)."""

    order = compile_first_order([graph_key(cfg) for cfg in cfgs], tokens)
    choices = compile_choices(cfgs, order, measured_eager_s(cfgs, tokens))
    out = []
    for i in order:
        cfg = cfgs[i]
        if i in choices:
            cfg = dataclasses.replace(cfg, trainer=dataclasses.replace(cfg.trainer, compile=choices[i].compile))
        out.append(cfg)
    return out


def schedule_hydra_jobs(jobs: list, tokens: list[int | None]) -> list[int]:
    """The local pool's start order of Hydra job configs (DictConfigs; loopscale/launch/pool_launcher.py), with
    trainer.compile=auto resolved in each loopscale job's config (a job of another task keeps its config and
    its place by length)."""

    cfgs: list[TrainConfig | None] = []
    for job, job_tokens in zip(jobs, tokens):
        valid = job_tokens is not None  # None: a config that does not validate, run only to record why
        if valid and isinstance(job, DictConfig) and "model" in job and "budget" in job and "trainer" in job:
            plain = copy.deepcopy(job)
            with open_dict(plain):
                plain.pop("hydra", None)
            cfgs.append(to_train_config(plain))
        else:
            cfgs.append(None)
    keys = [f"job {i}" if cfg is None else graph_key(cfg) for i, cfg in enumerate(cfgs)]
    tokens = [1 if t is None else t for t in tokens]
    order = compile_first_order(keys, tokens)
    loopscale_jobs = [i for i in order if cfgs[i] is not None]
    ordered = [cfgs[i] for i in loopscale_jobs]
    eager_s = measured_eager_s(ordered, [tokens[i] for i in loopscale_jobs])
    choices = compile_choices(ordered, list(range(len(loopscale_jobs))), eager_s)
    for position, choice in choices.items():
        with open_dict(jobs[loopscale_jobs[position]]):
            jobs[loopscale_jobs[position]].trainer.compile = choice.compile
    return order


def compile_column(cfgs: list[TrainConfig], tokens: list[int], eager_s: list[float | None]) -> list[dict]:
    """Per job (in the given order) what `plan` / `sweep` show of its compile: `compile` (the label: 'compiles',
    'cached', 'eager', or an explicit trainer.compile) and `compile_s` (what the rule
    charges it), as the local pool would start the jobs (schedule); eager_s as for compile_choices."""
    order = compile_first_order([graph_key(cfg) for cfg in cfgs], tokens)
    choices = compile_choices(cfgs, order, eager_s)
    out = []
    for i, cfg in enumerate(cfgs):
        if i in choices:
            out.append({"compile": choices[i].label, "compile_s": choices[i].compile_s})
        else:
            mode = cfg.trainer.compile
            out.append({"compile": mode if mode else "eager", "compile_s": None})
    return out


def seed_cost(rows: list[dict]) -> dict | None:
    """What the seeds of a sweep cost (rows of `plan` / `sweep` with seed, compile and cpu_hours): the seeds,
    jobs per seed, and the CPU hours of the first seed and of each further one, a compiled job counted at
    1 / SPEEDUP of its probed eager hours plus its compile; None for a sweep of one seed."""

    seeds = sorted({row["seed"] for row in rows})
    if len(seeds) < 2:
        return None

    def hours(row: dict) -> float | None:
        if row.get("cpu_hours") is None:
            return None
        compiled = not str(row["compile"]).startswith("eager")
        return row["cpu_hours"] / SPEEDUP + (row.get("compile_s") or 0.0) / 3600 if compiled else row["cpu_hours"]

    per_seed = {}
    for seed in seeds:
        got = [hours(row) for row in rows if row["seed"] == seed]
        per_seed[seed] = None if any(h is None for h in got) else sum(got)
    later = [per_seed[s] for s in seeds[1:]]
    return {
        "seeds": seeds,
        "jobs_per_seed": len(rows) // len(seeds),
        "first_seed_cpu_h": per_seed[seeds[0]],
        "further_seed_cpu_h": None if any(h is None for h in later) else sum(later) / len(later),
    }
