"""The loss curve scored across r (trainer.curve_r_eval, issue 56 item 1): each evaluation along training scores
the model at every r_eval as the model rebuilt at that r does, the plan's curve FLOPs are the sum over the
evaluations actually run (each r_eval at its own forward FLOPs per token), the default leaves the record as it
was, `collect` writes one curves row per (step, r_eval) and `fit --curves` reads each run's trained r alone."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch
from lightning.pytorch.callbacks import Callback

from loopscale.config.model import ModelConfig
from loopscale.data.heldout import final_val_sequences, subset_count
from loopscale.data.run_data import open_run_data
from loopscale.fit.curves.registry import curve_law
from loopscale.fit.curves.synthetic import draw_curves, schedule
from loopscale.model.accounting import eval_flops_at, eval_flops_per_token
from loopscale.train.entry import run_training
from loopscale.train.run_json import RunRecord
from loopscale.train.runner import build_training
from support.cli import run_cli
from support.rebuilt import rebuilt_at
from support.train import TINY, train_config

R = 2
CURVE_KEYS = {"step", "tokens", "lr", "lr_multiplier", "train_loss", "val_loss"}  # a curve row before issue 56


def _cfg(tmp_path, data_dir, *extra):
    base = [*TINY, f"runs_dir={tmp_path}", f"data.data_dir={data_dir}", f"model.r={R}", "trainer.r_eval=off"]
    base += ["budget.tokens=12288"]  # 12 steps of TINY's 1024 tokens
    return train_config([*base, *extra])


def subset_mean_loss(model, loader) -> float:
    """The model's mean loss per target token over the loader, in eval mode, without gradient."""
    total = count = 0.0
    model.eval()
    with torch.no_grad():
        for x, y in loader:  # [B, T]
            targets = float((y != -100).sum())
            total += float(model(x, y)) * targets
            count += targets
    return total / count


class RebuiltScores(Callback):
    """After each evaluation of the curve, every r_eval's score against the model rebuilt at that r (its weights
    copied, support/rebuilt.py) on the same validation subset; the random state left as it was."""

    def __init__(self):
        self.steps: list[int] = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        point = pl_module.curve[-1] if pl_module.curve else None
        if point is None or point["step"] != trainer.global_step or point["step"] in self.steps:
            return
        self.steps.append(point["step"])
        loader = trainer.datamodule.val_dataloader()  # inside fit: the subset the point read
        with torch.random.fork_rng():
            for score in point["r_eval_scores"]:
                rebuilt = rebuilt_at(pl_module.model, score["r_eval"])
                assert rebuilt.cfg.r == score["r_eval"]
                assert score["val_loss"] == pytest.approx(subset_mean_loss(rebuilt, loader), rel=1e-6, abs=1e-7)


class ForwardLedger:
    """Every eval-mode forward of the model (inside fit: the curve's evaluations alone, the final validation
    not being run) counted as tokens x the forward FLOPs per token at the pass count it ran."""

    def __init__(self, model, model_cfg):
        self.flops, self.tokens = 0.0, {}
        self.model_cfg = model_cfg
        model.register_forward_hook(self.hook, with_kwargs=True)

    def hook(self, module, args, kwargs, output):
        if module.training:
            return
        r = kwargs.get("r") or module.cfg.r
        self.tokens[r] = self.tokens.get(r, 0) + args[0].numel()
        self.flops += args[0].numel() * eval_flops_at(self.model_cfg, r)


