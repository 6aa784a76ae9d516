"""`loopscale advise` as a user runs it: the table, the JSON and the figure it writes, and one-line errors
with a non-zero exit and nothing written for a fit of the wrong law, a family the fit was not made for,
impossible constraints; missing replicates give point estimates and say so."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_advise import R_ALL, TRUTH, make_fit

from loopscale.analysis.advise.family import named_family
from loopscale.cli import main

BASE = {k: TRUTH[k] for k in ("E", "A", "alpha", "B", "beta")}


def replicates(n=40, seed=0):
    """Parameter sets scattered around TRUTH (a stand-in for bootstrap replicates)."""
    rng = np.random.default_rng(seed)
    return {k: (v * (1 + 0.03 * rng.standard_normal(n))).tolist() for k, v in TRUTH.items()}


def paper_shapes():
    family = named_family("paper", R_ALL)
    return [
        [r, float(family.value("N_once", r, d)), float(family.value("N_rec", r, d))] for r in R_ALL for d in (384, 1280)
    ]


@pytest.fixture
def fit_path(tmp_path):
    def write(name="fit.json", **kw):
        path = tmp_path / name
        make_fit(**kw).write_json(path)
        return path

    return write


def run(capsys, *argv):
    rc = main(["advise", *map(str, argv)])
    out, err = capsys.readouterr()
    return rc, out, err


def test_advise_prints_the_table_and_writes_json_and_png(fit_path, tmp_path, capsys):
    fit = fit_path(
        params=TRUTH,
        replicates=replicates(),
        shapes=paper_shapes(),
        data={"N": [3e7, 2e9], "D": [1e9, 5e10], "C": [4.6e17, 2.2e19]},
    )
    rc, out, err = run(capsys, fit, "--compute", "1e20", "--json", tmp_path / "a.json", "--plot", tmp_path / "a.png")
    assert rc == 0, err
    assert "family paper" in out and "best: r = 1" in out and "break-even at C = 1e+20" in out
    assert "outside the fitted budgets" in out  # 1e20 > the fitted 2.2e19
    record = json.loads((tmp_path / "a.json").read_text())
    assert [rec["r"] for rec in record["per_r"]] == list(R_ALL)
    assert record["best"]["r"] == 1 and record["best"]["n_replicates"] == 40
    assert (tmp_path / "a.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "a.pdf").read_bytes()[:5] == b"%PDF-"  # a vector copy for a paper, like every figure
    from PIL import Image

    assert Image.open(tmp_path / "a.png").info["dpi"][0] >= 199.9
    advised = record["per_r"][0]["advised"]
    assert advised["d_model"] % 128 == 0 and advised["steps"] == round(advised["D_tokens"] / 262144)


def test_a_tight_cap_and_the_inference_options(fit_path, capsys):
    fit = fit_path(params=TRUTH, replicates=replicates(), shapes=paper_shapes())
    rc, out, _ = run(capsys, fit, "--compute", "1e20", "--max-unique-params", "5e7", "--r", "1,4")
    assert rc == 0 and "max_unique_params" in out and "best: r = 4" in out
    rc, out, _ = run(capsys, fit, "--compute", "1e20", "--inference-tokens", "1e11", "--r", "1,16")
    assert rc == 0 and "lifetime cost" in out and "r = 16 not in the fitted runs" in out
    with pytest.raises(SystemExit) as exc:  # argparse: the two serving constraints exclude each other
        main(["advise", str(fit), "--compute", "1e20", "--max-inference-flops", "1e9", "--inference-tokens", "1e9"])
    assert exc.value.code == 2


@pytest.mark.parametrize(
    "kw, argv, message",
    [
        (dict(params=BASE, law="chinchilla"), ["--r", "1,4"], "only r = 1 can be advised"),
        (
            dict(params=TRUTH, shapes=[[1, 5000.0, 20000.0], [4, 9000.0, 6000.0]]),
            ["--family", "paper"],
            "--family paper does not match the fit",
        ),
        (dict(params=TRUTH, shapes=[[1, 5000.0, 20000.0]]), [], "match none of the families"),
        (dict(params=TRUTH), ["--max-unique-params", "1e5"], "no r meets the constraints"),
        (dict(params=TRUTH), ["--r", "3"], "cannot loop r = 3"),
        (dict(params=TRUTH), ["--family", "custom", "--experiment", "nope"], "cannot compose experiment=nope"),
        (dict(params=TRUTH), ["--family", "custom"], "--family custom needs --experiment"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_nothing_written(fit_path, tmp_path, capsys, kw, argv, message):
    fit = fit_path(**kw)
    out_json, out_png = tmp_path / "x.json", tmp_path / "x.png"
    rc, out, err = run(capsys, fit, "--compute", "1e20", *argv, "--json", out_json, "--plot", out_png)
    assert rc == 2 and message in err and len(err.strip().splitlines()) == 1 and out == ""
    assert not out_json.exists() and not out_png.exists()


def test_a_custom_family_is_any_experiment_with_overrides(fit_path, capsys):
    fit = fit_path(params=TRUTH, replicates=replicates())
    argv = ["--compute", "1e19", "--r", "1,2,4", "--family", "custom", "--experiment", "isodepth"]
    rc, plain, err = run(capsys, fit, *argv)
    assert rc == 0, err
    rc, deeper, err = run(capsys, fit, *argv, "--override", "model.depth=36")  # L_eff 36: 2 + 32/r x r + 2
    assert rc == 0 and "family custom" in deeper
    assert plain.splitlines()[2] != deeper.splitlines()[2]  # a deeper family advises another r = 1 model


def test_a_chinchilla_fit_and_a_fit_without_replicates_give_point_estimates(fit_path, capsys):
    rc, out, err = run(capsys, fit_path(params=BASE, law="chinchilla"), "--compute", "1e20")
    assert rc == 0, err
    assert "best: r = 1: the only r advised, so no comparison between r" in out  # one r: nothing is "worse"
    assert "point estimates only" in out and "assuming --family paper" in out
    rc, out, err = run(capsys, fit_path(params=TRUTH), "--compute", "1e20")
    assert rc == 0 and "best: r = 1 (point estimate; no bootstrap replicates" in out


def test_a_close_call_prints_within_the_noise(fit_path, tmp_path, capsys):
    """Replicates split between phi = 0 (r = 1 wins under the cap) and phi = 1 (r = 2 wins): the command says
    both are within the noise, in its verdict line and its JSON."""
    reps = {k: [v] * 40 for k, v in TRUTH.items()}
    reps["phi"] = [0.0] * 20 + [1.0] * 20
    fit = fit_path(params={**TRUTH, "phi": 1.0}, replicates=reps, shapes=paper_shapes())
    rc, out, err = run(
        capsys, fit, "--compute", "1e20", "--max-unique-params", "1e8", "--r", "1,2", "--json", tmp_path / "a.json"
    )
    assert rc == 0, err
    assert "best: within the noise: r = 2 (best in 50% of 40 replicates) and r = 1 (50%)" in out.splitlines(), out
    assert json.loads((tmp_path / "a.json").read_text())["best"]["within_noise"] == [1]
