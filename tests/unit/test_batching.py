"""Device batch and gradient accumulation: derived per run in one place (loopscale/train/batching.py), the published
rule on every point of the published grid, clear errors when the numbers do not divide, and shown by
`loopscale sweep --json`."""

from __future__ import annotations

import json

import pytest

from loopscale.cli import main as cli_main
from loopscale.launch.sweep import expand
from loopscale.train.batching import device_batching
from support.train import train_config

PUBLISHED_TOKENS_PER_STEP = 262_144


def published_rule(size: int) -> int:
    """docs/design.md, "The published recipe" (Batch): device batch 32, 16 from s = 18, 8 from s = 30."""
    return 8 if size >= 30 else 16 if size >= 18 else 32


def test_every_isodepth_point_gets_the_published_device_batch_and_keeps_the_step_tokens():
    jobs = expand(["experiment=isodepth"])
    assert len(jobs) == 116
    sizes = set()
    for job in jobs:
        cfg = job.cfg
        size = int(cfg.point.split("-s")[1])  # the point's paper size s (e.g. C1e18-s10)
        sizes.add(size)
        b = device_batching(cfg.budget, cfg.model, cfg.trainer)
        assert b.device_batch == published_rule(size), (cfg.run_name, b)
        assert b.world * b.device_batch * b.grad_accum * cfg.model.seq_len == PUBLISHED_TOKENS_PER_STEP, cfg.run_name
    assert {published_rule(s) for s in sizes} == {32, 16, 8}  # the grid spans all three rules


def test_auto_is_capped_at_the_per_device_share_and_int_and_grad_accum_override():
    cpu = train_config(["model=tiny", "budget.batch_size=16"])
    assert device_batching(cpu.budget, cpu.model, cpu.trainer).grad_accum == 1  # 16 < 32: no accumulation
    b = train_config(["model=tiny", "budget.batch_size=16", "budget.device_batch=4"])
    assert (
        device_batching(b.budget, b.model, b.trainer).device_batch,
        device_batching(b.budget, b.model, b.trainer).grad_accum,
    ) == (4, 4)
    g = train_config(["model=tiny", "budget.batch_size=16", "budget.grad_accum=2"])
    assert (
        device_batching(g.budget, g.model, g.trainer).device_batch,
        device_batching(g.budget, g.model, g.trainer).grad_accum,
    ) == (8, 2)
    ddp = train_config(["model=tiny", "budget.batch_size=16", "trainer=ddp_cpu"])
    batching = device_batching(ddp.budget, ddp.model, ddp.trainer)
    assert (batching.world, batching.device_batch, batching.grad_accum) == (2, 8, 1)


def test_batches_that_do_not_divide_fail_naming_the_numbers():
    cfg = train_config(["model=paper", "model.d_model=384", "budget.batch_size=48"])  # 48 / 32 does not divide
    with pytest.raises(ValueError, match=r"batch_size=48.*device batch 32"):
        device_batching(cfg.budget, cfg.model, cfg.trainer)
    cfg = train_config(["model=tiny", "budget.batch_size=16", "budget.grad_accum=3"])
    with pytest.raises(ValueError, match="grad_accum=3"):
        device_batching(cfg.budget, cfg.model, cfg.trainer)
    cfg = train_config(["model=tiny", "budget.batch_size=16", "budget.grad_accum=2", "budget.device_batch=8"])
    with pytest.raises(ValueError, match="not both"):
        device_batching(cfg.budget, cfg.model, cfg.trainer)
    with pytest.raises(ValueError, match="device_batch"):
        train_config(["budget.device_batch=-4"])


def test_sweep_json_shows_the_split(capsys):
    assert cli_main(["sweep", "experiment=isodepth", "point=C2.15e19-s34,C1e18-s10", "model.r=1", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["d_model"], r["device_batch"], r["grad_accum"]) for r in rows] == [(2176, 8, 16), (640, 32, 4)]
