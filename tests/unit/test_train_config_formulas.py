"""The training side's rules pinned exactly (issue 58): the published device batch and its halvings
(loopscale/train/batching.py), the device peaks MFU divides by (train/mfu.py), the tokens a pool's bar is told
(train/step_progress.py), what a run's record says when it ends (train/recording.py), and the config's ranges,
defaults and normalisations (config/schema.py, config/checks.py, config/lr_rule.py). Expected values are
written out from the docstrings, docs/design.md and the datasheets, never by the helper under test."""

from __future__ import annotations

import math
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch

from loopscale.config.checks import check_positive, check_r_sampling
from loopscale.config.lr_rule import multiplier, rule_file, write_rule
from loopscale.config.model import ModelConfig
from loopscale.config.schema import BudgetConfig, DataConfig, OptimConfig, TrainConfig, TrainerConfig
from loopscale.errors import ConfigError
from loopscale.model.memory import estimate_memory, usable_memory
from loopscale.train import step_progress
from loopscale.train.batching import candidate_device_batches, published_device_batch, split_and_memory
from loopscale.train.lightning_module import Diverged
from loopscale.train.mfu import PEAK_BF16_FLOPS, mfu
from loopscale.train.recording import RecordedRun, record_curve
from loopscale.train.run_json import RunRecord
from support.train import train_config

# --- batching ----------------------------------------------------------------------------------------------------


def test_the_published_device_batch_steps_at_sizes_18_and_30_of_d_model_over_64_rounded_up():
    """docs/design.md (Batch): 32 sequences, 16 from size s = 18, 8 from s = 30; s = d_model / 64 rounded up."""
    cases = {64: 32, 1088: 32, 1089: 16, 1100: 16, 1152: 16, 1856: 16, 1857: 8, 1920: 8, 4096: 8}
    assert {d: published_device_batch(d) for d in cases} == cases  # 1089 / 64 = 17.02: size 18


def test_the_candidates_are_the_published_batch_capped_at_the_share_then_halvings_that_divide_it():
    small, wide = ModelConfig(d_model=128), ModelConfig(d_model=1920)  # published 32 and 8
    assert candidate_device_batches(small, 128) == [32, 16, 8, 4, 2, 1]
    assert candidate_device_batches(small, 24) == [24, 12, 6, 3]  # capped at the share; 3 is odd: no halving
    assert candidate_device_batches(small, 40) == [32]  # 16 does not divide 40
    assert candidate_device_batches(wide, 40) == [8, 4, 2, 1]
    assert candidate_device_batches(wide, 6) == [6, 3]


def _split(batch_size, devices=1, num_nodes=1, **budget):
    cfg = TrainConfig(
        model=ModelConfig(d_model=128),
        budget=BudgetConfig(batch_size=batch_size, **budget),
        trainer=TrainerConfig(devices=devices, num_nodes=num_nodes, strategy="ddp" if devices > 1 else "auto"),
    )
    return split_and_memory(cfg.budget, cfg.model, cfg.trainer)[0]


def test_the_split_is_world_times_device_batch_times_accumulation():
    with pytest.raises(ConfigError, match="world 2 x device batch 32 x T=256 = 16384 tokens"):
        _split(96, devices=2)  # 48 per process: on CPU auto is the published 32, which does not divide it
    b = _split(128, devices=2)  # 64 per process: 32 each, 2 micro-batches
    assert (b.world, b.device_batch, b.grad_accum) == (2, 32, 2)
    b = _split(24, devices=2, grad_accum=3)  # 12 per process over 3 micro-batches
    assert (b.world, b.device_batch, b.grad_accum) == (2, 4, 3)
    b = _split(192, devices=2, num_nodes=3)  # world = devices x nodes = 6: 32 per process, one micro-batch
    assert (b.world, b.device_batch, b.grad_accum) == (6, 32, 1)
    b = _split(40, device_batch=8)
    assert (b.device_batch, b.grad_accum) == (8, 5)
    with pytest.raises(ConfigError, match="multiple of the world size devices x num_nodes = 2"):
        _split(3, devices=2)
    with pytest.raises(ConfigError, match="multiple of the world size"):
        _split(1, devices=2)  # no sequence for the second process
    with pytest.raises(ConfigError, match="set budget.device_batch to a divisor of 40"):
        _split(40, device_batch=16)
    with pytest.raises(ConfigError, match="do not split into world 1 x budget.grad_accum=16"):
        _split(8, grad_accum=16)  # more micro-batches than sequences


