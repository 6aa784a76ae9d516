"""The demo's fit under `--law looped-logn --seeds K` (loopscale/demo.py `_fit`, `verdict_summary`), on a forked sweep
of the demo's grid drawn at two seeds: the law it fits is the one asked for, weighed by the seed sigma of the
repeats, with phi read at the runs' N_ref in fit.json and demo.json; r^phi (the default) names no N_ref. Nothing
trained: the table is drawn (`seeded_sweep`), the fit is the demo's own code."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from loopscale import demo
from loopscale.fit import synthetic as S
from loopscale.fit.runs_table import canonical_table


@pytest.fixture(scope="module")
def sweep():
    return S.seeded_sweep(S.demo_grid(), 0.6, n_seeds=2, sigma_log=0.003, seed=1, forked=True)


@pytest.mark.parametrize("law", demo.DEMO_LAWS)
def test_the_demo_fits_the_law_it_is_asked_for_weighed_by_its_seeds(sweep, law, tmp_path):
    sweep.to_csv(tmp_path / "runs.csv", index=False)
    settings = demo.DemoSettings(out_dir=tmp_path, n_bootstrap=0, law=law, seeds=2)
    table = canonical_table(sweep, law)
    fit, path, free, _ = demo._fit(sweep, table, tmp_path / "runs.csv", tmp_path, settings, Console(file=io.StringIO()))
    record = json.loads(path.read_text())
    assert record["law"] == fit.law == law and free.law == "looped-free"
    assert record["noise"]["seeds_per_point"] == {"2": 44} and record["noise"]["dof"] == 44
    assert fit.params["phi"] == pytest.approx(0.6, abs=0.05)  # drawn from r^phi: psi ~ 0, phi at any N_ref
    summary = demo._write_summary({"law": law}, table, fit, tmp_path / "demo.json")
    verdict = json.loads(summary.read_text())["verdict"]
    if law == "looped-logn":
        assert record["params"]["N_ref"] == verdict["N_ref"] == 1e5  # the runs' geometric N_c, to two figures
        assert abs(record["params"]["psi"]) < 0.1
    else:
        assert verdict["N_ref"] is None and "psi" not in record["params"]
    assert verdict["phi"] == fit.params["phi"] and verdict["line"] == fit.conditioning.verdict
