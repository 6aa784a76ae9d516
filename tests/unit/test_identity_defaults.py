"""Fields added for the loop designs (model.block, model.options) and the lr grid (optim.lr_scale) leave every
earlier run's identity as it was: the hashes below are what main computed for these configs before the fields
existed (issues 39, 40), so a run dir
trained then still resumes, and is still skipped when done, after the update. A design that uses the new fields
gets an identity of its own."""

from __future__ import annotations

import pytest

from loopscale.config.schema import TrainConfig
from loopscale.train.identity import identity_hash, identity_of
from support.train import train_config

# identity_hash(identity_of(train_config(overrides))) on main at 5c60279, before block, options and lr_scale, of
# the identity without trainer.compile, which issue 37 took out of the identity (compiled or eager, one run; a
# run dir that recorded it resumes: identity.comparable leaves out fields the code no longer has). With it, the
# hashes there were f3f5a07fe4f5b524, b94c55840be55951, deaaea28ff86b05a, fd343a5b1dd1653a and c8c27b1861bd58b0.
BEFORE = {
    # the demo before its lr was tuned, with the linear injection it then trained (r = 1: no injection). Its r = 4
    # (19dc6a3c24cf8bc7 with model.looped_injection=linear) is refused now (optim=muonh cannot train linear's W_s);
    # the concat demo's r = 4 below hashed the same on main at 7748074, before model=cpu's default became concat
    # (and the grid's 16,384 val tokens: the demo reads the whole val split since 2026-12-08)
    (
        "experiment=isodepth_cpu_demo",
        "optim=muonh",  # the demo trains AdamW since 2026-12-07; these are its MuonH runs
        "model.r=1",
        "optim.lr_rule=1",
        "model.looped_injection=linear",
        "data.val_tokens=16384",
    ): "56fe871c1b17eaf2",
    (
        *("experiment=isodepth_cpu_demo", "optim=muonh", "model.r=4", "optim.lr_rule=1"),
        "data.val_tokens=16384",
    ): "d20c38f022c8b5aa",
    ("experiment=isodepth_hyper", "model.r=2"): "2d317a4cc2e828e5",
    # model=tiny's looped injection was linear until model=tiny and model=cpu defaulted to concat
    ("model=tiny", "model.r=2", "model.recipe=tbptt", "model.looped_injection=linear"): "d1cea22d57ae1f53",
}


def test_the_default_config_hashes_as_before():
    assert identity_hash(identity_of(TrainConfig())) == "2e1aa9876d5b83c6"


@pytest.mark.parametrize("overrides", list(BEFORE), ids=["-".join(o) for o in BEFORE])
def test_earlier_designs_hash_as_before(overrides):
    identity = identity_of(train_config(list(overrides)))
    assert "model.block" not in identity and not any(k.startswith("model.options") for k in identity)
    assert "optim.lr_scale" not in identity and "optim.lr_rule" not in identity
    assert identity_hash(identity) == BEFORE[overrides]


def test_the_new_fields_count_when_a_design_sets_them():
    base = ["experiment=isodepth_cpu_demo", "optim=muonh", "model.r=4", "optim.lr_rule=1", "data.val_tokens=16384"]
    lora = identity_of(train_config([*base, "model.recipe=lora"]))
    assert lora["model.block"] == "lora" and "model.options.lora_rank" not in lora  # the form's default rank
    ranked = identity_of(train_config([*base, "model.recipe=lora", "+model.options.lora_rank=8"]))
    assert ranked["model.options.lora_rank"] == 8 and identity_hash(ranked) != identity_hash(lora)
    sandwich = identity_of(train_config([*base, "model.recipe=huginn"]))
    assert sandwich["model.block"] == "sandwich" and identity_hash(sandwich) != BEFORE[tuple(base)]


def test_hyper_options_hash_as_the_fields_they_were():
    """model.hyper_lanes / hyper_dynamic became the hyper form's options (model.options.*): a run's identity and
    its compiled-graph key still hold them as the fields they were, so a hyper run dir (and a cached graph) from
    before the move keeps its hash; a record's config written then reads the same."""
    import dataclasses

    from loopscale.train.compile_cache import compile_key

    new = train_config(["experiment=isodepth_hyper", "model.r=2", "+model.options.hyper_lanes=3"])
    old = dataclasses.asdict(new)
    old["model"] = {**old["model"], "options": {}, "hyper_lanes": 3, "hyper_dynamic": False}
    assert identity_of(new) == identity_of(old) and identity_of(new)["model.hyper_lanes"] == 3
    key = compile_key(new.model, "model")["model"]
    assert (key["hyper_lanes"], key["hyper_dynamic"], key["options"]) == (3, False, {})
