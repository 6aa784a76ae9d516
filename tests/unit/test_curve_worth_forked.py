"""A forked design's curves, by hand (issue 55 item 3, loopscale/fit/curve_worth.py): a job's branches hold its stable
parent's evaluations once, on one AR(1) path that each branch's cooldown continues from its fork; the job (parent
and its branches) is the cluster; and n_eff is the squared ratio of the two intervals the fits report, written out
with dense matrices from the noise as `benchmarks/bench_curve_calibration.py` draws it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import f as f_dist

import loopscale.fit.curve_worth as cw
from loopscale.data.heldout import curve_steps
from loopscale.fit.laws.registry import make_law
from loopscale.fit.runs_table import canonical_table
from loopscale.fit.synthetic import DEMO_BATCH_TOKENS, demo_grid

# the tuned demo's looped-entry-curve fit (docs/results.md, "A curve's schedule terms from its whole run")
TRUTH = {"phi": 0.7066, "kappa": 0.4515, "E": 3.047, "A": 4.203, "alpha": 0.212, "B": 62.6, "beta": 0.4156, "K": 0.0946}
LAW = "looped-entry-curve"


def evaluated(steps: int, warmup: int, cooldown: int | None) -> list[int]:
    return curve_steps(steps, 12, (warmup, cooldown), cooldown)


def forked_demo() -> pd.DataFrame:
    """The CPU demo's 44 points as 16 forked jobs, one per (r, width), one seed."""
    grid = demo_grid().assign(seed=0, steps=lambda t: np.round(t["D"] / DEMO_BATCH_TOKENS).astype(int))
    return grid.assign(parent="r" + grid["r"].astype(str) + "-d" + grid["width"].astype(str))


