"""The main job at reduced size, through `make demo` exactly as the README tells a newcomer to run it:
12 small runs (r in {1, 2, 4} x 2 budgets x 2 widths), collect, fit with bootstrap, figures, report.
A second call reuses every finished run."""

from __future__ import annotations

import json
import subprocess

import pandas as pd

from train_helpers import REPO_ROOT

REDUCED = "model.r=1,2,4 point=C1e11-d64,C2e11-d64,C1e11-d96,C2e11-d96"


def _make_demo(out, data_dir):
    args = f"--out {out} --bootstrap 20 --data-dir {data_dir} {REDUCED}"
    return subprocess.run(["make", "-s", "demo", f"DEMO_ARGS={args}"], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=1200)


def test_make_demo_runs_end_to_end_and_reuses_runs(tmp_path, data_dir):
    out = tmp_path / "demo"
    proc = _make_demo(out, data_dir)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    table = pd.read_csv(out / "runs.csv")
    assert len(table) == 12 and sorted(table["r"].unique()) == [1, 2, 4]
    fit = json.loads((out / "fit.json").read_text())
    assert set(fit["params"]) == {"E", "A", "alpha", "B", "beta", "phi"}
    assert fit["ci95"]["phi"][0] <= fit["params"]["phi"] <= fit["ci95"]["phi"][1]
    report = (out / "report.md").read_text()
    figures = sorted(p.name for p in (out / "figures").glob("*.png"))
    assert {"iso_flop.png", "collapse.png", "phi_profile.png", "residuals.png"} <= set(figures)
    for name in figures:
        assert f"figures/{name}" in report
        assert (out / "figures" / name).stat().st_size > 1000
    assert "| phi |" in report and "report.md" in proc.stdout
    walls = {p.parent.name: json.loads(p.read_text())["wall_time_s"] for p in out.glob("runs/*/*/run.json")}
    assert len(walls) == 12

    again = _make_demo(out, data_dir)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "0 trained now" in again.stdout
    assert walls == {p.parent.name: json.loads(p.read_text())["wall_time_s"] for p in out.glob("runs/*/*/run.json")}
    pd.testing.assert_frame_equal(pd.read_csv(out / "runs.csv"), table)
