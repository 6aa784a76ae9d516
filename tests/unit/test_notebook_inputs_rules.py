"""Which inputs the phi notebook opens, by hand (issue 58; loopscale/analysis/notebook_inputs.py): the kernel's
variables, where relative paths start (LOOPSCALE_CWD before PWD, `..` kept as the user wrote it), the user's own
table not filled from the demo or the fixtures, the advice's numbers, and the banner's three wordings."""

from __future__ import annotations

from pathlib import Path

import pytest

import loopscale.analysis.notebook_inputs as nb
from loopscale.errors import InputError


def test_the_kernel_gets_each_given_option_as_its_variable_and_the_users_folder():
    env = nb.kernel_env(
        {"table": "t.csv", "compare": ["a.json", "b.json"], "fit": None, "advise_compute": 1e20},
        Path("/home/u/work"),
        {"LOOPSCALE_FIT": "keep.json", "PATH": "/bin"},
    )
    assert env == {
        "LOOPSCALE_FIT": "keep.json",  # not given: the environment's value stays
        "PATH": "/bin",
        "LOOPSCALE_CWD": "/home/u/work",
        "LOOPSCALE_TABLE": "t.csv",
        "LOOPSCALE_COMPARE": "a.json,b.json",
        "LOOPSCALE_ADVISE_COMPUTE": "1e+20",
    }


def test_relative_paths_start_where_the_user_stands(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert nb._resolve("runs.csv", tmp_path / "link") == str(tmp_path / "link" / "runs.csv")  # keeps its name
    assert nb.user_dir({"LOOPSCALE_CWD": "/a", "PWD": "/b"}) == Path("/a")
    assert nb.user_dir({"PWD": "/b"}) == Path("/b") and nb.user_dir({}) is None
    assert nb._resolve("../mine/runs.csv", Path("/a/b")) == "/a/mine/runs.csv"
    assert nb._resolve("/abs/t.csv", Path("/a/b")) == "/abs/t.csv" and nb._resolve("t.csv", None) == "t.csv"


def test_the_users_own_table_is_not_filled_from_the_demo_or_the_fixtures(tmp_path):
    sweep = tmp_path / "runs" / "mine"
    sweep.mkdir(parents=True)
    (sweep / "runs.csv").write_text("N,D,L\n")
    (sweep / "fit.json").write_text("{}")
    (sweep / "fit_curves.json").write_text("{}")
    out = nb.diagnostics_inputs(tmp_path, {"LOOPSCALE_RUNS": "runs/mine", "LOOPSCALE_CWD": str(tmp_path)})
    assert out["table"] == str(sweep / "runs.csv") and out["fit"] == str(sweep / "fit.json")
    assert out["compare"] == [] and out["free"] is None and out["joint"] is None
    assert out["curve_fit"] == str(sweep / "fit_curves.json")
    assert out["source"].startswith("your data (table ")
    off = nb.diagnostics_inputs(
        tmp_path, {"LOOPSCALE_RUNS": str(sweep / "runs.csv"), "LOOPSCALE_CURVE_FIT": "", "LOOPSCALE_CWD": "/"}
    )  # a runs table where a sweep was expected; an empty value turns the curve fit off
    assert off["table"] == str(sweep / "runs.csv") and off["fit"] == str(sweep / "fit.json")
    assert off["curve_fit"] is None


def test_the_advices_numbers_are_positive_and_finite():
    assert nb._number({"LOOPSCALE_ADVISE_COMPUTE": "3e20"}, "advise_compute") == 3e20
    assert nb._number({"LOOPSCALE_ADVISE_COMPUTE": ""}, "advise_compute") is None
    with pytest.raises(InputError, match="LOOPSCALE_ADVISE_MAX_PARAMS='x' is not a number"):
        nb._number({"LOOPSCALE_ADVISE_MAX_PARAMS": "x"}, "advise_max_params")
    for bad in ("0", "-1", "inf", "nan"):
        with pytest.raises(InputError, match="must be a positive, finite number"):
            nb._number({"LOOPSCALE_ADVISE_COMPUTE": bad}, "advise_compute")


def test_the_banner_says_fixtures_demo_or_your_data_mixed(tmp_path):
    fixtures = tmp_path / "tests" / "fixtures" / "plots"
    fixtures.mkdir(parents=True)
    f = {"table": str(fixtures / "runs.csv"), "fit": str(fixtures / "fit.json"), "compare": [], "free": None}
    assert nb.source_line(f | {"joint": None}, tmp_path).startswith("the test fixtures (table ")
    demo = {"table": "/x/runs/demo/runs.csv", "fit": "/x/runs/demo/fit.json", "compare": [], "free": None}
    assert nb.source_line(demo | {"joint": None}, tmp_path).startswith("the demo's own runs (table /x/runs/demo/")
    own_fit = demo | {"fit": "/x/mine/fit.json", "joint": None}
    assert nb.source_line(own_fit, tmp_path).startswith("your data (table /x/runs/demo/runs.csv")
    mixed = {"table": "/x/mine/runs.csv", "fit": "/x/mine/fit.json", "compare": [str(fixtures / "c.json")]}
    line = nb.source_line(mixed | {"free": None, "joint": None}, tmp_path)
    assert line == "your data mixed with the test fixtures (table /x/mine/runs.csv, fit /x/mine/fit.json)"
