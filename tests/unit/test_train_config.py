"""Training configuration without training: every config under loopscale/conf/ composes and validates, a typo
fails at composition with Hydra's error, budgets turn into tokens and steps by the accounting, and the
linear schedule ends at its final fraction."""

from __future__ import annotations

import math

import pytest
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from loopscale.config.dirs import config_dir
from loopscale.config.schema import OptimConfig
from loopscale.model import accounting
from loopscale.train.optim.schedule import lr_multiplier
from loopscale.train.plan import plan_run
from support.train import compose_cfg, train_config

GROUPS = ["model", "data", "optim", "budget", "trainer", "logger"]


@pytest.mark.parametrize(
    "group,option", [(g, p.stem) for g in GROUPS for p in sorted((config_dir() / g).glob("*.yaml"))]
)
def test_every_group_option_composes_and_validates(group, option):
    overrides = [f"{group}={option}"]
    if (group, option) == ("data", "text"):
        overrides.append("data.path=/some/corpus")  # the text source needs a path (??? in the YAML)
    if (group, option) == ("budget", "forks"):
        overrides += ["optim=wsd", "run_name=forks"]
    cfg = OmegaConf.to_object(compose_cfg(overrides))
    assert getattr(cfg, group) is not None


def test_a_typo_in_an_override_fails_at_composition():
    with pytest.raises(ConfigCompositionException, match="d_modle"):
        compose_cfg(["model.d_modle=128"])
    with pytest.raises(Exception, match="r"):  # a wrong type fails too, before any training
        compose_cfg(["model.r=four"])


def test_invalid_values_fail_with_the_field_named():
    with pytest.raises(ValueError, match="schedule"):
        train_config(["optim.schedule=cosine_annealing"])
    with pytest.raises(ValueError, match="bptt_k"):
        train_config(["model.r=2", "model.bptt_k=3"])


@pytest.mark.parametrize(
    "budget",
    [
        ["budget.mode=flops", "budget.compute_flops=3e12"],
        ["budget.mode=tokens", "budget.tokens=100000"],
        ["budget.mode=ratio", "budget.tokens_per_param=20"],
    ],
)
def test_budget_becomes_whole_batches_of_tokens(budget):
    cfg = train_config(["model=cpu", "model.r=4", *budget])
    plan = plan_run(cfg)
    batch_tokens = cfg.budget.batch_size * cfg.model.seq_len
    assert plan.batch_tokens == batch_tokens and plan.D == plan.steps * batch_tokens
    assert plan.F == accounting.flops_per_token(cfg.model) and math.isclose(plan.C, plan.F * plan.D)
    counts = accounting.param_counts(cfg.model)
    assert (plan.N_once, plan.N_rec, plan.N) == (counts.N_once, counts.N_rec, counts.N)
    wanted = {"flops": 3e12 / plan.F, "tokens": 100000, "ratio": 20 * counts.N}[cfg.budget.mode]
    assert abs(plan.D - wanted) <= batch_tokens  # rounded to whole batches


def test_linear_schedule_warms_up_then_decays_to_the_final_fraction():
    optim = OptimConfig(schedule="linear", warmup_frac=0.1, final_lr_frac=0.1)
    lrs = [lr_multiplier(s, 100, optim) for s in range(100)]
    assert lrs[0] == pytest.approx(0.1) and lrs[9] == pytest.approx(1.0)
    assert all(a >= b for a, b in zip(lrs[9:], lrs[10:]))
    # after the 10-step warmup the multiplier is 1 - 0.9 (s - 10) / 90: it would reach 0.1 at step 100, one
    # past the last, as the published schedule does, so the last step runs at 0.1 + 0.9 / 90
    assert lrs[10] == pytest.approx(1.0) and lrs[-1] == pytest.approx(0.1 + 0.9 / 90)


@pytest.mark.parametrize("key", ["hyper_lanes", "hyper_dynamic"])
def test_a_hyper_field_of_an_older_config_is_refused_with_its_option(key):
    """hyper-connections are configured as options now (model.options.hyper_lanes, like every newer design's):
    the old override is refused in one line that names the new one, before Hydra composes anything."""
    from loopscale.errors import ConfigError

    with pytest.raises(ConfigError, match=rf"^model\.{key} is a form option now .*: \+model\.options\.{key}=\.\.\.$"):
        train_config(["experiment=isodepth_hyper", f"model.{key}=3"])
    cfg = train_config(["experiment=isodepth_hyper", "model.r=2", "+model.options.hyper_lanes=3"])
    assert (cfg.model.injection, cfg.model.recipe, cfg.model.options) == ("hyper", "hyper", {"hyper_lanes": 3})
