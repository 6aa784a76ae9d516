"""The runs table's rules written out (issue 58): which values each column accepts (r a whole number >= 1, sizes >= 0
where the law allows 0, the rest > 0), D from C with the law's own cost, the minimum rows, the warnings about copied
runs, re-run seeds and implausible values, the row lists in messages, --drop-top-k, the cluster labels and their
minimum, the budget column; and fit_table's orchestration (the bootstrap at seed + 1, its percentile CI, the
settings it records, the noise-off warning). Milliseconds each but the last (one small fit started at its truth)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from loopscale.errors import InputError
from loopscale.fit import runs_table as RT
from loopscale.fit.fit_table import fit_table
from loopscale.fit.laws.registry import law_data_from_table
from loopscale.fit.objective import Loss
from loopscale.fit.optimize import fit_law
from loopscale.fit.resample import bootstrap
from loopscale.fit.task_pool import one_blas_thread
from loopscale.fit.uncertainty import percentile_ci

TRUTH = np.array([np.log(1.7), np.log(41.0), 0.27, np.log(620.0), 0.31, 0.43])


def raw(n=14, seed=1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    r = np.resize([1.0, 2.0, 4.0], n)
    N_once, N_rec, D = rng.uniform(2e7, 9e7, n), rng.uniform(3e7, 2e8, n), rng.uniform(2e9, 8e10, n)
    L = (1.7 + 41.0 * (N_once + r**0.43 * N_rec) ** -0.27 + 620.0 * D**-0.31) * np.exp(0.01 * rng.standard_normal(n))
    return pd.DataFrame({"r": r, "N_once": N_once, "N_rec": N_rec, "D": D, "L": L})


def test_each_column_accepts_its_range_and_a_refusal_names_the_rows():
    RT.canonical_table(raw().assign(N_once=0.0), "looped")  # N_once may be 0 for the looped law
    for col, value, rule in (
        ("r", 2.5, "a whole number >= 1"),
        ("r", 0.0, "a whole number >= 1"),
        ("N_rec", -1.0, ">= 0"),
        ("D", 0.0, "> 0"),
        ("L", -2.0, "> 0"),
    ):
        bad = raw()
        bad.loc[[3, 8], col] = value
        with pytest.raises(InputError, match=rf"^column '{col}' must be {rule}; rows 3, 8 are not$"):
            RT.canonical_table(bad, "looped")
    bad = raw()
    bad.loc[[1, 2, 4, 5, 6, 9], "L"] = np.nan
    with pytest.raises(
        InputError,
        match=r"column 'L' has 6 missing, non-numeric or infinite values \(rows 1, 2, 4, 5, 6, ... \(6 in all\)\)",
    ):
        RT.canonical_table(bad, "looped")
    bad.loc[9, "L"] = 3.0  # five rows: all listed
    with pytest.raises(InputError, match=r"has 5 missing, non-numeric or infinite values \(rows 1, 2, 4, 5, 6\)$"):
        RT.canonical_table(bad, "looped")
    with pytest.raises(InputError, match="N_once \\+ N_rec must be > 0; rows 2 are not"):
        RT.canonical_table(
            raw().assign(
                N_once=lambda t: np.where(t.index == 2, 0.0, t.N_once),
                N_rec=lambda t: np.where(t.index == 2, 0.0, t.N_rec),
            ),
            "looped",
        )


def test_d_from_c_with_the_laws_cost_and_c_from_d_and_the_columns_recorded():
    t = raw().drop(columns="D").assign(C=6e19)
    canon = RT.canonical_table(t, "looped")
    np.testing.assert_allclose(canon["D"], 6e19 / (6 * (t["N_once"] + t["r"] * t["N_rec"])), rtol=1e-15)
    assert canon.attrs["columns_used"]["D"] == "C / (6 (N_once + r N_rec))"
    back = RT.canonical_table(raw(), "looped")
    np.testing.assert_allclose(back["C"], 6 * (back["N_once"] + back["r"] * back["N_rec"]) * back["D"], rtol=1e-15)
    chin = RT.canonical_table(raw().drop(columns="D").assign(C=6e19), "chinchilla")
    np.testing.assert_allclose(chin["N"], t["N_once"] + t["N_rec"], rtol=1e-15)  # N derived from its parts
    np.testing.assert_allclose(chin["D"], 6e19 / (6 * chin["N"]), rtol=1e-15)
    assert chin.attrs["columns_used"]["N"] == "N_once + N_rec" and chin.attrs["columns_used"]["D"] == "C / (6 N)"


def test_a_table_needs_twice_the_parameters_in_rows():
    RT.check_fit_size(RT.canonical_table(raw(12), "looped"), "looped")
    with pytest.raises(
        InputError, match=r"^11 rows is too few for law 'looped' with 6 parameters \(need at least 12\)$"
    ):
        RT.canonical_table(raw(11), "looped")
    with pytest.raises(InputError, match="no rows to fit"):
        RT.check_fit_size(raw().iloc[:0], "looped")


def test_table_warnings_name_copies_reruns_and_implausible_values():
    t = RT.canonical_table(raw(), "looped")
    copied = pd.concat([t, t.iloc[[2]], t.iloc[[5]]], ignore_index=True)
    (w,) = RT.table_warnings(copied, "looped")
    assert w.startswith("2 rows repeat another row's r, N_once, N_rec, D, L exactly (rows 14, 15)")
    seeds = t.assign(seed=np.arange(14.0))
    rerun = pd.concat([seeds, seeds.iloc[[4]].assign(L=seeds["L"].iloc[4] * 1.01)], ignore_index=True)
    (w,) = RT.table_warnings(rerun, "looped")
    assert w.startswith("1 rows repeat another row's point and seed (rows 14)")
    exact = pd.concat([seeds, seeds.iloc[[4]]], ignore_index=True)  # a copy is said once, as a copy
    (w,) = RT.table_warnings(exact, "looped")
    assert w.startswith("1 rows repeat another row's r, N_once, N_rec, D, L exactly (rows 14)")
    other_seed = pd.concat([seeds, seeds.iloc[[4]].assign(seed=99.0, L=seeds["L"].iloc[4] * 1.01)], ignore_index=True)
    assert RT.table_warnings(other_seed, "looped") == []  # another seed of the point: a replicate
    huge = t.assign(L=np.where(t.index == 3, 150.0, t["L"]))
    (w,) = RT.table_warnings(huge, "looped")
    assert w.startswith("column L reaches 150 (rows 3), beyond 100: not a real run's loss in nats")
    assert RT.table_warnings(t.assign(L=np.where(t.index == 3, 100.0, t["L"])), "looped") == []  # at the limit


def test_drop_top_k_drops_the_highest_losses_ties_in_row_order():
    t = pd.DataFrame({"L": [3.0, 5.0, np.nan, 5.0, 2.0, 4.0], "x": range(6)})
    out = RT.drop_top_k(t, 2)
    assert out["x"].tolist() == [0, 2, 4, 5] and out.attrs["rows_dropped_top_k"] == 2  # both 5.0s, NaN kept
    assert RT.drop_top_k(t, 3)["x"].tolist() == [0, 2, 4]
    assert RT.drop_top_k(t, 0) is t
    RT.drop_top_k(t, 5)
    with pytest.raises(InputError, match="would drop every row of a 6-row table"):
        RT.drop_top_k(t, 6)
    with pytest.raises(InputError, match="must be >= 0; got -1"):
        RT.drop_top_k(t, -1)


def test_cluster_labels_budgets_and_their_minimum():
    t = pd.DataFrame(
        {"C": [1.0004e19, 9.996e18, 3.001e18, 2.2e18, 5e17],
         "C_budget": [1e19, np.nan, 3e18, 0.0, "x"],
         "parent": ["p1", "", None, "p1", "p2"], "run_dir": ["a", "b", "c", "d", "e"],
         "width": [64, 64, 128, 256, np.nan]}
    )  # fmt: skip
    np.testing.assert_array_equal(RT.budget_column(t), [1e19, 9.996e18, 3e18, 2.2e18, 5e17])  # asked where > 0
    np.testing.assert_array_equal(RT.cluster_labels(t, "C"), [1e19, 1e19, 3e18, 2.2e18, 5e17])
    assert RT.cluster_labels(t, "parent").tolist() == ["parent p1", "run b", "run c", "parent p1", "parent p2"]
    with pytest.raises(InputError, match=r"--cluster column 'width' is empty in rows 4"):
        RT.cluster_labels(t, "width")
    with pytest.raises(InputError, match="--cluster column 'depth' is not in the table"):
        RT.cluster_labels(t, "depth")
    RT.check_clusters(np.array(["a", "b", "c", "a"]), "width")
    with pytest.raises(
        InputError, match=r"^--cluster width: 2 clusters in recipe X, too few to resample \(need at least 3\)"
    ):
        RT.check_clusters(np.array(["a", "b", "a"]), "width", " in recipe X")
    with pytest.raises(InputError, match="--cluster width: 1 cluster, too few"):
        RT.check_clusters(np.array(["a", "a"]), "width")
    assert RT.is_forked(t) and not RT.is_forked(t.assign(parent=["", None, " ", None, ""]))


def test_fit_table_bootstraps_at_seed_plus_one_and_records_what_it_ran():
    table = RT.canonical_table(raw(18), "looped")
    loss = Loss("huber", 0.05)
    result = fit_table(table, "looped", loss, seed=4, n_bootstrap=6, profile=False, starts=TRUTH[None, :])
    with one_blas_thread():  # as fit_table runs: a threaded BLAS under L-BFGS-B crawls on a busy machine
        _, state = fit_law(law_data_from_table(table, "looped"), "looped", loss, 4, starts=TRUTH[None, :])
        boot = bootstrap(state, 6, 5)
    for k, v in boot["params"].items():
        np.testing.assert_allclose(result.bootstrap["params"][k], v, rtol=1e-9)
    assert result.ci95 == percentile_ci(boot["params"])  # 95% percentile interval of these replicates
    s = result.settings
    assert (s.n_bootstrap, s.cluster, s.law, s.holdout_largest, s.loss, s.delta) == (
        6,
        None,
        "looped",
        False,
        "huber",
        0.05,
    )
    assert result.profile_phi is None and result.bootstrap["cluster"] is None
    seeded = pd.concat(
        [table.assign(seed=0), table.iloc[:5].assign(seed=1, L=table["L"].iloc[:5] * 1.002)], ignore_index=True
    )
    off = fit_table(seeded, "looped", loss, noise="off", profile=False, starts=TRUTH[None, :])
    assert any(w.startswith("--noise off with seed repeats (5 of 18 points, 23 rows)") for w in off.warnings)


def test_fit_inputs_are_checked_before_the_first_solve():
    from loopscale.fit.fit_table import check_fit_inputs

    table = RT.canonical_table(raw(14), "looped").assign(width=np.resize([64, 128], 14))
    assert check_fit_inputs(table, "looped", 0, "width") is None  # no bootstrap: the cluster is not read
    with pytest.raises(InputError, match="--cluster width: 2 clusters, too few"):
        check_fit_inputs(table, "looped", 5, "width")
    labels = check_fit_inputs(table.assign(width=np.resize([64, 128, 256], 14)), "looped", 5, "width")
    assert labels.tolist() == [str(v) for v in np.resize([64, 128, 256], 14)]
    budgets = table.assign(C_budget=np.where(np.arange(14) < 12, 1e18, 1e19))  # 12 rows below the largest: 2 x 6
    check_fit_inputs(budgets, "looped", holdout=True)
    with pytest.raises(InputError, match="--holdout-largest leaves 11 rows, fewer than 12"):
        check_fit_inputs(budgets.assign(C_budget=np.where(np.arange(14) < 11, 1e18, 1e19)), "looped", holdout=True)
