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

from loopscale.config.schema import TrainConfig, with_vocab
from loopscale.train.compile_cache import compile_key, is_warm, key_hash
from loopscale.train.compile_choice import (
    COMPILED_MODE,
    CompileChoice,
    choose_for_sweep,
    eager_step_s_from_flops,
    saving_s,
)


def graph_key(cfg: TrainConfig) -> str:
    """The job's compiled-graph key (compile_cache.compile_key of its model, whole-model compile)."""
    return key_hash(compile_key(cfg.model, COMPILED_MODE, cfg.trainer.compile_backend))


def compile_first_order(keys: list[str], tokens: list[int]) -> list[int]:
    """Job indices in start order: the first job of each key (longest first), then the others (longest first)."""
    first: dict[str, int] = {}
    for i, key in enumerate(keys):
        first.setdefault(key, i)
    leaders = set(first.values())
    by_length = sorted(range(len(keys)), key=lambda i: -tokens[i])  # stable: ties keep the sweep's order
    return [i for i in by_length if i in leaders] + [i for i in by_length if i not in leaders]


def job_steps(cfg: TrainConfig) -> tuple[int, float]:
    """(optimizer steps the job trains, FLOPs per token): a forked job's parent and every cooldown."""
    from loopscale.train.plan import plan_forks, plan_run

    cfg = with_vocab(cfg, cfg.data.vocab_size)
    plan = plan_run(cfg)
    if cfg.budget.mode == "forks":
        return round(plan_forks(cfg).C_forked / plan.F / plan.batch_tokens), plan.F
    return plan.steps, plan.F


def compile_choices(cfgs: list[TrainConfig], order: list[int]) -> dict[int, CompileChoice]:
    """trainer.compile=auto resolved for each CPU job (index into cfgs) when the jobs start in `order`; jobs
    with another trainer.compile, or on GPUs, are left out (they keep theirs)."""
    from loopscale.train.batching import on_gpu

    auto = [i for i in order if cfgs[i].trainer.compile == "auto" and not on_gpu(cfgs[i].trainer)]
    keys, savings, warm = [], [], []
    for i in auto:
        steps, F = job_steps(cfgs[i])
        step_tokens = cfgs[i].budget.batch_size * cfgs[i].model.seq_len
        keys.append(graph_key(cfgs[i]))
        savings.append(saving_s(steps, eager_step_s_from_flops(step_tokens, F)))
        warm.append(is_warm(compile_key(cfgs[i].model, COMPILED_MODE, cfgs[i].trainer.compile_backend)))
    return dict(zip(auto, choose_for_sweep(keys, savings, warm)))


def schedule(cfgs: list[TrainConfig], tokens: list[int]) -> list[TrainConfig]:
    """The jobs in start order (compile_first_order), trainer.compile=auto resolved in each (compile_choices)."""
    import dataclasses

    order = compile_first_order([graph_key(cfg) for cfg in cfgs], tokens)
    choices = compile_choices(cfgs, order)
    out = []
    for i in order:
        cfg = cfgs[i]
        if i in choices:
            cfg = dataclasses.replace(cfg, trainer=dataclasses.replace(cfg.trainer, compile=choices[i].compile))
        out.append(cfg)
    return out


def schedule_hydra_jobs(jobs: list, tokens: list[int]) -> list[int]:
    """The local pool's start order of Hydra job configs (DictConfigs; loopscale/launch/pool_launcher.py), with
    trainer.compile=auto resolved in each loopscale job's config (a job of another task keeps its config and
    its place by length)."""
    import copy

    from omegaconf import DictConfig, open_dict

    from loopscale.train.plan import to_train_config

    cfgs: list[TrainConfig | None] = []
    for job in jobs:
        if isinstance(job, DictConfig) and "model" in job and "budget" in job and "trainer" in job:
            plain = copy.deepcopy(job)
            with open_dict(plain):
                plain.pop("hydra", None)
            cfgs.append(to_train_config(plain))
        else:
            cfgs.append(None)
    keys = [f"job {i}" if cfg is None else graph_key(cfg) for i, cfg in enumerate(cfgs)]
    order = compile_first_order(keys, tokens)
    loopscale_jobs = [i for i in order if cfgs[i] is not None]
    choices = compile_choices([cfgs[i] for i in loopscale_jobs], list(range(len(loopscale_jobs))))
    for position, choice in choices.items():
        with open_dict(jobs[loopscale_jobs[position]]):
            jobs[loopscale_jobs[position]].trainer.compile = choice.compile
    return order