@pytest.mark.parametrize(("recipe", "r_evals"), [("baseline", [1, 4]), ("hyper", [3, 4])])
def test_each_curve_point_scores_as_the_model_rebuilt_at_that_r_and_the_plan_prices_them(
    recipe, r_evals, tmp_path, data_dir
):
    scored = f"trainer.curve_r_eval=[{','.join(map(str, r_evals))}]"
    cfg = _cfg(
        tmp_path, data_dir, f"model.recipe={recipe}", scored, "trainer.curve_points=6", "trainer.curve_share=0.5"
    )
    built = build_training(cfg, tmp_path / "run", open_run_data(cfg.data, cfg.model.seq_len), [], RunRecord())
    rebuilt, ledger = RebuiltScores(), ForwardLedger(built.module.model, built.cfg.model)
    built.trainer.callbacks.append(rebuilt)
    built.trainer.fit(built.module, datamodule=built.datamodule)
    module = built.module
    curve = module.curve
    assert [p["step"] for p in curve] == sorted(module.curve_steps) == rebuilt.steps and len(curve) > 3
    for point in curve:
        scores = {s["r_eval"]: s for s in point["r_eval_scores"]}
        assert sorted(scores) == sorted({R, *r_evals}) and scores[R]["val_loss"] == point["val_loss"]
        assert all(s["flops_per_token_eval"] == eval_flops_at(built.cfg.model, r) for r, s in scores.items())
    assert len({s["val_loss"] for s in curve[-1]["r_eval_scores"]}) == len(scores)  # trained: each r its own
    # the plan (what run.json's C_curve is: evaluations x the planned FLOPs of one) against the forwards run
    planned = module.curve_evaluated * module.curve_flops_per_point
    assert module.curve_evaluated == len(curve) and ledger.flops == pytest.approx(planned, rel=1e-12)
    subset_tokens = {r: n // len(curve) for r, n in ledger.tokens.items()}
    assert sorted(subset_tokens) == sorted({R, *r_evals}) and len(set(subset_tokens.values())) == 1
    recorded = sum(subset_tokens[R] * s["flops_per_token_eval"] for p in curve for s in p["r_eval_scores"])
    assert recorded == pytest.approx(planned, rel=1e-12)


def test_the_default_records_as_before_and_collect_writes_each_step_at_each_r_eval(tmp_path, data_dir):
    off = run_training(_cfg(tmp_path / "off", data_dir))
    on_cfg = _cfg(tmp_path / "on", data_dir, "trainer.curve_r_eval=[1,4]")
    on = run_training(on_cfg)
    assert off["status"] == on["status"] == "done"
    # the default: the curve's rows and its FLOPs as before issue 56 (the trained r's forward FLOPs per point)
    assert all(set(point) == CURVE_KEYS for point in off["curve"])
    model = ModelConfig(**off["config"]["model"])  # the trained model, its vocabulary the data's
    val_sequences = off["data"].get("val_rows") or final_val_sequences(on_cfg.data, model.seq_len)
    tokens = subset_count(val_sequences, on_cfg.trainer.val_subset) * model.seq_len
    assert off["C_curve"] == pytest.approx(len(off["curve"]) * tokens * eval_flops_per_token(model), rel=1e-12)
    # scoring other pass counts leaves training and the trained r's curve as they were
    assert on["L"] == off["L"] and on["train_loss"] == off["train_loss"]
    at_r = {p["step"]: p["val_loss"] for p in off["curve"]}
    common = [p for p in on["curve"] if p["step"] in at_r]
    assert len(common) == len(on["curve"]) and all(p["val_loss"] == at_r[p["step"]] for p in common)
    # each point of the scored run at every r_eval's own forward FLOPs, both within trainer.curve_share of C
    per_token = sum(eval_flops_at(model, r) for r in (1, R, 4))
    assert on["C_curve"] == pytest.approx(len(on["curve"]) * tokens * per_token, rel=1e-12)
    assert 0 < off["C_curve"] <= 0.05 * off["C"] and 0 < on["C_curve"] <= 0.05 * on["C"]
    for sweep, record in (("off", off), ("on", on)):
        res = run_cli(["collect", tmp_path / sweep / on_cfg.sweep])
        assert res.returncode == 0, res.stderr
        table = pd.read_csv(tmp_path / sweep / on_cfg.sweep / "runs_curves.csv")
        r_evals = [R] if sweep == "off" else [1, R, 4]
        assert len(table) == len(record["curve"]) * len(r_evals) and sorted(set(table["r_eval"])) == r_evals
        for r_eval in r_evals:
            rows = table[table["r_eval"] == r_eval]
            assert rows["step"].tolist() == [p["step"] for p in record["curve"]]
            assert (rows["flops_per_token_eval"] == eval_flops_at(model, r_eval)).all()
        trained = table[table["r_eval"] == R]
        assert trained["val_loss"].tolist() == [p["val_loss"] for p in record["curve"]]


@pytest.fixture(scope="module")
def curves_across_r(tmp_path_factory):
    """A curves table as collect writes one scored across r: every run's curve at its trained r (drawn from a known
    multi-power law) and again at r_eval 1 and 4 (other losses); and the same table as written before issue 56."""
    schedules = {k: schedule(k, 2000, 3e-4, 100) for k in ("constant", "cosine", "wsd")}
    truth = {"L0": 2.9, "A": 0.55, "alpha": 0.5, "B": 400.0, "C": 2.0, "beta": 0.6, "gamma": 0.6}
    old = draw_curves(curve_law("multipower"), truth, schedules, every=40, noise=1e-4, seed=3)
    trained = old.assign(r=R, r_eval=R)
    others = [trained.assign(r_eval=r, val_loss=trained["val_loss"] * f) for r, f in ((1, 1.3), (4, 0.8))]
    folder = tmp_path_factory.mktemp("curves")
    old.to_csv(folder / "old.csv", index=False)
    pd.concat([trained, *others], ignore_index=True).sample(frac=1.0, random_state=0).to_csv(
        folder / "across_r.csv", index=False
    )
    return folder


def test_fit_curves_reads_each_runs_trained_r_alone(curves_across_r, tmp_path):
    fits = {}
    for name in ("old", "across_r"):
        out = tmp_path / f"{name}.json"
        res = run_cli(["fit", curves_across_r / f"{name}.csv", "--curves", "--starts", "2", "--out", out])
        assert res.returncode == 0, res.stderr
        fits[name] = json.loads(out.read_text())
        assert ("rows scored at another r_eval left out" in res.stdout) == (name == "across_r")
    # the same curves (in another order: the sum's rounding), not a mix of pass counts
    assert fits["across_r"]["params"] == pytest.approx(fits["old"]["params"], rel=1e-8)
    assert sorted(fits["across_r"]["fitted_runs"]) == ["constant", "cosine", "wsd"]
