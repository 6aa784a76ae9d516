"""The test-time recurrence law (loopscale/fit/laws/testtime.py) and its fit (loopscale/fit/testtime.py): rows drawn
from a known law recovered within their intervals, fixed-r degradation against sampled-r saturation, published
rows of other looped models fitted through `loopscale fit --law testtime`, and its one-line refusals."""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pytest

import loopscale.fit.testtime as tt  # the modules: their testtime_* functions are not tests
import loopscale.fit.testtime_phi as tt_phi
from loopscale.errors import InputError
from loopscale.fit.laws.testtime import TestTime, is_sampled
from loopscale.fit.objective import Loss
from support.cli import run_cli

TRUTH = {
    "fixed4": {"r_train": 4, "r_eval": [1, 2, 3, 4, 6, 8, 16], "L_inf": 3.10, "A": 0.25, "delta": 0.08},
    "sampled": {"r_train": "sampled", "r_eval": [1, 2, 3, 4, 6, 8, 16], "L_inf": 3.05, "A": 0.40, "delta": 0.0},
}


def drawn(shape: str, rate: float, noise: float = 0.0, seed: int = 0) -> pd.DataFrame:
    """Rows of a fixed-r model (r_train 4) and a sampled-r one (scale 1) from the law itself, times (1 + noise z)."""
    rng = np.random.default_rng(seed)
    rows = []
    for model, t in TRUTH.items():
        fixed = t["r_train"] != "sampled"
        scale = float(t["r_train"]) if fixed else 1.0
        for r in t["r_eval"]:
            x = r / scale
            xe = min(x, 1.0) if fixed else x
            s = np.exp(-(xe - 1) / rate) if shape == "exp" else xe**-rate
            d = max(0.0, 1 - 1 / x) if fixed else 0.0
            L = t["L_inf"] + t["A"] * s + t["delta"] * d
            rows.append({"model": model, "r_train": t["r_train"], "r_eval": r, "loss": L * (1 + noise * rng.normal())})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("shape,rate", [("exp", 0.7), ("power", 1.3)])
def test_noise_free_rows_are_recovered_exactly(shape, rate):
    table = tt.testtime_table(drawn(shape, rate))
    for model, t in TRUTH.items():
        fit = tt.fit_one(table[table["model"] == model].reset_index(drop=True), shape, intervals=False)
        p = fit["params"]
        assert p["tau" if shape == "exp" else "gamma"] == pytest.approx(rate, rel=1e-4)
        assert p[f"L_inf[{model}]"] == pytest.approx(t["L_inf"], rel=1e-5)
        assert p[f"A[{model}]"] == pytest.approx(t["A"], rel=1e-4)
        assert (f"delta[{model}]" in p) == (model == "fixed4")  # only a fixed-r model drifts past r_train
        if model == "fixed4":
            assert p["delta[fixed4]"] == pytest.approx(t["delta"], rel=1e-4)


def test_noisy_rows_recovered_within_the_profile_intervals():
    """0.2% noise, seed 0: every true value inside its 95% interval, per model and jointly (one rate)."""
    table = tt.testtime_table(drawn("exp", 0.7, noise=0.002, seed=0))
    record = tt.fit_testtime(table, "exp", compare=False)
    fits = [*record["per_model"].values(), record["joint"]]
    for fit in fits:
        truth = {"tau": 0.7}
        for model in fit["models"]:
            truth[f"L_inf[{model}]"] = TRUTH[model]["L_inf"]
            if model == "fixed4":
                truth["delta[fixed4]"] = TRUTH[model]["delta"]
        for name, value in truth.items():
            lo, hi = fit["intervals"][name]
            assert lo is not None and hi is not None and lo <= value <= hi, (name, lo, value, hi)
        assert fit["conditioning"]["measured"], fit["conditioning"]["verdict"]
        assert fit["conditioning"]["verdict"].startswith("test-time law measured: tau = ")


def test_fixed_r_degrades_past_r_train_and_sampled_r_saturates():
    """The law's two regimes: a fixed-r model's loss rises past r_train toward L(r_train) + delta and gains nothing
    from the saturating term there; a sampled-r model keeps falling toward L_inf."""
    params = {"tau": 0.5, "L_inf[f]": 3.0, "A[f]": 0.3, "delta[f]": 0.1, "L_inf[s]": 3.0, "A[s]": 0.3}
    r = np.array([1.0, 2.0, 4.0, 8.0, 16.0, 1e6])
    grid = pd.DataFrame(
        {
            "r_eval": np.r_[r, r],
            "model": ["f"] * 6 + ["s"] * 6,
            "r_scale": [4.0] * 6 + [4.0] * 6,
            "fixed": [True] * 6 + [False] * 6,
        }
    )
    L = TestTime.predict_table(params, grid)
    fixed, sampled = L[:6], L[6:]
    assert np.all(np.diff(fixed[:3]) < 0)  # below r_train: more passes help
    assert fixed[2] == pytest.approx(3.3)  # at r_train: L_inf + A
    assert fixed[3] == pytest.approx(3.3 + 0.05) and fixed[4] == pytest.approx(3.3 + 0.075)  # delta (1 - r_train / r)
    assert fixed[5] == pytest.approx(3.4, abs=1e-6)  # the drift saturates at delta
    assert np.all(np.diff(sampled) < 0) and sampled[5] == pytest.approx(3.0)  # pure saturation to the floor


