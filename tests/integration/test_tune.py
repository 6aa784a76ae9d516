"""The tuning stage (`loopscale tune`, loopscale/launch/tune.py) end to end on a tiny forked experiment of the
user's own (LOOPSCALE_CONFIG_PATH): real Hydra, Lightning, data and MuonH, ~10 steps a run. The rule is written
beside the experiment, read back by the experiment's `${ls.lr_rule:...}` and applied to a later run's lrs; the
same tune is answered from the file, and with --force it retrains nothing (every run is reused); a grid whose
lowest loss sits on its edge grows by itself, and one still on its edge writes no rule; runs of another config
in the tune's dirs are refused."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from loopscale.cli import main as cli_main
from loopscale.config.dirs import train_config
from loopscale.config.lr_rule import rule_file
from loopscale.errors import ConfigError
from loopscale.launch.tune import TuneGrid, TuneSettings, run_tune
from loopscale.train.entry import run_training
from loopscale.train.plan import run_dir_of
from loopscale.train.run_json import read_record

# d16 and d24, r in {1, 2}, 1024 tokens a step: 1e10 FLOPs is ~26 steps at d16, 2e10 ~30 at d24 (there the best
# lr is ~x4 the base lrs: measured)
EXPERIMENT = """\
# @package _global_
defaults:
  - override /model: tiny
  - override /budget: forks
  - override /optim: muonh
point: C1e10-d16
sweep: tune_tiny
model:
  d_model: ${ls.fork_width:${point}}
  head_dim: 8
data:
  val_tokens: 8192
budget:
  fork_flops: ${ls.fork_flops:${point}}
  batch_size: 16
optim:
  transfer: none
  schedule: wsd
  lr_rule: ${ls.lr_rule:tune_tiny,${ls.recipe:${model}},${model.r},${model.d_model}}
trainer:
  compile: false
  progress: false
run_name: >-
  ${ls.recipe:${model}}-r${model.r}-d${model.d_model}${ls.lr_tag:${optim.lr_scale}}${ls.lr_rule_tag:${optim.lr_rule}}
hydra:
  sweeper:
    params:
      model.r: 1,2
      point: C1e10-d16,C2e10-d24
"""


@pytest.fixture
def experiment(tmp_path, monkeypatch, data_dir):
    conf = tmp_path / "conf"
    (conf / "experiment").mkdir(parents=True)
    (conf / "experiment" / "tune_tiny.yaml").write_text(EXPERIMENT)
    monkeypatch.setenv("LOOPSCALE_CONFIG_PATH", str(conf))
    return conf, [f"data.data_dir={data_dir}"], str(tmp_path / "runs")


def _settings(overrides, runs, grid, **kw):
    return TuneSettings(["experiment=tune_tiny", *overrides], grid=grid, runs_dir=runs, workers=1, probe=False, **kw)


def test_the_rule_is_written_read_back_applied_and_cached(experiment, capsys):
    conf, overrides, runs = experiment
    grid = TuneGrid(points=4, step=4.0, centre=4.0, max_extend=0)  # x1 .. x64: wide enough to bracket
    result = run_tune(_settings(overrides, runs, grid))
    path = conf / "lr_rules" / "tune_tiny.yaml"
    assert result.rule_path == path == rule_file("tune_tiny") and result.trained == 16  # 2 r x 2 cells x 4 lrs
    rule = yaml.safe_load(path.read_text())
    assert set(rule["multipliers"]["baseline"]) == {1, 2}
    record = rule["recipes"]["baseline"]
    assert record["cells"] == ["C1e10-d16", "C2e10-d24"] and record["cost"]["runs"] == 16
    for r, m in rule["multipliers"]["baseline"].items():
        lo, hi = record["rule"][r]["interval"]
        assert lo < m < hi and m == result.multipliers[r]  # as written: 3 significant digits
        for cell in record["cells"]:  # each cell's own optimum, from its own four losses
            assert len(record["rule"][r]["cells"][cell]["L"]) == 4

    # read back by the experiment: a later run of r = 2 at d16 trains at the base lrs x the rule's multiplier there
    transfer = (rule.get("transfer") or {}).get("baseline")
    assert bool(transfer) == record["transfer"]["used"]  # the width exponent is the rule's only when measured
    m2 = rule["multipliers"]["baseline"][2]
    if transfer:
        m2 = float(f"{m2 * (16 / transfer['ref_width']) ** transfer['width_exponent']:.3g}")
    cfg = train_config(["experiment=tune_tiny", "model.r=2", *overrides, f"runs_dir={runs}/later"])
    assert cfg.optim.lr_rule == m2 and cfg.run_name == f"baseline-r2-d16-lrt{m2:.3g}"
    run_training(cfg)
    branch = read_record(run_dir_of(cfg).parent / f"{cfg.run_name}-C1e10")
    base = train_config(["experiment=tune_tiny", "model.r=2", "optim.lr_rule=1", *overrides])
    assert branch["lr_rule"] == m2
    assert branch["lrs"]["matrix"] == pytest.approx(base.optim.lr * m2, rel=1e-9)

    # the same tune again: answered from the file; forced: every run reused, the same rule
    again = run_tune(_settings(overrides, runs, grid))
    assert again.cached and again.multipliers == rule["multipliers"]["baseline"]
    forced = run_tune(_settings(overrides, runs, grid, force=True))
    assert not forced.cached and forced.trained == 0
    assert forced.multipliers == result.multipliers

    # a recipe the rule has not tuned: one clear line that says how
    with pytest.raises(Exception, match="no tuned lr for recipe tbptt.*loopscale tune experiment=tune_tiny"):
        train_config(["experiment=tune_tiny", "model.r=2", "model.recipe=tbptt", *overrides])


def test_an_edge_optimum_grows_the_grid(experiment, capsys):
    """At x1/1000 of the base lrs 26 steps learn more the higher the lr: the lowest loss is on the upper edge,
    so the grid adds the next two lrs above and trains them; still on the edge after its one extension, the
    tune stops with nothing written."""
    conf, overrides, runs = experiment
    grid = TuneGrid(points=3, step=2.0, centre=1 / 1024, max_extend=1)
    with pytest.raises(ConfigError, match="upper edge"):
        run_tune(_settings([*overrides, "model.r=1"], runs, grid, cells=["C1e10-d16"]))
    trained = sorted(p.name for p in (Path(runs) / "C1e10-d16" / "tune_tiny").glob("*-C1e10"))
    ks = sorted(round(math.log2(float(n.split("lrx")[1].split("-")[0]))) for n in trained)
    assert ks == [-11, -10, -9, -8, -7]  # 1/2048 .. 1/512, then 1/256 and 1/128 added above
    assert "adding x0.00391, x0.00781" in capsys.readouterr().out
    assert not (conf / "lr_rules" / "tune_tiny.yaml").exists()
    # run names do not carry the injection: a tune of another model in the same dir refuses these runs' losses
    with pytest.raises(ConfigError, match="holds a finished run of another config.*looped_injection"):
        run_tune(_settings([*overrides, "model.r=1", "model.looped_injection=linear"], runs, grid, cells=["C1e10-d16"]))


def test_the_cli_states_the_cost_first(experiment, capsys):
    _, overrides, runs = experiment
    argv = ["tune", "experiment=tune_tiny", *overrides, "--runs-dir", runs, "--points", "3", "--dry-run", "--no-probe"]
    assert cli_main(argv) == 0
    assert "tuning grid: 12 of 12 runs to train" in capsys.readouterr().out  # 2 r x 2 cells x 3 lrs, nothing trained
    assert cli_main(["tune", "model.r=1"]) == 2
