"""`loopscale fit` on tables with seed repeats from a generator of its own (columns renamed and reordered, unequal
seeds per point, points without repeats among them) and on a table without: the seed sigma printed and
recorded, the report's noise lines, and the statement that a table without seed repeats gives intervals that
omit seed noise. The command in-process (support.cli.run_cli)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from loopscale.analysis.report import build_report
from loopscale.fit import synthetic as S
from support.cli import run_cli
from support.paths import FIXTURES


def _foreign_table(tmp_path):
    """A published-grid sweep with 1-4 seeds per point (a third unrepeated), written as another tool would:
    its own column names, in its own order, rows shuffled."""
    grid = S.isodepth_grid(S.BASELINE_SIZES)
    seeds = np.random.default_rng(4).choice([1, 1, 2, 3, 4], size=len(grid))
    table = S.seeded_sweep(grid, 0.46, seeds, 0.005, seed=4)
    table = table.rename(columns={"seed": "trial", "L": "val_loss_final", "N_once": "n_shared", "N_rec": "n_loop"})
    cols = ["val_loss_final", "trial", "D", "n_loop", "r", "C", "n_shared", "width"]
    path = tmp_path / "foreign.csv"
    table[cols].sample(frac=1.0, random_state=0).to_csv(path, index=False)
    return path, seeds


def test_a_foreign_seeded_table_is_fitted_with_its_seed_sigma(tmp_path):
    path, seeds = _foreign_table(tmp_path)
    out = tmp_path / "fit.json"
    args = ["fit", path, "--seed-col", "trial", "--loss-col", "val_loss_final", "--n-once-col", "n_shared"]
    res = run_cli([*map(str, args), "--n-rec-col", "n_loop", "--bootstrap", "16", "--out", str(out)], cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    noise = json.loads(out.read_text())["noise"]
    assert noise["seed_column"] == "trial" and noise["model"] is not None and noise["statement"] is None
    assert noise["seeds_per_point"] == {str(k): int((seeds == k).sum()) for k in sorted(set(seeds))}
    assert abs(noise["sigma_log"] / 0.005 - 1) < 0.2
    assert "seed noise:" in res.stdout and "sigma of log L" in res.stdout and "per r" in res.stdout
    res = run_cli(["fit", str(path), "--seed-col", "seed_id", "--loss-col", "val_loss_final"], cwd=tmp_path)
    assert res.returncode == 2 and "--seed-col 'seed_id' is not a column" in res.stderr


def test_without_seed_repeats_print_json_and_report_say_intervals_omit_seed_noise(tmp_path):
    out = tmp_path / "fit.json"
    table = FIXTURES / "looped_synthetic_small.csv"
    res = run_cli(["fit", str(table), "--no-profile", "--out", str(out)], cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "intervals omit seed" in res.stdout
    record = json.loads(out.read_text())
    assert "omit seed noise" in record["noise"]["statement"]
    report = build_report(pd.read_csv(table), out)
    assert "omit seed noise" in report


def test_noise_off_on_seed_repeats_says_the_copies_count_as_rows(tmp_path):
    """Issue 57: `fit --noise off` with three near-identical seeds called phi measured on an interval that counted
    each seed's run as independent data; the fit's warnings say so (and --noise auto has no such warning)."""
    table = pd.read_csv(FIXTURES / "looped_synthetic_small.csv")
    rng = np.random.default_rng(0)
    seeds = pd.concat(
        [table.assign(seed=s, L=table["L"] * (1 + 1e-5 * rng.standard_normal(len(table)))) for s in range(3)]
    )
    path = tmp_path / "seeds.csv"
    seeds.to_csv(path, index=False)
    for noise, warned in (("off", True), ("auto", False)):
        out = tmp_path / f"{noise}.json"
        res = run_cli(["fit", str(path), "--no-profile", "--noise", noise, "--out", str(out)])
        assert res.returncode == 0, res.stderr
        said = [w for w in json.loads(out.read_text())["warnings"] if w.startswith("--noise off with seed repeats")]
        assert bool(said) is warned, said
        assert (f"{len(table)} of {len(table)} points, {len(seeds)} rows" in said[0]) if warned else True