def test_a_jobs_branches_hold_its_parents_evaluations_once_on_one_ar1_path():
    design = pd.DataFrame(
        {"r": [2, 1, 2], "N_once": [1e6, 3e6, 1e6], "N_rec": [2e6, 0.0, 2e6], "D": [5e7, 3e7, 1e8]}
        | {"steps": [50, 30, 100], "parent": ["p", "", "p"], "seed": [0, 0, 0]}
    )
    seen = []

    def at(steps, warmup, cooldown):
        seen.append((steps, warmup, cooldown))
        return [warmup, steps // 2, steps] + ([cooldown] if cooldown is not None else [])

    table = cw.design_curves(design, at, TRUTH, make_law(LAW))
    # the parent (80 steps: the longest fork) once, with no cooldown; each branch's own steps after its fork;
    # the warmup shared, 2% of the shortest branch; the run alone as before
    assert seen == [(80, 1, None), (50, 1, 40), (30, 1, 24), (100, 1, 80)]
    by_run = {run: rows for run, rows in table.groupby("run")}
    assert by_run["run0"]["step"].tolist() == [1, 40, 50] and by_run["run2"]["step"].tolist() == [1, 40, 80, 100]
    assert by_run["run1"]["step"].tolist() == [1, 15, 24, 30] and not by_run["run1"]["from_parent"].any()
    assert by_run["run0"]["from_parent"].tolist() == [True, True, False]
    assert by_run["run2"]["from_parent"].tolist() == [True, True, True, False]
    assert by_run["run2"]["lr_multiplier"].tolist() == pytest.approx([1.0, 1.0, 1.0, 1 - 19 / 20])
    assert by_run["run2"]["tokens"].tolist() == pytest.approx([1e6, 4e7, 8e7, 1e8])
    assert by_run["run0"]["job"].iloc[0] == by_run["run2"]["job"].iloc[0] != by_run["run1"]["job"].iloc[0]
    # the noise: offset 1 + AR(1) 4 rho^d, d the evaluations between two rows along the job's path
    noise = cw.CurveNoise(1.0, 2.0, 0.5, 3, 3.0)
    job = table[table["parent"] == "p"].reset_index(drop=True)  # run0: 1, 40, 50; run2: 1, 40, 80, 100
    cov = cw.job_noise_cov(job, noise)
    assert cov[1, 4] == cov[1, 1] == 5.0  # step 40, one draw in both branches
    assert cov[2, 6] == pytest.approx(1 + 4 * 0.5**3)  # 50 and 100: 50 <- 40 -> 80 -> 100
    assert cov[2, 5] == pytest.approx(1 + 4 * 0.5**2)  # 50 and the parent's 80
    assert cov[2, 0] == pytest.approx(1 + 4 * 0.5**2) and cov[6, 3] == pytest.approx(1 + 4 * 0.5**3)
    alone = table[table["run"] == "run1"].reset_index(drop=True)
    assert cw.job_noise_cov(alone, noise)[0, 3] == pytest.approx(1 + 4 * 0.5**3)


def noise_matrix(table: pd.DataFrame, s_run: float, s_eval: float, rho: float) -> np.ndarray:
    """(rows, draws) A with the log noise A u, u unit normals, drawn as bench_curve_calibration.forked_noise draws
    it: per job an offset, an AR(1) along the parent's stable evaluations, each branch's own rows continuing from
    its last shared one (a run alone: one AR(1) along it)."""
    n = len(table)
    A, used = np.zeros((n, 4 * n)), [0]

    def fresh():
        used[0] += 1
        return np.eye(4 * n)[used[0] - 1]

    job = np.where(table["parent"] != "", table["parent"], table["run"])
    shared = table["from_parent"].to_numpy(dtype=bool)
    for j in pd.unique(job):
        offset, chain, prev = s_run * fresh(), {}, None
        for s in sorted(set(table.loc[(job == j) & shared, "step"])):
            prev = fresh() if prev is None else rho * prev + np.sqrt(1 - rho**2) * fresh()
            chain[s] = prev
        for run in pd.unique(table.loc[job == j, "run"]):
            prev = None
            for i in table.index[table["run"] == run]:
                if shared[i]:
                    prev = chain[table.at[i, "step"]]
                else:
                    prev = fresh() if prev is None else rho * prev + np.sqrt(1 - rho**2) * fresh()
                A[i] = offset + s_eval * prev
    return A


def reported_widths(J, Sigma, jobs, i_phi, curves):
    """(sandwich variance of phi, squared 95% half-width of the profile as reported): dense, by the fit's rules."""
    n, p = J.shape
    bread = np.linalg.inv(J.T @ J)
    M = np.eye(n) - J @ bread @ J.T
    Z = (jobs[:, None] == np.unique(jobs)[None, :]).astype(float)
    G = Z.shape[1]
    expected = np.trace(Z.T @ M @ Sigma @ M @ Z)
    if curves:
        K = Z.T @ M @ Z
        dof = int(np.trace(K) ** 2 / np.sum(K * K))
        scale = expected / np.trace(K)
    else:
        dof = G - p
        scale = expected * G / (n * dof)
    V = bread @ J.T @ Sigma @ J @ bread
    return V[i_phi, i_phi], f_dist.ppf(0.95, 1, dof) * scale * bread[i_phi, i_phi]


@pytest.mark.parametrize("noise", [(0.0, 0.004, 0.74), (0.003, 0.002, 0.3)])
def test_n_eff_is_the_reported_width_ratio_with_the_job_as_the_cluster(noise):
    design = forked_demo()
    table = cw.design_curves(design, evaluated, TRUTH, make_law(LAW))
    curves = canonical_table(table, LAW)  # the fitted rows: the warmup and a later branch's shared rows left out
    assert len(curves) < len(table) and len(curves) == len(curves[["run", "step"]].drop_duplicates())
    full = noise_matrix(table, *noise)
    row_of = {key: i for i, key in enumerate(zip(table["run"], table["step"]))}
    A = full[[row_of[key] for key in zip(curves["run"], curves["step"])]]
    law = make_law(LAW, curves["r"].to_numpy(dtype=float))
    _, J = law.log_predict_and_jac(law.from_user(TRUTH), law.data_from_table(curves))
    jobs = np.where(curves["parent"] != "", curves["parent"], curves["run"])
    v_c, w_c = reported_widths(J, A @ A.T, jobs, law.internal_names.index("phi"), curves=True)
    last = curves.groupby("run")["step"].idxmax().to_numpy()
    finals = curves.loc[last]
    f_law = make_law("looped-entry", finals["r"].to_numpy(dtype=float))
    params = make_law(LAW).final_point_params(TRUTH)
    _, J_f = f_law.log_predict_and_jac(f_law.from_user({k: params[k] for k in f_law.user_names}),
                                       f_law.data_from_table(finals))  # fmt: skip
    v_f, w_f = reported_widths(J_f, A[last] @ A[last].T, jobs[last], f_law.internal_names.index("phi"), curves=False)
    worth = cw.curve_worth_parts(design, TRUTH, LAW, cw.CurveNoise(*noise, 44, 12.0), evaluated)
    assert worth.variance == pytest.approx(v_f / v_c, rel=1e-8)
    assert worth.reported == pytest.approx(w_f / w_c, rel=1e-8)
    assert worth.final_dof == 16 - 7 and 9 < worth.curve_dof < 14  # 16 jobs; looped-entry: 7 parameters


def test_a_forked_design_is_worth_less_than_its_branches_trained_alone_and_a_job_is_one_draw():
    design = forked_demo()
    alone = design.drop(columns="parent")  # the same 44 points, each its own wsd run with its own stable phase
    along = cw.CurveNoise(0.0, 0.004, 0.74, 44, 12.0)
    forked, apart = (cw.curve_worth(d, TRUTH, LAW, along, evaluated) for d in (design, alone))
    # the shared stable phases counted once and the job as the cluster: the demo's curves are worth 1.74 final points
    # as the fits report them where 44 separate runs' would be worth 2.28 (the rule before gave the forked design the
    # latter)
    assert 1.6 < forked < 1.9 and 2.15 < apart < 2.4
    # all noise a job's offset: a job's curves are one draw, as its final points are, whatever its branches
    offset = cw.CurveNoise(0.004, 0.0, 0.0, 44, 12.0)
    worth = cw.curve_worth_parts(design, TRUTH, LAW, offset, evaluated)
    assert 0.8 < worth.variance < 1.05


def test_each_seed_of_a_forked_table_design_keeps_its_own_parents_evaluations():
    """`loopscale power --design runs.csv --seeds 2` repeats each row per seed with the table's `parent` as it is:
    seed 1's stable parent is another run, so its shared evaluations are fitted beside seed 0's (a parent's rows
    are kept once per job: parent and seed), and the 2-seed design is the 1-seed one twice: the same sandwich
    ratio (J^T J, the meat and both fits' V halve alike), every row twice. Before, seed 1's shared rows went as
    copies of seed 0's: 1.05 where the ratio is 1.21 on the CPU demo's forked design."""
    one = forked_demo()
    two = one.loc[one.index.repeat(2)].reset_index(drop=True).assign(seed=lambda t: np.arange(len(t)) % 2)
    law = make_law(LAW)
    rows = {k: canonical_table(cw.design_curves(d, evaluated, TRUTH, law), LAW) for k, d in ((1, one), (2, two))}
    assert len(rows[2]) == 2 * len(rows[1]) and rows[1]["from_parent"].sum() > 0
    noise = cw.CurveNoise(0.001, 0.0025, 0.74, 16, 12.0)
    worth = {k: cw.curve_worth_parts(d, TRUTH, LAW, noise, evaluated) for k, d in ((1, one), (2, two))}
    assert worth[2].variance == pytest.approx(worth[1].variance, rel=1e-9) == 1.2089277
