"""`loopscale fit` / `compare` end to end, and every bad-input case (exit 2, one line, no output). In-process
(support.cli.run_cli); tests/system/test_commands.py runs each command once as a child process."""

import json

import numpy as np
import pandas as pd
import pytest

from support.cli import run_cli
from support.paths import CHINCHILLA, FIXTURES


def loopscale(*args, cwd=None):
    return run_cli(list(args), cwd=cwd)


def test_fit_end_to_end_with_bootstrap_holdout_and_plot(tmp_path):
    out, png = tmp_path / "fits" / "small.json", tmp_path / "fits" / "small.png"
    res = loopscale(
        "fit",
        FIXTURES / "looped_synthetic_small.csv",
        "--bootstrap",
        20,
        "--cluster",
        "width",
        "--holdout-largest",
        "--out",
        out,
        "--plot",
        png,
    )
    assert res.returncode == 0, res.stderr
    assert "phi" in res.stdout and "95% CI" in res.stdout and "holdout" in res.stdout
    d = json.loads(out.read_text())
    assert d["law"] == "looped" and set(d["params"]) == {"E", "A", "alpha", "B", "beta", "phi"}
    assert d["ci95"]["phi"][0] <= d["params"]["phi"] <= d["ci95"]["phi"][1]
    assert len(d["bootstrap"]["params"]["phi"]) == 20 and d["bootstrap"]["cluster"] == "width"
    assert d["profile_phi"]["interval"][0] < d["params"]["phi"]
    assert d["holdout"]["n_holdout"] > 0
    assert d["input"]["n_rows"] == len(pd.read_csv(FIXTURES / "looped_synthetic_small.csv"))
    assert len(d["input"]["sha256"]) == 64 and "scipy" in d["versions"]
    assert png.stat().st_size > 1000


def test_fit_groups_and_compare(tmp_path):
    table = pd.read_csv(FIXTURES / "looped_synthetic_small.csv")
    both = pd.concat([table.assign(recipe="base"), table.assign(recipe="copy")])
    src = tmp_path / "runs.csv"
    both.to_csv(src, index=False)
    res = loopscale("fit", src, "--group", "recipe", "--bootstrap", 10, "--no-profile", "--out", tmp_path / "v.json")
    assert res.returncode == 0, res.stderr
    a, b = tmp_path / "v.base.json", tmp_path / "v.copy.json"
    assert json.loads(a.read_text())["group"] == {"column": "recipe", "value": "base"}
    cmp = loopscale("compare", a, b)
    assert cmp.returncode == 0, cmp.stderr
    assert "delta phi = B - A = +0" in cmp.stdout and "95% CI" in cmp.stdout


def test_chinchilla_table_with_column_mapping(tmp_path):
    raw = pd.read_csv(CHINCHILLA).sort_values("loss").iloc[:-5]
    src = tmp_path / "chin.csv"
    raw.to_csv(src, index=False)
    out = tmp_path / "chin.json"
    res = loopscale(
        "fit",
        src,
        "--law",
        "chinchilla",
        "--n-col",
        "Model Size",
        "--c-col",
        "Training FLOP",
        "--loss-col",
        "loss",
        "--out",
        out,
    )
    assert res.returncode == 0, res.stderr
    d = json.loads(out.read_text())
    assert d["params"]["alpha"] == pytest.approx(0.3473, abs=1e-3)
    assert d["objective"] <= 1.0184e-3


def bad_tables():
    good = pd.read_csv(FIXTURES / "looped_synthetic_small.csv")
    nan = good.copy()
    nan.loc[3, "L"] = np.nan
    inf = good.copy()
    inf.loc[2, "D"] = np.inf
    neg = good.copy()
    neg.loc[1, "N_once"] = -5
    zero_l = good.copy()
    zero_l.loc[0, "L"] = 0
    return {
        "missing": (good.drop(columns=["N_rec"]), [], "missing column 'N_rec'"),
        "nan": (nan, [], "column 'L' has 1 missing"),
        "inf": (inf, [], "column 'D' has 1 missing"),
        "negative": (neg, [], "column 'N_once' must be >= 0"),
        "zero_loss": (zero_l, [], "column 'L' must be > 0"),
        "too_few": (good.iloc[:11], [], "11 rows is too few"),
        "single_r": (good[good.r == 4], [], "two or more r values"),
        "bad_cluster": (good, ["--bootstrap", "5", "--cluster", "nope"], "--cluster column 'nope'"),
        "bad_delta": (good, ["--delta", "0"], "delta must be"),
        "bad_group": (good, ["--group", "nope"], "--group column 'nope'"),
    }


