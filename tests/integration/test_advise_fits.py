"""`loopscale advise` on fits made by the real `loopscale fit` (issue 41, items 3-6, 12-14, 18): a joint fit, a
recipe probe's fit, a fit whose phi is not measured, a dense toy's chinchilla fit, and crafted or oversized
records. The runs tables are shaped exactly like sweeps of the named experiments (support.family_tables:
every N_once, N_rec and F from the accounting of the model the experiment trains), so each fit records the
model shapes a real sweep's fit records. Every refusal is one line, exit 2, nothing written."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from support.cli import run_cli
from support.family_tables import experiment_rows

DEMO = {"E": 1.5, "A": 80.0, "alpha": 0.3, "B": 150.0, "beta": 0.3}  # optima inside the demo widths 16-64
DEMO_WIDTHS, DEMO_BUDGETS = [16, 24, 32, 40, 48, 64], [2.5e11, 5e11, 1e12]
FIT = ["--bootstrap", "20", "--no-profile", "--starts", "4"]
VERDICT_FIT = ["--bootstrap", "20", "--starts", "4"]  # the verdict reads phi's profile interval (fit/verdict.py)


@pytest.fixture(scope="module")
def fits(tmp_path_factory):
    """Real fits: base (demo, r = 1, 2, 4), edge (its widths >= 40 only: the minima on the grid's edge, a
    warning), joint (base + a tbptt probe), hyper (the published hyper probe with the baseline's r = 1 runs,
    fitted alone), toy (a dense 10-layer SwiGLU model within 2% of the demo's ReLU^2 sizes, chinchilla)."""
    where = tmp_path_factory.mktemp("advise_fits")
    base = experiment_rows("isodepth_cpu_demo", DEMO_WIDTHS, DEMO_BUDGETS, [1, 2, 4], 0.5, DEMO, seed=0)
    tbptt = experiment_rows(
        "isodepth_cpu_demo", DEMO_WIDTHS, DEMO_BUDGETS, [2, 4], 0.4, DEMO, seed=1, overrides=["model.recipe=tbptt"]
    )
    paper_widths, paper_budgets = [384, 512, 640, 768, 896], [1e18, 2e18, 4e18]
    hyper = experiment_rows("isodepth_hyper", paper_widths, paper_budgets, [2, 4, 8], 0.6, seed=2)
    dense = experiment_rows("isodepth", paper_widths, paper_budgets, [1], seed=3)
    toy = experiment_rows(
        "isodepth_cpu_demo",
        [288, 320, 352, 384, 416, 448],
        [1e14, 2e14, 4e14],
        [1],
        0.5,
        DEMO,
        overrides=["model.mlp=swiglu"],
    )
    tables = {
        "base": base,
        "edge": base[base["width"] >= 40],
        "tbptt": pd.concat([tbptt, base[base["r"] == 1]]),
        "hyper": pd.concat([hyper, dense]),
        "toy": toy[["N", "D", "C", "L"]],
    }
    for name, table in tables.items():
        table.to_csv(where / f"{name}.csv", index=False)
    runs = {
        "base": ["base.csv", *VERDICT_FIT],
        "edge": ["edge.csv", *VERDICT_FIT],
        "joint": ["base.csv", "tbptt.csv", "--joint", "recipe", *FIT],
        "hyper": ["hyper.csv", *FIT],
        "toy": ["toy.csv", "--law", "chinchilla", *FIT],
    }
    for name, argv in runs.items():
        res = run_cli(["fit", *argv, "--out", f"{name}.json"], cwd=where)
        assert res.returncode == 0, res.stderr
    return where


def advise(fits, fit, *argv, **kw):
    return run_cli(["advise", fits / fit, *map(str, argv)], **kw)


def refused(res, message: str) -> bool:
    return res.returncode == 2 and message in res.stderr and len(res.stderr.strip().splitlines()) == 1


def record(fits, fit: str, *argv) -> dict:
    out = fits / "advice.json"
    res = advise(fits, fit, *argv, "--json", out)
    assert res.returncode == 0, res.stderr
    return json.loads(out.read_text())


# ----------------------------------------------------------------------------------------------------
# item 3: a joint fit records its models and ranges; advise reads them


def test_a_joint_fit_records_what_it_fitted_and_advise_reads_its_family_and_r(fits):
    data = json.loads((fits / "joint.json").read_text())["data"]
    assert {int(s[0]) for s in data["shapes"]} == {1, 2, 4} and data["C"] == [2.5e11, 1e12]
    assert set(data["shapes_by_recipe"]) == {"baseline", "tbptt"}
    rec = record(fits, "joint.json", "--compute", "1e12")
    assert rec["family"]["name"] == "demo" and [x["r"] for x in rec["per_r"]] == [1, 2, 4]  # no r = 8
    assert not any("assuming --family paper" in w for w in rec["warnings"])
    assert rec["per_r"][0]["advised"]["d_model"] <= 64  # a demo-sized model, not the paper's d = 128
    res = advise(fits, "joint.json", "--compute", "1e12", "--recipe", "tbptt")
    assert res.returncode == 0 and "0 to 0" not in res.stdout and "Traceback" not in res.stderr
    assert refused(advise(fits, "joint.json", "--compute", "1e12", "--family", "paper"), "does not match the fit")
    asked = record(fits, "joint.json", "--compute", "1e12", "--r", "1,2,4,8")  # unless asked
    assert any("r = 8 not in the fitted runs" in w for w in asked["warnings"])


# ----------------------------------------------------------------------------------------------------
# item 4: a probe's fit by the path the error message recommends


def test_a_probe_fit_is_advised_by_the_path_its_error_recommends(fits):
    res = advise(fits, "hyper.json", "--compute", "4e18")
    assert refused(res, "pass --recipe for a recipe probe's fit") and "--family custom --experiment" in res.stderr
    by_recipe = record(fits, "hyper.json", "--compute", "4e18", "--recipe", "hyper")
    assert by_recipe["family"]["recipe"] == "hyper" and [x["r"] for x in by_recipe["per_r"]] == [1, 2, 4, 8]
    by_experiment = record(
        fits, "hyper.json", "--compute", "4e18", "--family", "custom", "--experiment", "isodepth_hyper"
    )
    assert by_experiment["family"]["recipe"] == "hyper"
    same = ("d_model", "N_unique", "D_tokens", "L")  # the same models (size is the paper grid's label only)
    assert [[x["advised"][k] for k in same] for x in by_experiment["per_r"]] == [
        [x["advised"][k] for k in same] for x in by_recipe["per_r"]
    ]


# ----------------------------------------------------------------------------------------------------
# item 5: what a fit JSON may hold


def _craft(fits, name: str, edit) -> str:
    """A copy of the base fit's JSON changed by `edit(dict) -> dict or text`."""
    changed = edit(json.loads((fits / "base.json").read_text()))
    (fits / name).write_text(changed if isinstance(changed, str) else json.dumps(changed))
    return name


def test_oversized_or_deeply_nested_fit_jsons_are_refused_in_one_line(fits):
    def replicates(n):
        def edit(d):
            d["bootstrap"]["params"] = {k: (v * n)[:n] for k, v in d["bootstrap"]["params"].items()}
            return d

        return edit

    cases = {
        "many.json": (replicates(100_001), "advise reads at most 100,000"),
        "padded.json": (lambda d: json.dumps(d) + " " * (65 * 2**20), "a fit record holds at most 64 MiB"),
        "values.json": (lambda d: {**d, "warnings": [0] * 4_000_001}, "a fit record holds at most 4,000,000"),
        "deep.json": (
            lambda d: json.dumps(d)[:-1] + ', "x": ' + "[" * 100_000 + "]" * 100_000 + "}",
            "nested too deep",
        ),
    }
    for name, (edit, message) in cases.items():
        res = advise(fits, _craft(fits, name, edit), "--compute", "1e12", "--json", fits / "x.json")
        assert refused(res, message), (name, res.stderr[-300:])
        assert not (fits / "x.json").exists()


# ----------------------------------------------------------------------------------------------------
# item 6: the fit's verdict carried and hedged


def test_advise_states_the_fits_verdict_and_hedges_by_it(fits):
    measured = advise(fits, "base.json", "--compute", "1e12")
    assert measured.returncode == 0 and "fit: phi measured" in measured.stdout and "tentative" not in measured.stdout
    assert "the fit's verdict warns" not in measured.stdout
    # minima on the grid's edge: a warning for extrapolating N*, D* (what advice does), not a failure of phi
    res = advise(fits, "edge.json", "--compute", "1e12")
    assert res.returncode == 0 and "fit: phi measured" in res.stdout
    assert (
        "note: the fit's verdict warns: N*/D* extrapolation not warranted: iso-FLOP minimum on the edge" in res.stdout
    )
    # a fit whose phi is not measured: the best r is tentative
    name = _craft(
        fits,
        "wide.json",
        lambda d: {
            **d,
            "conditioning": {**d["conditioning"], "measured": False, "verdict": "not measured: phi's interval is wide"},
        },
    )
    res = advise(fits, name, "--compute", "1e12")
    assert res.returncode == 0 and "fit: not measured: phi's interval is wide" in res.stdout
    assert "best: tentative (the fit is not measured): r = " in res.stdout
    rec = record(fits, name, "--compute", "1e12")
    assert rec["fit"]["measured"] is False and rec["best"]["verdict"].startswith("tentative")


# ----------------------------------------------------------------------------------------------------
# item 12: every parameter a finite number in its bounds


def _set(path, value):
    def edit(d):
        node = d
        for key in path[:-1]:
            node = node[key]
        if value is KeyError:
            del node[path[-1]]
        else:
            node[path[-1]] = value
        return d

    return edit


@pytest.mark.parametrize(
    "edit, message",
    [
        (_set(["params", "phi"], math.nan), "parameter phi = nan is not finite"),
        (_set(["params", "alpha"], -0.1), "parameter alpha = -0.1 is outside the fitter's bounds"),
        (_set(["params"], "E=1"), "params must be a dict"),
        (_set(["params", "phi"], KeyError), "has no parameter 'phi'"),
        (_set(["params", "E"], math.inf), "parameter E = inf is not finite"),
        (_set(["params", "beta"], "0.3"), "parameter beta must be a number"),
        (_set(["bootstrap", "params", "phi"], [0.5] * 7), "unequal lengths"),
        (_set(["bootstrap", "params", "alpha"], [-1.0] * 20), "a bootstrap replicate of alpha = -1"),
        (_set(["data", "shapes"], [[1, "x", 3]]), "must be [r, N_once, N_rec]"),
        (_set(["data", "shapes"], [[0.5, 100.0, 10.0]]), "impossible model"),
        (_set(["data", "shapes"], [[[[[[1]]]]]]), "must be [r, N_once, N_rec]"),
        (_set(["data", "C"], [1e12]), "range of C must be [low, high]"),
        (_set(["conditioning"], "measured"), "'conditioning' must be a dict"),
    ],
)
def test_crafted_parameters_and_shapes_are_refused_in_one_line(fits, edit, message):
    out = fits / "crafted_advice.json"
    res = advise(fits, _craft(fits, "crafted.json", edit), "--compute", "1e12", "--json", out)
    assert refused(res, message), res.stderr[-400:]
    assert res.stdout == "" and not out.exists()


# ----------------------------------------------------------------------------------------------------
# items 13, 14: --dpi and the budget checked before anything is written


@pytest.mark.parametrize("dpi", ["-5", "100000"])
def test_dpi_is_checked_before_anything_is_written(fits, dpi):
    out_json, out_png = fits / "dpi.json", fits / "dpi.png"
    res = advise(fits, "base.json", "--compute", "1e12", "--dpi", dpi, "--plot", out_png, "--json", out_json)
    assert refused(res, "--dpi must be between 10 and 1000")
    assert not out_json.exists() and not out_png.exists() and not out_png.with_suffix(".pdf").exists()


def test_a_budget_below_one_optimizer_step_is_refused(fits):
    res = advise(fits, "base.json", "--compute", "1e5")
    assert refused(res, "no r meets the constraints") and "does not buy one optimizer step (1024 tokens" in res.stderr
    rec = record(fits, "base.json", "--compute", "1e12")
    assert all(x["advised"]["D_tokens"] >= 1024 for x in rec["per_r"])


# ----------------------------------------------------------------------------------------------------
# item 18: a dense toy's chinchilla fit; equiv with a NaN phi


def test_a_chinchilla_fit_of_another_model_matches_no_family_and_one_r_is_not_compared(fits):
    res = advise(fits, "toy.json", "--compute", "2e14")  # SwiGLU sizes are 1-1.5% off the demo's ReLU^2 ones
    assert refused(res, "match none of the families")
    dense = fits / "dense.csv"
    pd.read_csv(fits / "base.csv").query("r == 1")[["N", "D", "C", "L"]].to_csv(dense, index=False)
    assert run_cli(["fit", dense, "--law", "chinchilla", *FIT, "--out", fits / "dense.json"]).returncode == 0
    rec = record(fits, "dense.json", "--compute", "1e12")
    assert (
        rec["family"]["name"] == "demo"
        and rec["best"]["verdict"] == "r = 1: the only r advised, so no comparison between r"
    )


@pytest.mark.parametrize("argv", [["--phi", "nan"], ["--phi", "inf"], ["--phi", "0.5", "--r", "nan"]])
def test_equiv_refuses_a_number_that_is_not_finite(argv):
    res = run_cli(["equiv", "--r", "4", "--n-once", "2e8", "--n-rec", "1e8", *argv])
    assert res.returncode == 2 and "must be a finite number" in res.stderr and res.stdout == ""


def test_equiv_refuses_a_fit_with_a_crafted_phi(fits):
    res = run_cli(
        [
            "equiv",
            "--r",
            "4",
            "--n-once",
            "2e8",
            "--n-rec",
            "1e8",
            "--fit",
            _craft(fits, "nan_phi.json", _set(["params", "phi"], math.nan)),
        ],
        cwd=fits,
    )
    assert refused(res, "parameter phi = nan is not finite")
