"""The analysis layer's file and table rules, by hand (issue 58): `fit`'s output paths per group
(loopscale/analysis/fit_files.py), `validate`'s three outputs (loopscale/analysis/validation_files.py), the probes'
dense rows (loopscale/analysis/probes.py) and the published Chinchilla sets beside a fit
(loopscale/analysis/published_laws.py)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import loopscale.analysis.fit_files as fit_files
import loopscale.analysis.probes as probes
import loopscale.analysis.published_laws as published_laws
import loopscale.analysis.validation_files as validation_files
from loopscale.errors import InputError

# ----------------------------------------------------------------------------------------------------
# fit_files.py


def test_a_grouped_fit_writes_name_dot_group_with_unsafe_characters_replaced():
    assert fit_files._out_paths("out/fit.json", [None], "--out") == [fit_files.Path("out/fit.json")]
    paths = fit_files._out_paths("out/fit.json", ["baseline", "hyper conn/2", "", 4], "--out")
    assert [str(p) for p in paths] == ["out/fit.baseline.json", "out/fit.hyper_conn_2.json", "out/fit.group.json"] + [
        "out/fit.4.json"
    ]
    assert fit_files._safe("a..b-c_d") == "a..b-c_d" and fit_files._safe("x y\tz") == "x_y_z"
    assert fit_files._safe("a / b") == "a_b"  # a run of characters is one underscore
    with pytest.raises(InputError, match=r"--plot: groups 'a b' and 'a/b' would both write out/f\.a_b\.png"):
        fit_files._out_paths("out/f.png", ["a b", "a/b"], "--plot")


def test_output_paths_refuse_an_input_table_and_a_figure_format_matplotlib_cannot_write(tmp_path):
    table = tmp_path / "runs.csv"
    table.write_text("x\n")
    out, plot = fit_files.output_paths(str(tmp_path / "fit.json"), str(tmp_path / "fit.png"), 100, [table], [None])
    assert out == [tmp_path / "fit.json"] and plot == [tmp_path / "fit.png"]
    assert fit_files.output_paths(None, None, 100, [table], ["a", "b"]) == ([None, None], [None, None])
    with pytest.raises(InputError, match="input table"):
        fit_files.output_paths(str(table), None, 100, [table], [None])
    with pytest.raises(InputError, match=r"--plot .*fit\.xyz: \.xyz is not a figure format"):
        fit_files.output_paths(None, str(tmp_path / "fit.xyz"), 100, [table], [None])
    with pytest.raises(InputError, match="no suffix is not a figure format"):
        fit_files.output_paths(None, str(tmp_path / "fit"), 100, [table], [None])
    assert fit_files.figure_table(pd.DataFrame({"N": [1.0]}), None) is None


# ----------------------------------------------------------------------------------------------------
# validation_files.py


def test_validate_writes_json_md_and_png_beside_each_other_and_never_over_an_input(tmp_path):
    fit, table = tmp_path / "fit.json", tmp_path / "runs.csv"
    out = validation_files.validation_outputs(str(tmp_path / "v.JSON"), str(fit), [table])
    assert out == [tmp_path / "v.JSON", tmp_path / "v.md", tmp_path / "v.png"]
    with pytest.raises(InputError, match=r"--out must name a \.json file \(the \.md and \.png go beside it\)"):
        validation_files.validation_outputs(str(tmp_path / "v.md"), str(fit), [table])
    with pytest.raises(InputError, match="the fit"):
        validation_files.validation_outputs(str(fit), str(fit), [table])
    with pytest.raises(InputError, match="the input table"):
        validation_files.validation_outputs(str(tmp_path / "runs.json"), str(fit), [tmp_path / "runs.md"])


# ----------------------------------------------------------------------------------------------------
# probes.py


def test_a_looped_fit_without_r1_rows_is_refused_naming_the_rs_and_the_fix():
    probe = pd.DataFrame({"r": [2.0, 8.0, 4.0, 2.0]})
    with pytest.raises(InputError, match=r"no r = 1 runs in the table \(r = 2, 4, 8\).*--dense BASELINE_DIR"):
        probes.check_dense_rows(probe, "looped")
    probes.check_dense_rows(probe, "looped", allow_no_dense=True)
    probes.check_dense_rows(probe, "chinchilla")  # a dense law does not read r
    probes.check_dense_rows(pd.DataFrame({"r": [1.0, 4.0]}), "looped")


def test_dense_rows_are_refused_for_a_probe_with_its_own_r1_runs_or_a_missing_baseline(tmp_path):
    with pytest.raises(InputError, match="is not a directory"):
        probes.dense_rows([], tmp_path / "nowhere")
    own = [{"r": 1, "run_dir": "a"}, {"r": 2, "run_dir": "b"}, {"r": 1, "run_dir": "c"}]
    with pytest.raises(InputError, match="the sweep already has 2 r = 1 runs"):
        probes.dense_rows(own, tmp_path)


# ----------------------------------------------------------------------------------------------------
# published_laws.py


def test_published_sets_are_quoted_and_scored_by_the_rms_of_log_residuals():
    assert published_laws.PUBLISHED_CHINCHILLA["Hoffmann et al. 2022 (Approach 3)"] == {
        "E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28}  # fmt: skip
    assert published_laws.PUBLISHED_CHINCHILLA["Besiroglu et al. 2024 (replication)"] == {
        "E": 1.82, "A": 482.01, "B": 2085.43, "alpha": 0.3478, "beta": 0.3658}  # fmt: skip
    fit = {"E": 1.9, "A": 300.0, "B": 900.0, "alpha": 0.31, "beta": 0.3}
    table = pd.DataFrame({"N": [1e8, 4e8, 2e9], "D": [2e9, 8e9, 4e10], "L": [3.1, 2.8, 2.5]})
    headers, rows = published_laws.published_comparison(fit, table)
    assert headers == ["parameter", "this fit", "Hoffmann et al. 2022 (Approach 3) (published)"] + [
        "Besiroglu et al. 2024 (replication) (published)"
    ]
    assert rows[0] == ("E", 1.9, 1.69, 1.82) and rows[4] == ("beta", 0.3, 0.28, 0.3658)
    label, *rms = rows[5]
    assert label == "RMS log residual on these 3 runs"
    for params, got in zip([fit, *published_laws.PUBLISHED_CHINCHILLA.values()], rms):
        pred = [params["E"] + params["A"] * n ** -params["alpha"] + params["B"] * d ** -params["beta"]
                for n, d in zip(table["N"], table["D"])]  # fmt: skip
        expected = math.sqrt(np.mean([(math.log(obs) - math.log(p)) ** 2 for obs, p in zip(table["L"], pred)]))
        assert got == pytest.approx(expected, rel=1e-12)
    assert len(published_laws.published_comparison(fit, table.drop(columns=["L"]))[1]) == 5
    assert math.isnan(published_laws.published_comparison({"E": 1.0}, None)[1][1][1])  # a missing one: NaN