LOOPED_NANOCHAT = """model,r_train,r_eval,bpb
fixed4,4,2,0.9446
fixed4,4,4,0.8313
fixed4,4,8,0.844
fixed4,4,16,0.844
sampled,sampled,2,0.8448
sampled,sampled,4,0.8342
sampled,sampled,8,0.833
sampled,sampled,16,0.833
"""  # published (looped_nanochat's log, docs/design.md "Test-time depth"): ~0.844 / ~0.833 written at 8 and 16


def test_published_rows_fit_through_the_command(tmp_path):
    path = tmp_path / "nanochat.csv"
    path.write_text(LOOPED_NANOCHAT)
    out = tmp_path / "tt.json"
    res = run_cli(["fit", path, "--law", "testtime", "--loss-col", "bpb", "--out", out])
    assert res.returncode == 0, res.stderr
    record = json.loads(out.read_text())
    fixed, sampled = record["per_model"]["fixed4"], record["per_model"]["sampled"]
    assert fixed["params"]["delta[fixed4]"] > 0  # the published fixed-r model degrades past r_train
    assert "delta[sampled]" not in sampled["params"]
    pred = np.array(sampled["predicted"])
    assert np.max(np.abs(pred / np.array([0.8448, 0.8342, 0.833, 0.833]) - 1)) < 2e-3
    assert record["joint"]["models"] == ["fixed4", "sampled"]
    assert "model fixed4" in res.stdout and "joint (2 models, one rate)" in res.stdout
    assert record["shapes"]["better"] in ("exp", "power")


def test_two_depths_a_model_fit_but_are_not_measured(tmp_path):
    """Perplexity at 8 and 16 loops only (published, another open looped model): the command fits, holds what the
    rows cannot identify and says so; exit 0."""
    path = tmp_path / "ppl.csv"
    path.write_text(
        "model,r_train,r_eval,perplexity\nfixed8,8,8,57.9\nfixed8,8,16,170.7\n"
        "random,random,8,65.2\nrandom,random,16,65.2\n"
    )
    res = run_cli(["fit", path, "--law", "testtime", "--loss-col", "perplexity", "--shape", "power"])
    assert res.returncode == 0, res.stderr
    assert "not measured: 2 rows fix 2 free parameters exactly" in res.stdout
    assert "gamma held at 1" in res.stdout


@pytest.mark.parametrize(
    "csv,args,message",
    [
        ("model,r_train,r,bpb\na,4,2,1.0\n", [], "no r_eval column 'r_eval' (--r-eval-col)"),
        ("model,r_eval,bpb\na,2,1.0\n", [], "no r_train column 'r_train' (--r-train-col)"),
        ("model,r_train,r_eval,bpb\na,4,2,-1.0\n", [], "needs a positive number in every row; rows [0]"),
        ("model,r_train,r_eval,bpb\na,4,2,1.0\na,8,4,0.9\n", [], "model 'a' has more than one r_train"),
        ("model,r_train,r_eval,bpb\na,4,2,1.0\n", ["--joint", "model"], "--joint is not available with --law testtime"),
        ("model,r_train,r_eval,x\na,4,2,1.0\n", [], "no loss column: name one with --loss-col"),
    ],
)
def test_refusals_are_one_line(tmp_path, csv, args, message):
    path = tmp_path / "t.csv"
    path.write_text(csv)
    res = run_cli(["fit", path, "--law", "testtime", *args])
    assert res.returncode != 0
    assert message in res.stderr and "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_column_mapping_and_the_words_for_sampled_r():
    raw = pd.DataFrame(
        {
            "name": ["a", "a", "b", "b"],
            "trained": ["4", "4", "poisson-lognormal", "poisson-lognormal"],
            "passes": [2, ">=8", 2, "≥8"],
            "nll": [1.2, 1.1, 1.3, 1.0],
        }
    )
    table = tt.testtime_table(raw, tt.TestTimeColumns(model="name", r_eval="passes", r_train="trained", L="nll"))
    assert table["r_eval"].tolist() == [2.0, 8.0, 2.0, 8.0]
    assert table["fixed"].tolist() == [True, True, False, False]
    assert table["r_scale"].tolist() == [4.0, 4.0, 1.0, 1.0]
    assert [is_sampled(v) for v in ("sampled", "random", 4, "4", "fixed", "")] == [
        True,
        True,
        False,
        False,
        False,
        False,
    ]
    with pytest.raises(InputError, match="loss column 'nope'"):
        tt.testtime_table(raw, tt.TestTimeColumns(model="name", r_eval="passes", r_train="trained", L="nope"))


def test_shapes_compared_on_held_out_rows():
    """Rows from the power law: leave-one-out prefers power; from the exp law: exp."""
    for shape, rate in (("power", 1.3), ("exp", 0.7)):
        table = tt.testtime_table(drawn(shape, rate, noise=0.0005, seed=1))
        assert tt.compare_shapes(table)["better"] == shape


