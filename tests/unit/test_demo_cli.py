"""Issue 29 (4): `loopscale demo experiment=X` was silently ignored (the demo's own experiment won); it is
refused in one line naming the command that runs X on the same worker pool, before anything is trained."""

from __future__ import annotations

import pytest

from support.cli import run_cli


@pytest.mark.parametrize("override", ["experiment=isodepth_cpu", "+experiment=mine", "experiment@_global_=mine"])
def test_demo_refuses_another_experiment(tmp_path, override):
    res = run_cli(["demo", "--out", tmp_path / "demo", override], cwd=tmp_path)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    line = res.stderr.strip()
    assert line.startswith(f"loopscale demo: error: {override}: the demo trains experiment=isodepth_cpu_demo only")
    assert "hydra/launcher=local_pool" in line
    assert not (tmp_path / "demo").exists()  # nothing prepared, trained or written


@pytest.mark.parametrize(
    "args, says",
    [
        (["--seeds", "0"], "--seeds 0: the training seeds of every point, 1 or more"),
        (["--seeds", "3", "seed=7"], "seed=7: --seeds 3 sets the training seeds (seed=0..2); give one"),
        (["--seeds", "2", "+seed=1,2"], "+seed=1,2: --seeds 2 sets the training seeds (seed=0..1); give one"),
        (["seed=3"], "seed=3: --seeds 2 sets the training seeds (seed=0..1); give one"),  # the default is two seeds
    ],
)
def test_demo_refuses_seeds_it_cannot_train(tmp_path, args, says):
    """--seeds K trains seed=0..K-1: below 1, or beside a seed= override that would outvote or double it, it is
    refused in one line before anything is prepared."""
    res = run_cli(["demo", "--out", tmp_path / "demo", *args], cwd=tmp_path)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.strip() == f"loopscale demo: error: {says}"
    assert not (tmp_path / "demo").exists()


def test_demo_fits_only_the_laws_it_reports(tmp_path):
    res = run_cli(["demo", "--out", tmp_path / "demo", "--law", "looped-free"], cwd=tmp_path)
    assert res.returncode == 2 and "invalid choice: 'looped-free'" in res.stderr
    assert "'looped-logn', 'looped'" in res.stderr and not (tmp_path / "demo").exists()


def test_the_demo_options_reach_its_settings():
    """--law and --seeds (and the rest) arrive in the DemoSettings the demo runs with; unset, the plain demo's."""
    from loopscale.cli import build_parser
    from loopscale.cli.demo import demo_settings

    parse = build_parser("demo").parse_args
    given = demo_settings(parse(["demo", "--law", "looped", "--seeds", "3", "--out", "x", "model.r=1,2"]))
    assert (given.law, given.seeds, str(given.out_dir), given.overrides) == ("looped", 3, "x", ["model.r=1,2"])
    plain = demo_settings(parse(["demo"]))
    assert (plain.law, plain.seeds, str(plain.out_dir), plain.n_bootstrap) == ("looped-logn", 2, "runs/demo", 200)