def test_auto_on_a_gpu_takes_the_largest_candidate_that_fits_the_plan_device_else_the_smallest():
    chosen = []
    for d_model, card in ((1024, "NVIDIA L4"), (1024, "NVIDIA A100-SXM4-40GB"), (2560, "NVIDIA L4")):
        cfg = train_config(
            ["model=paper", f"model.d_model={d_model}", "budget.batch_size=128", "trainer.accelerator=gpu"]
            + [f"trainer.plan_device={card}"]
        )
        batching, memory = split_and_memory(cfg.budget, cfg.model, cfg.trainer)
        candidates = candidate_device_batches(cfg.model, 128)
        peaks = {c: estimate_memory(cfg.model, c, cfg.trainer.compile, "adamw", True, 1).peak for c in candidates}
        fits = [c for c in candidates if peaks[c] <= usable_memory(card)]
        assert batching.device_batch == (fits[0] if fits else candidates[-1]), (d_model, card, peaks)
        assert batching.grad_accum == 128 // batching.device_batch and memory.peak == peaks[batching.device_batch]
        chosen.append((batching.device_batch, candidates.index(batching.device_batch), bool(fits)))
    # the cases span the rule: a halving in the middle on either card, and one where none fits (the smallest)
    assert chosen[0][1] > chosen[1][1] > 0 and chosen[2][2] is False, chosen
    cpu = train_config(["model=paper", "model.d_model=1024", "budget.batch_size=128"])
    assert split_and_memory(cpu.budget, cpu.model, cpu.trainer) == (
        split_and_memory(cpu.budget, cpu.model, cpu.trainer)[0],
        None,
    )
    assert split_and_memory(cpu.budget, cpu.model, cpu.trainer)[0].device_batch == 32  # the published one on CPU


# --- mfu ---------------------------------------------------------------------------------------------------------


def test_the_device_peaks_are_the_datasheets_dense_bf16_figures():
    """NVIDIA's datasheets, dense (half the sparsity figure) bf16 tensor-core FLOP/s."""
    datasheet_tflops = {
        "NVIDIA H100 80GB HBM3": 989.4,
        "NVIDIA H100 PCIe": 756.5,
        "NVIDIA H100 NVL": 835.5,
        "NVIDIA H200": 989.4,
        "NVIDIA H200 NVL": 835.5,
        "NVIDIA GH200 480GB": 989.4,
        "NVIDIA A100-SXM4-80GB": 312,
        "NVIDIA A100-SXM4-40GB": 312,
        "NVIDIA A100 80GB PCIe": 312,
        "NVIDIA A100-PCIE-40GB": 312,
        "NVIDIA L40S": 362.05,
        "NVIDIA A10": 125,
        "NVIDIA L4": 121,
    }
    assert {name: peak / 1e12 for name, peak in PEAK_BF16_FLOPS.items()} == pytest.approx(datasheet_tflops)
    assert mfu(2e4, 3e9, 1e14, world=4) == pytest.approx(2e4 * 3e9 / 4e14)  # 0.15: the peak of all 4 devices


# --- step_progress ------------------------------------------------------------------------------------------------


def test_the_bar_is_told_each_batchs_tokens_times_the_processes():
    told = []
    step_progress.report_to(told.append)
    try:
        (callback,) = step_progress.progress_callbacks()
        batch = (torch.zeros(3, 7, dtype=torch.long), torch.zeros(3, 7, dtype=torch.long))  # 3 sequences of T = 7
        callback.on_train_batch_end(SimpleNamespace(world_size=2), None, None, batch, 0)
        assert told == [3 * 7 * 2]
    finally:
        step_progress.report_to(None)
    assert step_progress.progress_callbacks() == []


# --- recording -----------------------------------------------------------------------------------------------------


def _module(tokens_trained=0, last_train_loss=2.5):
    return SimpleNamespace(
        tokens_trained=tokens_trained,
        last_train_loss=last_train_loss,
        curve=[{"step": 4, "val_loss": 3.0}, {"step": 8, "val_loss": 2.9}],
        curve_evaluated=3,
        curve_flops_per_point=1.5e9,
        r_tally_record=lambda: {},
    )


def test_a_finished_run_records_its_loss_and_the_step_it_resumed_from(tmp_path):
    with RecordedRun(tmp_path, "run.json", RunRecord(run_name="x", step=0)) as run:
        run.trainer = SimpleNamespace(global_step=30, is_global_zero=True)
        run.finish(_module(tokens_trained=12 * 1024 + 700), batch_tokens=1024, val=torch.tensor(2.75))
    record = run.record
    assert (record.status, record.step, record.L, record.val_loss, record.train_loss) == ("done", 30, 2.75, 2.75, 2.5)
    assert record.resumed_from_step == 30 - 12  # whole batches this process trained, rounded down (12.7 -> 12)
    assert record.tokens_per_s == pytest.approx((12 * 1024 + 700) / record.wall_time_s)
    with RecordedRun(tmp_path, "run.json", RunRecord(run_name="y", step=0)) as run:
        run.trainer = SimpleNamespace(global_step=30, is_global_zero=True)
        run.finish(_module(tokens_trained=0, last_train_loss=math.nan), batch_tokens=1024, val=None)
    assert (run.record.train_loss, run.record.L, run.record.tokens_per_s, run.record.resumed_from_step) == (
        None,
        None,
        None,
        30,
    )


