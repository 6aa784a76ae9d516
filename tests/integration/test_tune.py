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
from loopscale.config.lr_rule import rule_file, write_loop_rule
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


LOOP_EXPERIMENT = (
    EXPERIMENT.replace("sweep: tune_tiny", "sweep: tune_tiny_loop")
    .replace(
        "  lr_rule: ${ls.lr_rule:tune_tiny,${ls.recipe:${model}},${model.r},${model.d_model}}",
        "  lr_loop: ${ls.lr_loop_rule:tune_tiny_loop,${ls.recipe:${model}},${model.r},${model.d_model}}",
    )
    .replace("${ls.lr_tag:${optim.lr_scale}}", "${ls.lr_tag:${optim.lr_scale},${optim.lr_loop}}")
)


def test_the_loop_axis_trains_each_lr_loop_at_the_experiments_lr_and_a_sweep_reads_its_rule_between_widths(
    experiment, capsys
):
    """`loopscale tune --axis loop`: optim.lr_loop varied at the experiment's own lr (the lr rule not switched off),
    each run's loop matrices at lr_loop x the other matrices' lr, its name carrying it; at ~26 steps the middle
    layers of r = 1 learn more the higher their lr (x64 still on the edge: measured), so with no extension the tune
    writes nothing. A loop rule in the file is read by the experiment's `${ls.lr_loop_rule:...}` at a tuned width,
    log-linearly between two and refused past them."""
    conf, overrides, runs = experiment
    (conf / "experiment" / "tune_tiny_loop.yaml").write_text(LOOP_EXPERIMENT)
    settings = TuneSettings(
        ["experiment=tune_tiny_loop", *overrides],
        grid=TuneGrid(points=3, step=8.0, centre=8.0, max_extend=0),  # x1, x8, x64
        cells=["C1e10-d16"],
        runs_dir=runs,
        workers=1,
        probe=False,
        axis="loop",
    )
    with pytest.raises(ConfigError, match="r = 1 at C1e10-d16: the lowest loss is still on the grid's upper edge"):
        run_tune(settings)
    assert not (conf / "lr_rules" / "tune_tiny_loop.yaml").exists()
    branches = sorted((Path(runs) / "C1e10-d16" / "tune_tiny_loop").glob("*-C1e10"))
    assert [p.name for p in branches] == [
        f"baseline-r{r}-d16{tag}-C1e10" for r in (1, 2) for tag in ("", "-lrloop64", "-lrloop8")
    ]
    base = train_config(["experiment=tune_tiny_loop", "model.r=2", "optim.lr_loop=1", *overrides]).optim
    for path in branches:
        record = read_record(path)
        m = float(path.name.split("lrloop")[1].split("-")[0]) if "lrloop" in path.name else 1.0
        assert record.get("lr_loop") == (None if m == 1.0 else m) and record.get("lr_rule") is None
        assert record["lrs"]["matrix"] == pytest.approx(base.lr, rel=1e-12)
        assert record["lrs"].get("loop") == (None if m == 1.0 else pytest.approx(base.lr * m, rel=1e-12))

    write_loop_rule(
        conf / "lr_rules" / "tune_tiny_loop.yaml", "tune_tiny_loop", "baseline", {2: {16: 4.0, 24: 0.5}}, {}
    )

    def lr_loop_at(width):
        return train_config(["experiment=tune_tiny_loop", "model.r=2", f"point=C1e10-d{width}", *overrides]).optim

    write_loop_rule(
        conf / "lr_rules" / "tune_tiny_loop.yaml", "tune_tiny_loop", "baseline", {2: {16: 4.0, 32: 0.5}}, {}
    )
    assert lr_loop_at(16).lr_loop == 4.0 and lr_loop_at(32).lr_loop == 0.5
    s = math.log(24 / 16) / math.log(32 / 16)  # 0.585: 4 x (1/8)^0.585
    assert lr_loop_at(24).lr_loop == float(f"{4.0 ** (1 - s) * 0.5**s:.3g}") == 1.19
    with pytest.raises(Exception, match="at widths \\[16, 32\\], not at 48: .*not extrapolated"):
        lr_loop_at(48)
    with pytest.raises(Exception, match="no tuned loop lr for recipe baseline at r = 1 .*--axis loop"):
        train_config(["experiment=tune_tiny_loop", "model.r=1", *overrides])
