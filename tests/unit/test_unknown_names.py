"""Issue 57, item 1: a name no registry, config group or choice knows is refused where the config is checked
(loopscale/config/, errors.not_one_of), for every entry point, with the known names and the closest one; a name
of one's own still labels a design set by its fields. `loopscale-train` as a child process:
tests/system/test_train_one_line.py."""

from __future__ import annotations

import pytest

from loopscale.config.checks import check_choice
from loopscale.errors import UnknownName
from loopscale.recipes import registry
from support.cli import run_cli
from support.train import tiny_model


@pytest.mark.parametrize("r", [1, 2])
@pytest.mark.parametrize(
    "name, says", [("hugin", "did you mean 'huginn'?"), ("nonexistent_x", "describe the 'baseline'")]
)
def test_an_unregistered_recipe_on_a_registered_design_is_refused(name, says, r):
    with pytest.raises(UnknownName, match=f"model.recipe='{name}' is not a registered recipe") as refused:
        tiny_model(r, name)
    assert says in str(refused.value) and ", ".join(registry.names()) in str(refused.value)


def test_a_name_of_ones_own_still_labels_a_design_set_by_its_fields():
    assert tiny_model(2, "s_plus_e", injection="additive").recipe == "s_plus_e"
    assert tiny_model(1, "s_plus_e", injection="additive").recipe == "s_plus_e"
    with pytest.raises(UnknownName, match="did you mean 'parcae'"):  # ... but not a registered name's near miss
        tiny_model(2, "parcea", injection="additive")


@pytest.mark.parametrize(
    "field, value, fix",
    [("injection", "huginm", "huginn"), ("block", "sandwitch", "sandwich"), ("mlp", "swiglo", "swiglu")],
)
def test_every_form_and_choice_names_the_closest(field, value, fix):
    with pytest.raises(
        UnknownName, match=rf"{field}='{value}' is not allowed; choose one of .*\(did you mean '{fix}'\?\)$"
    ):
        tiny_model(2, **{field: value})
    with pytest.raises(UnknownName, match=r"choose one of 'adamw', 'muonh'$"):  # nothing close: no guess
        check_choice("optimizer", "sgd", ("adamw", "muonh"))


@pytest.mark.parametrize(
    "override, says",
    [
        ("model.recipe=nonexistent_x", "model.recipe='nonexistent_x' is not a registered recipe"),
        ("model.recipe=hugin", "(did you mean 'huginn'?"),
        ("model.block=sandwitch", "(did you mean 'sandwich'?)"),
        ("optim=adamx", "optim='adamx' is not a config of the group 'optim'; choose one of 'adamw', 'muonh'"),
        ("hydra/launcher=local_pol", "(did you mean 'local_pool'?)"),
        ("experiment=isodepth_cpu_dem", "(did you mean 'isodepth_cpu_demo'?)"),
        ("data.sorce=text", "DataConfig has no key 'sorce' (did you mean 'source'?)"),
    ],
)
def test_sweep_count_refuses_an_unknown_name_in_one_line(override, says):
    res = run_cli(["sweep", "experiment=isodepth_cpu_demo", override, "--count"])
    assert res.returncode == 2 and res.stdout == "", (res.stdout, res.stderr)
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith("loopscale sweep: error: ") and says in line, line


def test_a_command_line_choice_names_the_closest():
    res = run_cli(["fit", "table.csv", "--law", "lopped"])
    assert res.returncode == 2 and "invalid choice: 'lopped'" in res.stderr
    assert res.stderr.strip().endswith("(did you mean 'looped'?)")


@pytest.mark.parametrize("std", [-1, 0, "abc", float("nan")])
def test_a_parcae_state_std_that_is_no_std_is_a_config_error(std):
    """Issue 57: parcae_state_std=-1 failed with a traceback at model build."""
    from loopscale.errors import ConfigError

    with pytest.raises(ConfigError, match="model.options.parcae_state_std=.* must be a finite number > 0"):
        tiny_model(2, "parcae", options={"parcae_state_std": std})


def test_an_option_typo_names_the_closest():
    with pytest.raises(UnknownName, match=r"model.options has 'lora_rnk'.*\(did you mean 'lora_rank'\?\)$"):
        tiny_model(2, "lora", options={"lora_rnk": 8})


@pytest.mark.parametrize("label", ["lora2", "r1_baseline", "huginn_v2"])
def test_a_label_that_holds_a_recipes_whole_name_is_a_variant_not_a_near_miss(label):
    """docs/operations.md: a near miss (hugin) is refused, but a name of one's own that holds a registered name
    whole (lora2, r1_baseline: a variant's label) labels the design its fields set."""
    assert tiny_model(2, label, injection="additive").recipe == label


def test_the_pool_refuses_a_sweep_with_an_unknown_name_before_any_job_starts():
    """errors.UnknownName: a typo is no point of the sweep; the pool's job sizing (run before any job starts)
    raises it, where an invalid point of a known design (r = 0) is sized None and left to record why."""
    from loopscale.launch.pool_launcher import job_tokens
    from support.train import TINY, compose_cfg

    for typo in ("model.recipe=hugin", "model.block=sandwitch"):
        with pytest.raises(UnknownName):
            job_tokens(compose_cfg([*TINY, typo]))
    assert job_tokens(compose_cfg([*TINY, "model.r=0"])) is None