def test_testtime_multiplier_inverts_the_training_law():
    train = {"E": 1.6, "A": 30.0, "alpha": 0.2, "B": 900.0, "beta": 0.37}
    N_once, N_rec, D = 2e7, 1e7, 1e9
    m = np.array([1.0, 2.0, 3.5])
    L = train["E"] + train["A"] * (N_once + m * N_rec) ** -0.2 + train["B"] * D**-0.37
    np.testing.assert_allclose(tt_phi.testtime_multiplier(L, N_once, N_rec, D, train), m, rtol=1e-9)
    assert np.isnan(tt_phi.testtime_multiplier(np.array([1.0]), N_once, N_rec, D, train))[0]  # below the law's reach


def test_noise_scale_is_widened_to_a_t_interval():
    """One row beyond three free parameters (the published sampled-r model): sigma is the residuals' RMS over the
    degrees of freedom times t_{1, 0.975} / z_0.975 = 12.706 / 1.960, so the profile interval is a t-interval."""
    raw = pd.read_csv(io.StringIO(LOOPED_NANOCHAT))
    table = tt.testtime_table(raw[raw["model"] == "sampled"].reset_index(drop=True))
    law = TestTime.bind_table(table, "exp")
    data = law.data_from_table(table)
    state = tt._solve(law, data, Loss(), 6)
    sigma, dof = tt.noise_scale(law, state)
    res = law.log_predict(state.best.theta, data) - data.log_L
    assert dof == 1
    assert sigma == pytest.approx(np.sqrt(np.sum(res**2)) * 12.7062047 / 1.9599640, rel=1e-6)


def test_phi_tt_through_a_training_fit(tmp_path):
    """--train-fit: a model whose test-time losses follow the training law with N_rec's multiplier r^0.3 (so each
    loss inverts to m = r^0.3 exactly) gets phi_tt near 0.3 at its r_scale and a positive worth of one more pass;
    a table without N_once, N_rec is said so."""
    from loopscale.fit.result import FitResult

    train = {"E": 1.6, "A": 30.0, "alpha": 0.2, "B": 900.0, "beta": 0.37}
    N_once, N_rec, D = 2e6, 8e6, 1e9
    rows = []
    for r in (1, 2, 3, 4, 6, 8, 12, 16):
        L = train["E"] + train["A"] * (N_once + r**0.3 * N_rec) ** -0.2 + train["B"] * D**-0.37
        rows.append({"model": "m", "r_train": "sampled", "r_eval": r, "L": L, "N_once": N_once, "N_rec": N_rec, "D": D})
    path = tmp_path / "tt.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    fit_path = tmp_path / "train.json"
    FitResult("looped", {**train, "phi": 0.5}, 0.0, 0.0, 1, 1, 1, {}).write_json(fit_path)
    out = tmp_path / "out.json"
    res = run_cli(["fit", path, "--law", "testtime", "--shape", "power", "--train-fit", fit_path, "--out", out])
    assert res.returncode == 0, res.stderr
    phi = json.loads(out.read_text())["testtime_phi"]["m"]
    assert phi["phi_tt"] == pytest.approx(0.3, abs=0.05) and phi["params_worth_next_pass"] > 0
    assert "one more pass is worth" in res.stdout
    pd.DataFrame(rows).drop(columns=["N_once", "N_rec"]).to_csv(path, index=False)
    res = run_cli(["fit", path, "--law", "testtime", "--train-fit", fit_path])
    assert res.returncode == 0 and "phi_tt not computed (the table has no N_once, N_rec" in res.stdout


def test_one_models_curve_from_a_joint_fits_parameters_is_its_own():
    """A table of some of a fit's models (`curve`: one model's r_eval grid) at a joint fit's parameters: each row at
    its own model's L_inf, A, delta (the data coded the table's sorted labels, so 'sampled' alone read 'fixed4''s),
    by hand from TRUTH; a model the parameters do not hold refused in one line."""
    rate = 1.5
    params = {"tau": rate}
    for model, t in TRUTH.items():
        params |= {f"L_inf[{model}]": t["L_inf"], f"A[{model}]": t["A"]}
        params |= {f"delta[{model}]": t["delta"]} if t["r_train"] != "sampled" else {}
    r_eval = np.array([1.0, 2.0, 8.0])
    t = TRUTH["sampled"]
    want = t["L_inf"] + t["A"] * np.exp(-(r_eval - 1) / rate)
    np.testing.assert_allclose(tt.curve(params, "sampled", 1.0, False, r_eval), want, rtol=1e-12)
    t = TRUTH["fixed4"]
    x = r_eval / 4
    fixed = t["L_inf"] + t["A"] * np.exp(-(np.minimum(x, 1) - 1) / rate) + t["delta"] * np.maximum(0, 1 - 1 / x)
    np.testing.assert_allclose(tt.curve(params, "fixed4", 4.0, True, r_eval), fixed, rtol=1e-12)
    with pytest.raises(InputError, match=r"no parameters of model \['other'\]"):
        tt.curve(params, "other", 1.0, False, r_eval)
