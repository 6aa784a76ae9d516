"""What reads a fit record, written out (issue 58): compare_param's paired replicates (a constant first fit makes
the pairing irrelevant, so the CI and se are the second fit's own percentiles and ddof-1 spread), the data summary,
the size limits of a record, the tables it names, and the lines `loopscale fit` prints (result_text.py), each at
values off the defaults. Milliseconds each."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from loopscale.errors import InputError
from loopscale.fit import result as RS
from loopscale.fit.record_blocks import Settings
from loopscale.fit.result_text import joint_lines, open_end, summary_lines

PARAMS = {"E": 1.7, "A": 41.0, "alpha": 0.27, "B": 620.0, "beta": 0.31, "phi": 0.43}


def record(**blocks) -> RS.FitResult:
    return RS.FitResult(
        law="looped", params=dict(PARAMS), objective=0.001234567, grad_norm=3.2e-9, n_starts=15000, n_refined=16,
        n_best_basin=11, settings=Settings(loss="huber", delta=0.002, n_refine=16), n_rows=44, **blocks,
    )  # fmt: skip


def test_compare_param_pairs_replicates_and_reads_the_shorter_set():
    b_reps = np.array([0.51, 0.48, 0.62, 0.55, 0.40, 0.58, 0.47, 0.66, 0.53, 0.44, 0.59, 0.50])
    a = record(bootstrap={"params": {"phi": [0.4] * 30}, "n_replicates": 30})
    b = record(bootstrap={"params": {"phi": list(b_reps)}, "n_replicates": 12})
    b.params["phi"] = 0.52
    out = RS.compare_param(a, b, "phi", level=0.9, seed=3)
    assert (out.param, out.a, out.b, out.delta) == ("phi", 0.43, 0.52, pytest.approx(0.09))  # b - a
    assert out.n_replicates == 12
    assert out.ci == pytest.approx([np.percentile(b_reps - 0.4, 5), np.percentile(b_reps - 0.4, 95)], rel=1e-12)
    assert out.se == pytest.approx(np.std(b_reps, ddof=1), rel=1e-12)
    one = record(bootstrap={"params": {"phi": [0.5]}, "n_replicates": 1})  # one replicate: no interval
    assert RS.compare_param(a, one).ci is None and RS.compare_param(a, record()).n_replicates is None


def test_compare_param_names_the_fit_without_the_parameter():
    a, b = record(), record()
    del b.params["phi"]
    with pytest.raises(InputError, match=r"^second fit \(looped\) has no parameter 'phi'$"):
        RS.compare_param(a, b)
    with pytest.raises(InputError, match=r"^first fit \(looped\) has no parameter 'phi'$"):
        RS.compare_param(b, a)


def test_data_summary_shapes_and_ranges():
    table = pd.DataFrame(
        {"r": [4.0, 1.0, 4.0, 2.0], "N_once": [2e7, 5e7, 2e7, 1e7], "N_rec": [3e7, 1e7, 3e7, 9e7],
         "D": [4e9, 1e9, 8e9, 2e9], "C": [7e18, 3e17, 1.4e19, 2e18]}
    )  # fmt: skip
    s = RS.data_summary(table)
    assert s.shapes == [[1.0, 5e7, 1e7], [2.0, 1e7, 9e7], [4.0, 2e7, 3e7]]  # distinct, sorted
    assert s.N == [5e7, 1e8] and s.D == [1e9, 8e9] and s.C == [3e17, 1.4e19]  # N = N_once + N_rec
    dense = RS.data_summary(pd.DataFrame({"N": [3e8, 1e8], "D": [1e9, 2e9]}))
    assert dense.shapes == [[1.0, 1e8, 0.0], [1.0, 3e8, 0.0]] and dense.N == [1e8, 3e8]


def test_a_record_over_its_limits_is_refused_before_parsing(tmp_path, monkeypatch):
    path = tmp_path / "fit.json"
    path.write_text('{"law": "looped", "params": {"E": [1, 2, 3]}}')  # 2 '{', 1 '[', 3 ',': 6 values at most
    monkeypatch.setattr(RS, "MAX_FIT_VALUES", 6)
    assert RS.read_fit_json(path)["params"]["E"] == [1, 2, 3]
    monkeypatch.setattr(RS, "MAX_FIT_VALUES", 5)
    with pytest.raises(InputError, match="holds ~6 JSON values: a fit record holds at most 5"):
        RS.read_fit_json(path)
    monkeypatch.setattr(RS, "MAX_FIT_BYTES", path.stat().st_size - 1)
    with pytest.raises(InputError, match="a fit record holds at most"):
        RS.read_fit_json(path)
    with pytest.raises(InputError, match="is not a loopscale fit record"):
        RS.load_fit({"law": "looped"})


def test_recorded_tables_are_those_with_a_sha256():
    single = record(input={"path": "runs.csv", "sha256": "ab" * 32})
    assert RS.recorded_tables(single) == [{"path": "runs.csv", "sha256": "ab" * 32}]
    joint = record(input={"tables": [{"path": "a.csv", "sha256": "cd"}, {"path": "b.csv"}, "x"]})
    assert RS.recorded_tables(joint) == [{"path": "a.csv", "sha256": "cd"}]
    assert RS.recorded_tables(record()) == []


def test_the_lines_fit_prints_under_its_table():
    holdout = {"held_out_budget": 2.154e19, "n_holdout": 7, "mean_abs_rel_error": 0.01234, "max_abs_rel_error": 0.0321}
    fit = record(
        bootstrap={"n_replicates": 200, "cluster": "C", "params": {}},
        profile_phi={"interval": [0.38123, None], "x": [0.4], "objective": [0.0]},
        holdout=holdout,
    )
    assert summary_lines(fit) == [
        "rows 44; objective 0.00123457 (huber, delta 0.002); |grad| 3.20e-09; 11 of 16 refined starts reached the "
        "best optimum (15000 screened)",
        "bootstrap: 200 replicates resampling clusters of C",
        "phi profile interval (robust LR, 95%): [0.3812, open]",
        "holdout (budget 2.15e+19, 7 runs): mean |rel err| 1.234%, max 3.210%",
    ]
    plain = record(bootstrap={"n_replicates": 5, "cluster": None, "params": {}})
    plain.settings = Settings(loss="l2", delta=None)
    assert summary_lines(plain)[0].startswith("rows 44; objective 0.00123457 (l2); |grad|")
    assert summary_lines(plain)[1] == "bootstrap: 5 replicates resampling rows"
    assert open_end(None, ".3g") == "open" and open_end(-0.123456, "+.4g") == "-0.1235"


def test_joint_lines_name_each_recipes_delta_and_the_shared_check():
    j = {
        "reference": "base",
        "delta_phi": {
            "tb": {
                "estimate": -0.0812, "bootstrap_ci": [-0.15, -0.01], "se": 0.0354, "profile_interval": [None, -0.02],
                "lr_test": {"statistic": 5.123, "p_value": 0.0236},
                "separate": {"delta": -0.0799, "ci": [-0.2, 0.05], "n_replicates": 150},
            },
            "hy": {"estimate": 0.12, "lr_test": {"statistic": 9.0, "p_value": 0.0027}, "separate": {"delta": 0.11}},
        },
    }  # fmt: skip
    assert joint_lines(j) == [
        "delta phi = phi[tb] - phi[base] = -0.0812; joint bootstrap 95% CI [-0.15, -0.01] (width 0.14, se 0.0354)",
        "  joint profile 95% interval [open, -0.02]",
        "  LR test of delta phi = 0: statistic 5.12 (chi2, 1 df), p = 0.0236",
        "  separate fits: delta phi = -0.0799, 95% CI [-0.2, +0.05] (width 0.25, 150 randomly paired replicates)",
        "delta phi = phi[hy] - phi[base] = +0.12",
        "  LR test of delta phi = 0: statistic 9 (chi2, 1 df), p = 0.0027",
        "  separate fits: delta phi = +0.11 (no CI without --bootstrap)",
    ]


def test_a_joint_records_prediction_reads_each_rows_recipe_from_the_column_it_names():
    params = {"E": 1.7, "A": 41.0, "alpha": 0.27, "B": 620.0, "beta": 0.31, "phi[base]": 0.45, "phi[tb]": 0.3}
    fit = RS.FitResult("looped-joint", params, 0.0, 0.0, 1, 1, 1, Settings(), joint={"column": "design"})
    table = pd.DataFrame(
        {"N_once": [2e7, 3e7, 4e7], "N_rec": [1e8, 2e8, 5e7], "r": [1.0, 4.0, 4.0], "D": [1e9, 3e9, 2e10],
         "design": ["tb", "tb", "base"], "recipe": ["base", "base", "tb"]}
    )  # fmt: skip
    phi = np.array([0.45, 0.3, 0.45])  # r = 1: the reference's (no effect); then each row's design
    n = table["N_once"] + table["r"] ** phi * table["N_rec"]
    want = 1.7 + 41.0 * n**-0.27 + 620.0 * table["D"] ** -0.31
    np.testing.assert_allclose(RS.predict_loss(fit, table), want, rtol=1e-12)
    single = RS.FitResult("looped", {**PARAMS}, 0.0, 0.0, 1, 1, 1, Settings())
    n1 = table["N_once"] + table["r"] ** 0.43 * table["N_rec"]
    np.testing.assert_allclose(
        RS.predict_loss(single.to_json_dict(), table), 1.7 + 41.0 * n1**-0.27 + 620.0 * table["D"] ** -0.31, rtol=1e-12
    )