def test_a_run_that_stops_records_why_and_the_step_it_reached(tmp_path):
    cases = [
        (Diverged(17, "loss nan"), "diverged", 17),
        (KeyboardInterrupt(), "interrupted", 9),
        (RuntimeError("boom"), "failed", 9),
    ]
    for err, status, step in cases:
        with pytest.raises(type(err)):
            with RecordedRun(tmp_path, f"{status}.json", RunRecord(run_name="x", step=0)) as run:
                run.trainer = SimpleNamespace(global_step=9, is_global_zero=True)
                raise err
        assert (run.record.status, run.record.step) == (status, step)
        assert (tmp_path / f"{status}.json").is_file()
    assert run.record.reason == "RuntimeError: boom"
    with pytest.raises(RuntimeError):  # another rank: nothing written
        with RecordedRun(tmp_path, "rank1.json", RunRecord(run_name="x", step=0)) as run:
            run.trainer = SimpleNamespace(global_step=9, is_global_zero=False)
            raise RuntimeError("boom")
    assert not (tmp_path / "rank1.json").exists()


def test_the_curves_flops_are_its_evaluations_times_one_evaluations_flops():
    record = RunRecord(run_name="x", step=0)
    record_curve(record, _module())
    assert record.C_curve == pytest.approx(3 * 1.5e9)  # the evaluations made, not the curve's rows (2)
    assert [row["step"] for row in record.curve] == [4, 8]


# --- config: ranges, defaults, normalisations -------------------------------------------------------------------


def test_the_trainers_launch_defaults():
    """config/schema.py's documented defaults (the estimate's MFU and device, the curve's budget, r_eval auto)."""
    t = TrainerConfig()
    assert (t.assumed_mfu, t.plan_device, t.check_limits) == (0.4, "NVIDIA H100 80GB HBM3", True)
    assert (t.curve_points, t.curve_share, t.val_subset, t.r_eval, t.curve_r_eval) == (24, 0.05, 0.05, "auto", "off")
    assert (t.ckpt_every_steps, t.ckpt_every_minutes, t.val_every_steps, t.compile) == (50, 0.0, 0, False)
    o = OptimConfig()
    assert (o.warmup_frac, o.final_lr_frac, o.decay_frac, o.grad_clip, o.lr_scale, o.lr_rule) == (
        0.05,
        0.1,
        0.2,
        1.0,
        1.0,
        1.0,
    )
    assert (o.transfer_ref_size, o.transfer_ref_batch_tokens) == (10, 2**18)
    assert (BudgetConfig().batch_size, BudgetConfig().device_batch, BudgetConfig().grad_accum) == (16, "auto", None)


@pytest.mark.parametrize(
    "ok",
    [
        lambda: TrainerConfig(assumed_mfu=1.0),
        lambda: TrainerConfig(val_subset=1.0, curve_share=1.0, curve_points=0),
        lambda: OptimConfig(warmup_frac=1.0, final_lr_frac=0.0, decay_frac=1.0, grad_clip=0.0, momentum=0.0),
        lambda: OptimConfig(warmup_steps=0),
        lambda: TrainConfig(seed=2**32 - 1),
        lambda: DataConfig(val_fraction=0.999),
    ],
)
def test_the_ranges_include_their_closed_ends(ok):
    ok()


@pytest.mark.parametrize(
    "bad, match",
    [
        (lambda: TrainerConfig(assumed_mfu=0.0), "assumed_mfu"),
        (lambda: TrainerConfig(assumed_mfu=1.01), "assumed_mfu"),
        (lambda: TrainerConfig(val_subset=0.0), "val_subset"),
        (lambda: TrainerConfig(curve_share=0.0), "curve_share"),
        (lambda: TrainerConfig(curve_points=-1), "curve_points"),
        (lambda: TrainerConfig(val_every_steps=-1), "val_every_steps"),
        (lambda: OptimConfig(momentum=1.0), "momentum"),
        (lambda: OptimConfig(warmup_frac=1.01), "warmup_frac"),
        (lambda: OptimConfig(final_lr_frac=-0.01), "final_lr_frac"),
        (lambda: OptimConfig(grad_clip=-0.5), "grad_clip"),
        (lambda: OptimConfig(warmup_steps=-1), "warmup_steps"),
        (lambda: OptimConfig(optimizer="muonh", weight_decay=0.1), "no weight decay"),
        (lambda: OptimConfig(optimizer="muonh", weight_decay=0.0, width_scaling=True), "width_scaling"),
        (lambda: OptimConfig(lr_scale=0.0), "lr_scale"),
        (lambda: TrainConfig(seed=2**32), "seed"),
        (lambda: TrainConfig(seed=-1), "seed"),
        (lambda: DataConfig(val_fraction=1.0), "val_fraction"),
        (lambda: DataConfig(val_fraction=0.0), "val_fraction"),
        (lambda: BudgetConfig(mode="forks", fork_flops=[1e12], fork_tokens=[10]), "exactly one"),
        (lambda: BudgetConfig(mode="forks", fork_flops=[1e12, 0.0]), "every entry must be > 0"),
        (lambda: BudgetConfig(mode="tokens", tokens=None), "tokens"),
        (lambda: BudgetConfig(device_batch=True), "device_batch"),
        (lambda: BudgetConfig(device_batch=0), "device_batch"),
        (lambda: BudgetConfig(grad_accum=0), "grad_accum"),
    ],
)
def test_the_ranges_refuse_just_outside(bad, match):
    with pytest.raises(ConfigError, match=match):
        bad()