@pytest.mark.parametrize("case", list(bad_tables()))
def test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path, case):
    table, extra, message = bad_tables()[case]
    src = tmp_path / "runs.csv"
    table.to_csv(src, index=False)
    out, png = tmp_path / "out" / "fit.json", tmp_path / "out" / "fit.png"
    res = loopscale("fit", src, *extra, "--out", out, "--plot", png)
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert message in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_unreadable_and_missing_files_exit_2(tmp_path):
    binary = tmp_path / "runs.parquet"
    binary.write_bytes(b"\x00\x01 not parquet")
    for src in (binary, tmp_path / "absent.csv"):
        res = loopscale("fit", src, "--out", tmp_path / "o.json")
        assert res.returncode == 2
        assert "cannot read" in res.stderr and len(res.stderr.strip().splitlines()) == 1
        assert not (tmp_path / "o.json").exists()
    bad_json = tmp_path / "x.json"
    bad_json.write_text("{not json")
    res = loopscale("compare", bad_json, bad_json)
    assert res.returncode == 2 and "cannot read fit JSON" in res.stderr


def test_explicit_loss_column_wins_over_an_L_column_and_is_recorded(tmp_path):
    good = pd.read_csv(FIXTURES / "looped_synthetic_small.csv")
    junk = good.rename(columns={"L": "loss"})
    junk.insert(0, "L", np.random.default_rng(0).uniform(2.0, 4.0, len(junk)))  # noise named L, first
    src = tmp_path / "runs.csv"
    junk.to_csv(src, index=False)
    ref, out = tmp_path / "ref.json", tmp_path / "fit.json"
    good.to_csv(tmp_path / "good.csv", index=False)
    assert loopscale("fit", tmp_path / "good.csv", "--no-profile", "--out", ref).returncode == 0
    res = loopscale("fit", src, "--loss-col", "loss", "--no-profile", "--out", out)
    assert res.returncode == 0, res.stderr
    d, expected = json.loads(out.read_text()), json.loads(ref.read_text())
    assert d["params"] == pytest.approx(expected["params"], rel=1e-9)  # fitted `loss`, not the junk
    assert d["input"]["columns"]["L"] == "loss" and d["input"]["ignored_columns"] == ["L"]
    assert d["input"]["columns"]["N_once"] == "N_once"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--loss-col", "nope"], "column 'nope' (given by --loss-col) is not in the table"),
        (["--loss-col", "D"], "ambiguous column mapping: column 'D' is mapped to D and L"),
    ],
)
def test_ambiguous_or_missing_explicit_mapping_exits_2(tmp_path, args, message):
    src = tmp_path / "runs.csv"
    pd.read_csv(FIXTURES / "looped_synthetic_small.csv").to_csv(src, index=False)
    res = loopscale("fit", src, *args, "--out", tmp_path / "o.json")
    assert res.returncode == 2 and message in res.stderr, res.stderr
    assert not (tmp_path / "o.json").exists()


def test_a_table_with_a_fitted_column_twice_is_ambiguous():
    from loopscale.fit.runs_table import ColumnMap, canonical_table

    good = pd.read_csv(FIXTURES / "looped_synthetic_small.csv")
    twice = pd.concat([good, good[["L"]] * 1.1], axis=1)  # two columns named L
    with pytest.raises(ValueError, match="ambiguous table: column 'L' appears 2 times"):
        canonical_table(twice, "looped")
    # a duplicated column the fit does not read is no problem
    extra = pd.concat([good, good[["width"]]], axis=1)
    assert canonical_table(extra, "looped", ColumnMap()).attrs["columns_used"]["L"] == "L"
