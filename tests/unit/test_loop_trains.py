"""The loop of every default r > 1 configuration trains: after a few optimizer steps the injection's weight that
reads the recurrent state is non-zero and the model's output depends on the pass count (a loop whose state is never
read computes r passes as one). The CPU default `linear` injection under optim=muonh failed both: MuonH keeps each
matrix at its initial Frobenius norm, and W_s starts at 0 (docs/results.md, "The demo's loop was inert"). Such a
pair is now refused where the config is checked (config/model.py, `check_optimizer_reaches`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from loopscale.config.schema import with_vocab
from loopscale.errors import ConfigError
from loopscale.train.job_plan import plan_job
from loopscale.train.lightning_module import LoopedLM
from loopscale.train.plan import plan_training
from support.train import train_config

EXPERIMENTS = sorted(p.stem for p in (Path(__file__).parents[2] / "sweeps" / "experiment").glob("*.yaml"))
# the defaults a user meets: the CPU and tiny models under either optimizer, and every shipped experiment at r = 2
# (the published model's experiments, 20 layers at T = 32 here, take ~20 s each on an idle core: slow)
PUBLISHED = {"isodepth", "isodepth_hyper", "isodepth_tbptt"}
DEFAULTS = [
    *(
        pytest.param([f"model={m}", "model.r=2", f"optim={o}"], id=f"model={m} optim={o}")
        for m in ("cpu", "tiny")
        for o in ("muonh", "adamw")
    ),
    *(
        pytest.param(
            [f"experiment={name}", "model.r=2"], id=name, marks=[pytest.mark.slow] if name in PUBLISHED else []
        )
        for name in EXPERIMENTS
    ),
]
STEPS = 3


def state_weight(model) -> torch.Tensor | None:
    """The injection's matrix on the recurrent state s: concat's s half of [W_e | W_s] on [e; s], linear's W_s;
    None for a form that reads s through scalars (hyper-connections' lanes)."""
    cfg = model.cfg
    if cfg.injection == "linear":
        return model.injection.from_s.weight
    return model.injection.weight[:, cfg.d_model :] if cfg.injection == "concat" else None


def trained(overrides: list[str]) -> LoopedLM:
    """A few MuonH or AdamW steps (the run's own optimizer and lrs, configure_optimizers) of the configuration shrunk
    to a width of two heads and T = 32 (the injection form and the optimizer are the configuration's)."""
    cfg = with_vocab(train_config([*overrides, "trainer.compile=false"]), 128)
    cfg = plan_job(cfg).points[0].cfg  # a forked job's first branch: one run's config
    model_cfg = replace(cfg.model, d_model=2 * cfg.model.head_dim, seq_len=32)
    cfg = replace(cfg, model=model_cfg)
    torch.manual_seed(0)
    lm = LoopedLM(cfg.model, cfg.optim, cfg.trainer, plan_training(cfg), cfg.seed)
    optimizer = lm.configure_optimizers()["optimizer"]
    tokens = torch.randint(0, 128, (4, cfg.model.seq_len + 1), generator=torch.Generator().manual_seed(0))
    for _ in range(STEPS):
        lm.model(tokens[:, :-1], tokens[:, 1:]).backward()
        optimizer.step()
        optimizer.zero_grad()
    return lm


@pytest.mark.parametrize("overrides", DEFAULTS)
def test_the_default_loop_reads_its_state_after_training(overrides):
    lm = trained(overrides)
    model = lm.model
    weight = state_weight(model)
    assert model.cfg.r > 1 and (weight is not None or model.cfg.injection == "hyper"), model.cfg.injection
    assert weight is None or weight.norm() > 0
    idx = torch.randint(0, 128, (2, model.cfg.seq_len), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert not torch.equal(model(idx, r=1), model(idx, r=model.cfg.r))


@pytest.mark.parametrize(
    "overrides, field",
    [
        (["model.r=2", "optim=muonh", "model.looped_injection=linear"], "model.looped_injection"),
        (["model.r=4", "optim=muonh", "model.injection=linear"], "model.injection"),
        (
            ["experiment=isodepth_cpu_demo", "optim=muonh", "model.r=2", "model.looped_injection=linear"],
            "model.looped_inj",
        ),
        (["model.r=2", "optim=muonh", "model.injection=loop_index", "model.looped_injection=linear"], "model.inj"),
    ],
)
def test_a_matrix_muonh_cannot_move_is_refused_with_the_fix(overrides, field):
    with pytest.raises(ConfigError, match=rf"^{field}\S*=\S+ with optim=muonh: .*from_s.weight starts at zero") as err:
        train_config(overrides)
    assert "=concat" in str(err.value) and "\n" not in str(err.value)


def test_adamw_trains_the_linear_injection_so_it_is_not_refused():
    lm = trained(["model.r=2", "optim=adamw", "model.looped_injection=linear"])
    assert lm.model.cfg.injection == "linear" and state_weight(lm.model).norm() > 0
