"""`loopscale validate` (issue 39): a law whose r^phi form is exact passes leave-one-r-out within its noise; a
non-monotone r effect (r = 4 best) is flagged by leave-one-r-out and by the per-r form's AICc; tables with few
budgets or few r get a sentence per fold, not a crash; bad input is one line, exit 2, nothing written; the lr
grid's best lr per r is read back; a counting convention recounts N."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from loopscale.fit.fit_table import fit_table
from loopscale.fit.laws.registry import law_class
from loopscale.fit.runs_table import canonical_table
from loopscale.fit.synthetic import TRUE_PARAMS, published_grid_table
from loopscale.fit.validation.conventions import with_embedding
from loopscale.fit.validation.flags import RATIO_FLAG, fold_rows
from loopscale.fit.validation.lr_confound import best_lr
from loopscale.fit.validation.run import validate
from loopscale.fit.validation.text import markdown
from support.cli import run_cli
from support.paths import FIXTURES

EXACT = FIXTURES / "looped_synthetic_107.csv"  # r^phi exact (phi 0.46) on the published grid, 0.5% noise
BUMP = {"k_2": 1.6, "k_4": 2.6, "k_8": 2.0}  # r = 4 best: at r = 8 the halved block is worth less than at r = 4


def validated(table: pd.DataFrame, **kwargs) -> dict:
    table = canonical_table(table, "looped")
    with np.errstate(all="ignore"):
        fit = fit_table(table, "looped")
    return validate(table, fit, conventions=False, **kwargs)


@pytest.fixture(scope="module")
def exact_record() -> dict:
    return validated(pd.read_csv(EXACT), jobs=2)


def non_monotone_table() -> pd.DataFrame:
    """The published grid with L from free multipliers k_r (LoopCoder-v2's shape: one r best), 0.5% noise."""
    table = published_grid_table(seed=3, noise=0.0)
    params = {k: TRUE_PARAMS[k] for k in ("E", "A", "alpha", "B", "beta")} | BUMP
    L = law_class("looped-free").predict_table(params, table)
    table["L"] = L * (1 + 0.005 * np.random.default_rng(3).standard_normal(len(table)))
    return table


def test_an_exact_r_phi_law_passes_leave_one_r_out_within_its_noise(exact_record):
    r_folds = fold_rows(exact_record, 0, "r")
    assert [exact_record["folds"][r["fold"]]["label"] for r in r_folds] == ["r = 2", "r = 4", "r = 8"]
    for r in r_folds:
        assert r["ok"] and r["held_out"]["rms_log"] < RATIO_FLAG * r["train_rms_log"]
        assert r["held_out"]["mean_abs_rel_error"] < 0.01  # the noise is 0.5%
    v = exact_record["verdict"]
    assert v["phi_shift"] < v["half_width"]  # phi stays inside its interval when an r is dropped
    assert v["holds"], v["flags"]  # no fold, form or cross-check flagged
    assert v["line"].startswith("the law predicts unseen budgets to 0.")
    free = next(i for i, f in enumerate(exact_record["forms"]) if f["law"] == "looped-free")
    free_r = fold_rows(exact_record, free, "r")
    assert all(not r["ok"] and "no multiplier at r =" in r["reason"] for r in free_r)  # k_r of an unseen r is free


def test_a_non_monotone_r_effect_is_flagged_by_leave_one_r_out_and_the_per_r_aicc():
    record = validated(non_monotone_table(), jobs=1)
    flags = record["verdict"]["flags"]
    assert not record["verdict"]["holds"]
    assert any(f.startswith("held out r = 8") for f in flags), flags  # r^phi from r <= 4 overshoots r = 8
    assert any("phi moves by" in f and "r = 8" in f for f in flags), flags
    assert any("k_r per r" in f and "not a power of r" in f for f in flags), flags
    r8 = next(r for r in fold_rows(record, 0, "r") if record["folds"][r["fold"]]["label"] == "r = 8")
    assert r8["held_out"]["mean_rel_error"] < -0.01  # predicted too low: r = 8 is worse than r^phi says


def test_the_exact_law_is_not_flagged_where_the_non_monotone_one_is(exact_record):
    """The same checks, the same thresholds: the exact law's per-r AICc and r folds stay quiet."""
    assert not any("not a power of r" in f or f.startswith("held out r =") for f in exact_record["verdict"]["flags"])
    text = markdown(exact_record)
    assert "| looped (the fit's law) | r = 8 |" in text and "cannot: the form has no multiplier at r = 8" in text


def test_few_budgets_and_few_r_are_said_per_fold_not_a_crash(tmp_path):
    table = pd.read_csv(FIXTURES / "looped_synthetic_small.csv")
    table = table[(table["C"] <= 1e18) & table["r"].isin([1, 2])].reset_index(drop=True)
    csv, fit_json = tmp_path / "runs.csv", tmp_path / "fit.json"
    table.to_csv(csv, index=False)
    assert run_cli(["fit", str(csv), "--out", str(fit_json)]).returncode == 0
    res = run_cli(["validate", str(fit_json), "--jobs", "1", "--out", str(tmp_path / "v.json")])
    assert res.returncode == 0, res.stderr
    record = json.loads((tmp_path / "v.json").read_text())
    reasons = {f["label"]: f["reason"] for f in record["folds"] if f["kind"] != "full"}
    assert "2 compute budget(s)" in reasons["every budget"]
    assert "leaves runs at r = 1 only: phi is not identified" in reasons["r = 2"]
    assert "no budget could be held out" in record["verdict"]["line"]
    assert (tmp_path / "v.md").is_file() and (tmp_path / "v.png").stat().st_size > 0
    assert "cannot: the table has 2 compute budget(s)" in res.stdout


@pytest.fixture(scope="module")
def fit_json(tmp_path_factory):
    fit = tmp_path_factory.mktemp("fit") / "fit.json"
    assert run_cli(["fit", str(EXACT), "--no-profile", "--out", str(fit)]).returncode == 0
    return fit


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d, fit: [str(d / "missing.json")], "cannot read fit JSON"),
        (lambda d, fit: [str(_write(d / "bad.json", "{not json"))], "cannot read fit JSON"),
        (lambda d, fit: [str(_write(d / "list.json", "[1, 2]"))], "not a loopscale fit record"),
        (lambda d, fit: [fit, str(_write(d / "t.csv", "r,N_once,L\n1,10,3.0\n"))], "missing column"),
        (lambda d, fit: [fit, str(d / "none.csv")], "no such file"),
        (lambda d, fit: [fit, "--column", "seq_len"], "--column takes NAME=VALUE"),
        (lambda d, fit: [fit, "--pin-E", "-1"], "--pin-E must be > 0"),
        (lambda d, fit: [fit, "--out", str(d / "v.txt")], "must name a .json file"),
        (lambda d, fit: [str(_write(d / "joint.json", '{"law": "looped-joint", "params": {}}'))], "joint fit"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path, fit_json, make, message):
    out = tmp_path / "out" / "v.json"
    args = make(tmp_path, str(fit_json))
    res = run_cli(["validate", *args, *([] if "--out" in args else ["--out", str(out)])])
    assert res.returncode == 2 and message in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "v.txt").exists()