def test_compile_spellings_map_to_their_modes():
    spellings = {False: False, "false": False, "off": False, True: "blocks", "true": "blocks", "model": "model"}
    assert {k: TrainerConfig(compile=k).compile for k in spellings} == spellings
    with pytest.raises(ConfigError, match="compile="):
        TrainerConfig(compile="eager")


def test_check_positive_refuses_zero_nan_and_infinity():
    check_positive("x", 1e-300)
    for bad in (0, -1.0, math.nan, math.inf, None):
        with pytest.raises(ConfigError, match="finite number > 0"):
            check_positive("x", bad)


def test_variable_depth_fields_normalise_and_refuse_at_their_edges():
    base = ModelConfig(d_model=128, r=4)
    cfg = replace(base, r_sampling="uniform", r_set=[6, 2, 4.0, 2])  # normalised: sorted, once each, ints
    assert cfg.r_set == [2, 4, 6]
    check_r_sampling(SimpleNamespace(**{**vars(base), "r_max": 4}))  # r_max = r is allowed
    for changes, match in (
        ({"r_max": 3}, "r_max=3 must be >= r=4"),
        ({"r_sigma": 0.0}, "r_sigma"),
        ({"r_sampling": "uniform", "r_set": [2, 0]}, "r_set"),
        ({"r_sampling": "uniform", "r_set": [2.5]}, "r_set"),
        ({"r_sampling": "poisson-lognormal", "r": 1}, "needs r > 1"),
    ):
        with pytest.raises(ConfigError, match=match):
            check_r_sampling(SimpleNamespace(**{**vars(base), **changes}))
    check_r_sampling(SimpleNamespace(**{**vars(base), "r_sampling": "uniform", "r": 1, "r_set": [1, 2]}))


# --- lr_rule ---------------------------------------------------------------------------------------------------------


def test_a_width_transferred_multiplier_is_rounded_to_the_three_digits_run_names_carry(tmp_path, monkeypatch):
    conf = tmp_path / "conf"
    monkeypatch.setenv("LOOPSCALE_CONFIG_PATH", str(conf))
    write_rule(
        conf / "lr_rules" / "mine.yaml", "mine", "baseline", {4: 1.6}, {}, {"width_exponent": -0.8, "ref_width": 24}
    )
    assert multiplier("mine", "baseline", 4, 40) == 1.06  # 1.6 x (40 / 24)^-0.8 = 1.0633
    assert multiplier("mine", "baseline", "4", "24") == 1.6


def test_a_new_rule_lives_beside_its_experiment_else_in_the_last_directory(tmp_path):
    first, second, last = (tmp_path / n for n in ("first", "second", "last"))
    (second / "experiment").mkdir(parents=True)
    (second / "experiment" / "mine.yaml").write_text("# @package _global_\n")
    assert rule_file("mine", [first, second, last]) == second / "lr_rules" / "mine.yaml"
    assert rule_file("other", [first, second, last]) == last / "lr_rules" / "other.yaml"
    (last / "lr_rules").mkdir(parents=True)
    (last / "lr_rules" / "mine.yaml").write_text("multipliers: {}\n")
    assert rule_file("mine", [first, second, last]) == last / "lr_rules" / "mine.yaml"  # an existing rule first


def test_the_scaled_residuals_lambda_must_be_positive_not_merely_non_negative():
    """blocks/scaled_residual.py: c = lambda / (r sqrt(k)); lambda = 0 would silence every recurrent write."""
    ModelConfig(d_model=128, r=2, block="scaled_residual", options={"residual_lambda": 1e-6})
    for bad in (0.0, -1.0):
        with pytest.raises(ConfigError, match=r"options.residual_lambda=.* must be > 0"):
            ModelConfig(d_model=128, r=2, block="scaled_residual", options={"residual_lambda": bad})
