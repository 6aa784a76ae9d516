"""loopscale/recipes/: every registered recipe is a model whose accounting is exact (parity at the r it is measured
at), reduces to the baseline at r = 1 where its design says so (the logits, with the baseline's weights), and is
taken by name by `loopscale params`, `loopscale sweep` and the law fit; the labels stay honest."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from loopscale.fit.fit_table import fit_table
from loopscale.fit.joint import fit_joint, joint_table
from loopscale.fit.runs_table import canonical_table
from loopscale.model.accounting import accounting_report, cpu_model, param_counts
from loopscale.model.transformer import LoopedTransformer
from loopscale.recipes import registry
from support.cli import run_cli
from support.parity import assert_parity
from support.train import tiny_model

# How each recipe's r = 1 model relates to the baseline's (the recipe's docstring says why), checked on the logits
# of its forms built at r = 1 with the baseline's weights: True = equal at init, False = a different function.
REDUCES = {
    "baseline": True,
    "tbptt": True,  # truncation needs r > 1: at r = 1 every pass has gradient
    "whole_stack": True,  # at r = 1 the whole stack is the dense stack (the layout applies at r > 1)
    "loop_index": True,  # p_0 = 0 and the injection's identity init
    "lora": True,  # B_0 = 0
    "parcae": False,  # u = 0.45 s_0 + 0.80 e_n with a random s_0
    "huginn": False,  # the sandwich norms, a random adapter and a random s_0
    "stable_residual": False,  # the block's writes scaled by lambda / sqrt(k) (equal only at lambda = sqrt(k))
    "hyper": None,  # hyper-connections need r > 1 (refused at r = 1): no r = 1 form to compare
}


def r1_forms(name: str, **options) -> dict:
    """The fields of a recipe's design forced at r = 1 (its injection and block forms, whatever r it applies at)."""
    recipe = registry.recipe(name)
    fields = {"block": recipe.block, "options": {**recipe.options, **options}, "recipe": "auto"}
    if recipe.injections:
        fields["injection"] = recipe.injections[0]
    if recipe.injections and recipe.injections[0] == "loop_index":
        fields["injection"] = "loop_index"
    return fields


def logits_with_baseline_weights(cfg) -> tuple[torch.Tensor, torch.Tensor]:
    """(baseline logits, the model's logits) with every parameter the two share copied from the baseline."""
    torch.manual_seed(0)
    base = LoopedTransformer(tiny_model(1))
    torch.manual_seed(1)
    model = LoopedTransformer(cfg)
    model.load_state_dict(base.state_dict(), strict=False)
    idx = torch.randint(0, cfg.vocab_size, (2, cfg.seq_len), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        return base(idx), model(idx)


def test_every_recipe_states_its_r1_reduction():
    assert set(REDUCES) == set(registry.names())
    assert registry.names(published=True) == ("baseline", "hyper", "tbptt")  # the paper's recipe and its probes


@pytest.mark.parametrize("name", [n for n, reduces in REDUCES.items() if reduces is not None])
def test_r1_reduces_to_the_baseline_where_the_design_says(name):
    base, model = logits_with_baseline_weights(tiny_model(1, **r1_forms(name)))
    assert torch.allclose(base, model, atol=1e-6) is REDUCES[name]
    recipe = registry.recipe(name)
    # the recipe's own r = 1 model is the baseline's exactly when its conventions apply at r > 1 only
    assert (tiny_model(1, name).recipe == "baseline") is (not recipe.own_dense)


def test_stable_residual_reduces_at_lambda_sqrt_k():
    k = tiny_model(1).n_rec
    base, model = logits_with_baseline_weights(tiny_model(1, **r1_forms("stable_residual", residual_lambda=k**0.5)))
    assert torch.allclose(base, model, atol=1e-5)


PARITY = [(n, r) for n in registry.names() for r in (1, 2) if r == 2 or registry.recipe(n).own_dense]


@pytest.mark.parametrize("name,r", PARITY, ids=[f"{n}-r{r}" for n, r in PARITY])
def test_every_recipe_is_exactly_accounted(name, r):
    cfg = tiny_model(r, name)
    assert cfg.recipe == name and registry.recipe(name).mismatch(cfg) is None
    assert_parity(cfg)


@pytest.mark.parametrize("name", registry.names())
def test_params_takes_every_recipe_by_name(name):
    out = run_cli(["params", "--recipe", name, "--r", "4"])
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report == json.loads(json.dumps(accounting_report(cpu_model(128, 4, name))))
    assert report["recipe"] == name and report["N"] == report["N_once"] + report["N_pass"] + report["N_rec"]


def test_sweep_counts_the_designs_grid_of_a_recipe():
    for name in ("lora", "huginn"):
        out = run_cli(["sweep", "experiment=designs_cpu", f"model.recipe={name}", "--count"])
        assert out.returncode == 0 and out.stdout.strip() == "16", out.stderr


def test_labels_stay_honest():
    """recipe=auto names a model after the recipe its fields are; a recipe's name on other fields is refused."""
    assert tiny_model(2, injection="parcae").recipe == "parcae"
    assert tiny_model(2, injection="huginn").recipe == "huginn-prenorm"  # Huginn's injection, not its block
    assert tiny_model(2, injection="huginn", block="sandwich").recipe == "huginn"
    assert tiny_model(4, n_prelude=0, n_coda=0).recipe == "baseline"  # whole_stack is named, never guessed
    with pytest.raises(ValueError, match=r"model.recipe='lora', but the model's fields \(block='prenorm'"):
        tiny_model(2, "lora", block="prenorm")
    stack = tiny_model(4, "whole_stack")
    assert (stack.n_prelude, stack.n_rec, stack.n_coda, stack.l_eff) == (0, 2, 0, 8)
    assert tiny_model(4, "whole_stack", n_prelude=0, n_coda=0, depth=8) == stack  # resolving again changes nothing
    assert param_counts(stack).N_once == 3 * 64 + 2 * 64 * 64  # the norms and the injection only


def test_the_joint_fit_takes_the_designs_by_name():
    """A designs table (per-pass parameters in two recipes) drawn from the looped-pass law with one phi per recipe:
    the joint fit recovers each recipe's phi, and the plain looped law refuses the table."""
    rng = np.random.default_rng(0)
    phis = {"baseline": 0.5, "lora": 0.7, "parcae": 0.3}
    rows = []
    for d in (96, 128, 192, 256, 384):
        for r in (1, 2, 4, 8):
            for recipe in phis if r > 1 else ("baseline",):
                cfg = cpu_model(d, r, recipe)
                counts = param_counts(cfg)
                for D in (2e7, 6e7, 2e8):
                    n = counts.N_once + counts.N_pass + r ** phis[recipe] * counts.N_rec
                    L = (1.8 + 400 * n**-0.3 + 900 * D**-0.32) * (1 + 0.001 * rng.standard_normal())
                    rows.append({"recipe": recipe, "r": r, **counts.as_dict(), "D": D, "L": L})
    raw = pd.DataFrame(rows)
    table, recipes = joint_table([canonical_table(raw, "looped-pass-joint")], "recipe")
    with np.errstate(all="ignore"):
        fit = fit_joint(table, "recipe", recipes, law_name="looped-pass-joint", profile=False, separate=False)
    assert {g: round(fit.params[f"phi[{g}]"], 1) for g in recipes} == phis
    with pytest.raises(ValueError, match="has no place for parameters used once per pass"):
        fit_table(canonical_table(raw[raw["recipe"] != "parcae"], "looped"), "looped")