def _write(path, text: str):
    path.write_text(text)
    return path


def test_the_lr_grid_gives_the_best_lr_per_r_and_flags_a_move():
    """L = L_shared + c (ln m - ln m*_r)^2 on a 5-point grid: the parabola recovers m*_r; r = 4's optimum two
    grid steps from r = 1's is flagged."""
    multipliers = 2.0 ** np.arange(-1, 1.01, 0.5)
    best = {1: 1.0, 4: 2.0}
    for m_star in best.values():
        L = 3.0 + 0.05 * (np.log(multipliers) - np.log(m_star)) ** 2
        fit = best_lr(np.log(multipliers), L)
        assert fit["best"] == pytest.approx(m_star, rel=1e-6) and not fit["at_edge"]
    table = canonical_table(pd.read_csv(EXACT), "looped")
    smallest = table[(table["C"] == table["C"].min())]
    rows = []
    for r in (1, 2, 4, 8):
        centre = smallest[smallest["r"] == r].iloc[0]
        for m in multipliers[multipliers != 1.0]:
            m_star = best.get(r, 1.0)
            bump = 0.05 * ((np.log(m) - np.log(m_star)) ** 2 - np.log(m_star) ** 2)
            rows.append({**centre.to_dict(), "lr_scale": m, "L": centre["L"] + bump})
    lr_table = pd.DataFrame(rows)
    record = validated(pd.read_csv(EXACT), lr_table=lr_table)
    lr = record["lr_confound"]
    by_r = {g["r"]: g for g in lr["groups"]}
    assert by_r[4]["best"] == pytest.approx(2.0, rel=0.05) and by_r[2]["best"] == pytest.approx(1.0, abs=0.02)
    assert by_r[4]["steps_from_r1"] == pytest.approx(2.0, abs=0.15)
    assert any("r = 4" in f for f in lr["flags"]) and not any("r = 2" in f for f in lr["flags"])
    assert lr["phi_best_points"] is not None and lr["phi_penalty_all"] > lr["phi_shared"]  # r = 4 helped most
    assert "The learning-rate confound" in markdown(record)


