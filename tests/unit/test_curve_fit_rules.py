"""The curve fitter's own rules written out (issue 58; fit/curves/: fit.py, table.py, drops.py, law.py): the far
bins' width, each step's drop, the warmup's end, the rows read at the trained r, the order runs come in, the
refusals' row lists, the curve objective (a non-positive prediction scored as a residual of 1), the runs' relative
errors and the held-out summary, the thinning, the fitter's refusals, the lines and CSV it writes, and the
variable-projection starts. Milliseconds each (no curve fit is run)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from loopscale.errors import InputError
from loopscale.fit.curves import drops as DR
from loopscale.fit.curves import fit as CF
from loopscale.fit.curves.law import linear_starts
from loopscale.fit.curves.registry import curve_law
from loopscale.fit.curves.table import Curve, read_curves, trained_r_rows, warmup_end
from loopscale.fit.objective import Loss

TRUTH = {"L0": 2.9, "A": 0.55, "alpha": 0.5, "B": 400.0, "C": 2.0, "beta": 0.6, "gamma": 0.6}


def test_bin_width_step_drops_and_the_warmups_end():
    # b = ceil(sqrt(span / (window_bins + 1))), at least 1
    assert [DR.bin_steps(s) for s in (0, 9, 10, 72_000)] == [1, 1, 2, 90]
    assert DR.bin_steps(100, window_bins=3) == 5 and DR.WINDOW_BINS == 8
    eta = np.array([0.0, 0.5, 1.0, 1.0, 0.8, 0.8, 0.3, 0.4])
    np.testing.assert_allclose(DR.step_drops(eta, 2), [0, 0, 0, 0.0, 0.2, 0.0, 0.5, -0.1])  # after step 2 only
    assert warmup_end(eta) == 2 and warmup_end(np.array([1.0, 1.0, 0.5])) == 0
    assert warmup_end(np.array([0.0, 0.4, 0.8])) == 2  # rising to the end: the last step
    assert warmup_end(np.array([1.0, 2.0, 2.0, 3.0])) == 1  # the first step that does not rise


def test_drop_atoms_floor_a_zero_lr_at_1e_4_of_the_peak():
    eta = np.array([0.0, 2.0, 2.0, 1.0, 0.0])
    atoms = DR.drop_atoms(eta, 1, np.array([4]), b=1)
    # drops at k = 3 (1.0) and k = 4 (1.0); ln eta_4 read at the floor 1e-4 x peak
    np.testing.assert_allclose(atoms.drop, [1.0, 1.0])
    np.testing.assert_allclose(atoms.log_eta, [0.0, np.log(2e-4)], rtol=1e-12)
    np.testing.assert_allclose(atoms.area, [1.0, 0.0])  # S_k(t) = sum of eta_k..eta_t
    assert DR.LR_FLOOR == 1e-4


def test_rows_at_the_trained_r_and_runs_in_order_of_appearance():
    t = pd.DataFrame({"run": ["b", "b", "a", "a", "b"], "r": [4, 4, 2, 2, 4], "r_eval": [4, 2, 2, np.nan, 8.0]})
    assert trained_r_rows(t).index.tolist() == [0, 2, 3]  # r_eval = r, or empty (the trained r)
    assert len(trained_r_rows(t.drop(columns="r_eval"))) == 5  # no r_eval: every row
    table = pd.DataFrame(
        {
            "run": ["z", "z", "a", "a", "z"],
            "step": [20, 0, 0, 10, 10],
            "lr": [0.5, 1.0, 1.0, 0.5, 1.0],
            "val_loss": [2.8, 3.0, 3.1, 2.9, 2.9],
        }
    )
    curves = read_curves(table)
    assert [c.run for c in curves] == ["z", "a"]
    np.testing.assert_array_equal(curves[0].steps, [0, 10, 20])  # sorted by step
    np.testing.assert_array_equal(curves[0].loss, [3.0, 2.9, 2.8])
    bad = pd.DataFrame({"run": "a", "step": range(8), "lr": 1.0, "val_loss": [3.0, -1, -1, 2.0, -1, -1, -1, -1]})
    with pytest.raises(InputError, match=r"rows 1, 2, 4, 5, 6 \(and 1 more\) are not finite numbers > 0"):
        read_curves(bad)


def law_and_curves():
    law = curve_law("multipower")
    eta = np.concatenate([np.linspace(0, 3e-4, 51), np.full(200, 3e-4), np.linspace(3e-4, 3e-5, 150)])
    steps = np.array([60, 120, 250, 320, 400])
    c1 = Curve("one", eta, 50, steps, np.array([3.3, 3.2, 3.1, 3.0, 2.95]))
    c2 = Curve("two", eta[:301], 50, steps[:3] + 20, np.array([3.25, 3.15, 3.05]))
    law.bind([c1, c2])
    return law, [c1, c2]


def test_the_curve_objective_sums_huber_of_log_residuals_and_scores_a_non_positive_prediction_as_1():
    law, curves = law_and_curves()
    theta = law.from_user(TRUTH)
    feats = [law.features(c) for c in curves]
    loss = Loss("huber", 0.02)
    f, g = CF.objective_and_grad(theta, law, feats, curves, loss)
    res = np.concatenate([np.log(law.predict(TRUTH, c)) - np.log(c.loss) for c in curves])
    assert f == pytest.approx(float(loss.rho(res).sum()), rel=1e-12)
    h = 1e-6
    for j in (0, 2, 5):
        e = np.zeros(len(theta))
        e[j] = h
        fd = (
            CF.objective_and_grad(theta + e, law, feats, curves, loss)[0]
            - CF.objective_and_grad(theta - e, law, feats, curves, loss)[0]
        ) / (2 * h)
        assert g[j] == pytest.approx(fd, rel=1e-5, abs=1e-8)
    assert "L0" not in law.log_params  # L0 searched as it is: it can sink every prediction below 0
    f_neg, g_neg = CF.objective_and_grad(law.from_user({**TRUTH, "L0": -50.0}), law, feats, curves, loss)
    assert f_neg == pytest.approx(8 * float(loss.rho(np.array([1.0]))[0]), rel=1e-12) and not g_neg.any()


def test_relative_errors_the_held_out_summary_and_the_lines_printed(tmp_path):
    law, curves = law_and_curves()
    err, pred = CF.run_error(law, TRUTH, curves[0], "holdout")
    rel = np.abs(law.predict(TRUTH, curves[0]) - curves[0].loss) / curves[0].loss
    assert (err.points, err.mean_rel_error, err.max_rel_error) == (
        5,
        pytest.approx(rel.mean()),
        pytest.approx(rel.max()),
    )
    errors = [
        CF.RunError("a", "fit", 4, 0.5, 0.9),
        CF.RunError("b", "holdout", 3, 0.01, 0.04),
        CF.RunError("c", "holdout", 2, 0.03, 0.035),
    ]
    fit = CF.CurveFit("multipower", "L = ...", {"L0": 2.9, "A": 0.55}, 0.1, "huber", 0.001, 8, 5, ["a"], ["A"], errors)
    assert fit.holdout_summary() == {"mean_rel_error": pytest.approx(0.02), "max_rel_error": 0.04}
    assert CF.CurveFit(**{**fit.to_json(), "errors": errors[:1]}).holdout_summary() is None
    lines = CF.result_lines(fit)
    assert (
        lines[0] == "multipower law fitted to 1 run(s), 4 evaluations (huber loss of ln L, delta 0.001, L-BFGS-B); "
        "5 of 8 refined starts in the best basin"
    )
    assert (
        lines[2] == "  L0 = 2.9  A = 0.55"
        and lines[3] == "  on the edge of its box (not identified by these curves): A"
    )
    assert lines[-1] == "held out: mean relative error 2.000% (mean over runs), max 4.000%"
    assert lines[-2].split() == ["c", "holdout", "2", "3.000%", "3.500%"]
    long_name = "ann124-0.2_wsd_linear_0.2_25000_slimpajama"  # 42 characters: the columns move right for it
    wide = CF.result_lines(
        CF.CurveFit(**{**fit.to_json(), "errors": [*errors, CF.RunError(long_name, "fit", 1, 0, 0)]})
    )
    rows = [line for line in wide if line.split()[0] in {"run", "a", "c", long_name}]
    role_at = {line.index(line.split()[1], 2 + len(line.split()[0])) for line in rows}  # where the role column starts
    assert len(rows) == 4 and role_at == {2 + len(long_name) + 1}
    path = tmp_path / "pred.csv"
    CF.write_predictions(path, curves[:1], {"one": pred}, ["one"])
    out = pd.read_csv(path)
    assert out.columns.tolist() == ["run", "role", "step", "loss", "predicted", "rel_error"]
    assert (out["role"] == "holdout").all() and out["step"].tolist() == [60, 120, 250, 320, 400]
    np.testing.assert_allclose(out["rel_error"], rel, rtol=1e-9)


def test_thinning_and_the_fitters_refusals():
    eta = np.full(3001, 1e-3)
    c = Curve("c", eta, 0, np.arange(0, 3001, 1), np.linspace(3, 2, 3001))
    thin = CF.thinned(c, 7)
    np.testing.assert_array_equal(thin.steps, [0, 500, 1000, 1500, 2000, 2500, 3000])
    assert CF.thinned(c, 3001) is c and CF.MAX_FIT_POINTS == 1000
    eleven = Curve("e", eta[:11], 0, np.arange(11), np.linspace(3, 2, 11))
    np.testing.assert_array_equal(CF.thinned(eleven, 4).steps, [0, 3, 7, 10])  # rounded: 3.33 -> 3, 6.67 -> 7
    law = curve_law("multipower")
    few = Curve("few", eta, 0, np.arange(len(law.params)), np.full(len(law.params), 3.0))
    with pytest.raises(
        InputError, match=rf"{len(law.params)} evaluations cannot fit the {len(law.params)} parameters of multipower"
    ):
        CF.fit_curves(law, [few])
    with pytest.raises(InputError, match="no curves to fit"):
        CF.fit_curves(law, [])
    with pytest.raises(InputError, match=r"--holdout \['x'\]: no such run in the table \(runs: few\)"):
        CF.fit_and_predict(law, [few], ["x"])
    with pytest.raises(InputError, match="every run is held out"):
        CF.fit_and_predict(law, [few], ["few"])
    assert CF.PUBLISHED_LOSS == Loss("huber", 1e-3)


def test_linear_starts_solve_the_amplitudes_on_relative_residuals_and_keep_the_best():
    """L = L0 + A t^-alpha exactly at alpha = 0.5: the grid point 0.5 solves to (L0, A) and comes first."""
    steps = np.arange(1, 9, dtype=float)
    c = Curve("c", np.ones(9), 0, steps.astype(int), 2.0 + 3.0 * steps**-0.5)

    def columns(point, curve):
        return np.column_stack([np.ones(len(curve.steps)), curve.steps.astype(float) ** -point["alpha"]])

    out = linear_starts(
        [c], columns, {"alpha": np.array([0.2, 0.5, 0.9])}, lambda p, coef: [coef[0], coef[1], p["alpha"]], keep=2
    )
    assert out.shape == (2, 3)
    np.testing.assert_allclose(out[0], [2.0, 3.0, 0.5], rtol=1e-9)
    # off the form, the amplitudes minimise the relative residuals sum (X c / L - 1)^2, not the absolute ones
    bumpy = Curve("b", np.ones(9), 0, steps.astype(int), (2.0 + 3.0 * steps**-0.5) * (1 + 0.05 * (-1.0) ** steps))
    (got,) = linear_starts([bumpy], columns, {"alpha": np.array([0.5])}, lambda p, coef: list(coef), keep=1)
    X = columns({"alpha": 0.5}, bumpy)
    want = np.linalg.lstsq(X / bumpy.loss[:, None], np.ones(8), rcond=None)[0]
    np.testing.assert_allclose(got, want, rtol=1e-10)
    # a grid point whose best amplitude is negative is clipped into the box (L0 >= 0, amplitudes >= 1e-12)
    neg = Curve("n", np.ones(9), 0, steps.astype(int), 5.0 - 3.0 * steps**-0.5)
    (row,) = linear_starts([neg], columns, {"alpha": np.array([0.5])}, lambda p, coef: list(coef), keep=1)
    assert row[1] == 1e-12 and row[0] > 0