def test_a_convention_recounts_n():
    table = pd.DataFrame({"N_once": [10.0, 20.0], "N_rec": [5.0, 5.0], "width": [4, 8]})
    changed, _ = with_embedding(table, {"vocab_size": 100})
    assert changed["N_once"].tolist() == [10.0 + 2 * 400, 20.0 + 2 * 800]  # embedding and untied head, V x d each


def test_the_report_carries_the_validation_section(tmp_path, fit_json):
    out = tmp_path / "v.json"
    assert run_cli(["validate", str(fit_json), "--no-conventions", "--jobs", "1", "--out", str(out)]).returncode == 0
    report = tmp_path / "report.md"
    res = run_cli(["report", str(EXACT), "--fit", str(fit_json), "--validation", str(out), "--out", str(report)])
    assert res.returncode == 0, res.stderr
    text = report.read_text()
    assert "## Validation of the looped fit" in text and "**Verdict:** the law predicts unseen budgets" in text
    assert "No fit given" not in text  # the fit's own section stays
    bad = run_cli(["report", str(EXACT), "--validation", str(fit_json), "--out", str(tmp_path / "r2.md")])
    assert bad.returncode == 2 and "is not a `loopscale validate` record" in bad.stderr


def test_fit_leaves_the_lr_grid_out_and_validate_reads_it(tmp_path):
    table = pd.read_csv(EXACT)
    extra = table[table["C"] == table["C"].min()].head(2).assign(lr_scale=[0.5, 2.0])
    csv, fit = tmp_path / "runs.csv", tmp_path / "fit.json"
    pd.concat([table, extra], ignore_index=True).to_csv(csv, index=False)
    res = run_cli(["fit", str(csv), "--no-profile", "--out", str(fit)])
    assert res.returncode == 0 and "2 lr-grid runs (lr_scale != 1) left out of the fit" in res.stderr
    assert json.loads(fit.read_text())["input"]["n_rows_used"] == len(table)
    res = run_cli(["validate", str(fit), "--no-conventions", "--jobs", "1"])
    assert res.returncode == 0 and "## The learning-rate confound" in res.stdout
    assert "1 learning rate(s)" not in res.stdout  # each r has its grid run beside the lr runs


def test_a_dense_table_validates_with_the_looped_forms_said_impossible(tmp_path):
    """A chinchilla fit of the Chinchilla points (N, C, loss under their own names): budgets held out, no r folds,
    the looped rivals and the conventions each with why they cannot be fitted."""
    fit = tmp_path / "chin.json"
    args = ["--law", "chinchilla", "--n-col", "Model Size", "--c-col", "Training FLOP", "--loss-col", "loss"]
    assert run_cli(["fit", str(FIXTURES / "chinchilla_svg_extracted.csv"), *args, "--out", str(fit)]).returncode == 0
    res = run_cli(["validate", str(fit), "--jobs", "1", "--out", str(tmp_path / "v.json")])
    assert res.returncode == 0, res.stderr
    assert (
        "no r could be held out" in res.stdout and "| r^phi (the law) | cannot: the table has no column" in res.stdout
    )
    assert "nothing to recount" in res.stdout and (tmp_path / "v.png").stat().st_size > 0
