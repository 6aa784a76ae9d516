"""What `loopscale plot` and `loopscale report` read, by hand (issue 58; loopscale/analysis/report_inputs.py):
several sources merged with a run found in several kept once (r = 1 whatever its recipe, r > 1 per recipe), the
problems of the sweeps only, the --compare fits by their legend names, the files read, and the refusals."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import loopscale.analysis.report_inputs as report_inputs
from loopscale.errors import InputError
from loopscale.fit.result import FitResult

COLS = ("N_once", "N_rec", "r", "D", "L")


def _rows(*rows, recipe=None) -> pd.DataFrame:
    table = pd.DataFrame([dict(zip(COLS, row)) for row in rows])
    return table if recipe is None else table.assign(recipe=recipe)


def test_a_run_in_several_sources_is_kept_once_r1_whatever_its_recipe_r_above_1_per_recipe():
    dense = (1e6, 0.0, 1.0, 1e9, 3.2)
    looped = (2e5, 8e5, 4.0, 1e9, 3.1)
    base = _rows(dense, looped, recipe="baseline")
    hyper = _rows(dense, looped, (2e5, 8e5, 2.0, 1e9, 3.15), recipe="hyper")
    table, problems = report_inputs.merge_sources([(base, None), (hyper, None)])
    assert problems is None  # bare tables say nothing about missing runs
    # the r = 1 run once (the first source's), the r = 4 run of each recipe, hyper's r = 2
    assert table[["r", "recipe"]].values.tolist() == [[1.0, "baseline"], [4.0, "baseline"], [4.0, "hyper"]] + [
        [2.0, "hyper"]
    ]
    plain, _ = report_inputs.merge_sources([(_rows(dense, looped), None), (_rows(looped, dense), None)])
    assert len(plain) == 2  # no recipe column: the law inputs alone
    other_L = _rows((1e6, 0.0, 1.0, 1e9, 3.2001))
    assert len(report_inputs.merge_sources([(_rows(dense), None), (other_L, None)])[0]) == 2  # another loss: a run


def test_the_problems_are_every_sweeps_unfinished_runs():
    a, b = _rows((1e6, 0.0, 1.0, 1e9, 3.2)), _rows((2e6, 0.0, 1.0, 1e9, 3.0))
    _, problems = report_inputs.merge_sources([(a, ["run3: no run.json"]), (b, None), (a, ["run9: failed"])])
    assert problems == ["run3: no run.json", "run9: failed"]
    one, problems = report_inputs.merge_sources([(a, [])])
    assert one is a and problems == []
    empty = a.iloc[:0]
    assert report_inputs.merge_sources([(empty, None), (empty, None)])[0] is empty


def _fit(law="looped", params=None, group=None) -> FitResult:
    params = params or {"E": 1.6, "A": 30.0, "alpha": 0.2, "B": 900.0, "beta": 0.37, "phi": 0.5}
    fit = FitResult(law, params, 0.0, 0.0, 1, 1, 1, {})
    if group is not None:
        fit.group = {"column": "recipe", "value": group}
    return fit


def test_compare_fits_are_named_by_their_group_else_the_file_stem_and_a_repeat_by_both():
    named = report_inputs.named_fits(
        {"a/one.json": _fit(group="hyper"), "b/two.json": _fit(), "c/three.json": _fit(group="hyper")}
    )
    assert list(named) == ["hyper", "two", "hyper (three)"]


def test_the_files_read_are_named_by_what_they_are(tmp_path):
    table = tmp_path / "runs.csv"
    table.write_text("x\n")
    found = report_inputs.input_files(
        [table, tmp_path / "sweep"], "fit.json", ["c1.json", "c2.json"], "free.json", "v.json"
    )
    assert found == [
        ("the input table", table),
        ("the fit", report_inputs.Path("fit.json")),
        ("a --compare fit", report_inputs.Path("c1.json")),
        ("a --compare fit", report_inputs.Path("c2.json")),
        ("the --free fit", report_inputs.Path("free.json")),
        ("the --validation record", report_inputs.Path("v.json")),
    ]  # a sweep directory is not a file read
    assert report_inputs.input_files([]) == []


def test_compare_needs_a_fit_and_looped_fits(tmp_path):
    looped, dense = tmp_path / "looped.json", tmp_path / "dense.json"
    _fit().write_json(looped)
    _fit("chinchilla", {"E": 1.6, "A": 30.0, "alpha": 0.2, "B": 900.0, "beta": 0.37}).write_json(dense)
    with pytest.raises(InputError, match="--compare needs --fit"):
        report_inputs.read_fits(None, [str(looped)])
    with pytest.raises(InputError, match="--compare needs looped fits with phi; got a 'chinchilla' fit"):
        report_inputs.read_fits(str(dense), [str(looped)])
    fit, compare, free = report_inputs.read_fits(str(dense))  # alone, a dense fit is fine
    assert fit.law == "chinchilla" and compare == {} and free is None


def test_a_validation_record_of_another_fit_is_refused_unless_allowed(tmp_path):
    from support.paths import FIXTURES

    record = json.loads((FIXTURES / "validation" / "record.json").read_text())
    fit = _fit(params=record["fit"]["params"])
    path = tmp_path / "v.json"
    path.write_text(json.dumps({**record, "fit": {**record["fit"], "json": "fit.json"}}))
    assert report_inputs.read_validation(str(path), fit, "fit.json")[1] is None
    other = _fit(params={**fit.params, "phi": 0.6})
    with pytest.raises(InputError, match=r"validates another fit \(fit.json looped law, other parameters\)"):
        report_inputs.read_validation(str(path), other, "mine.json")
    _, line = report_inputs.read_validation(str(path), other, "mine.json", allow_other_fit=True)
    assert line.endswith("than --fit: shown by --allow-other-fit; its checks are not of this fit")
    path.write_text(json.dumps({"verdict": "ok", "results": []}))
    with pytest.raises(InputError, match="is not a `loopscale validate` record"):
        report_inputs.read_validation(str(path))
    assert report_inputs.read_validation(None) == (None, None)


def test_a_source_that_is_neither_a_directory_nor_a_file_is_refused(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        report_inputs.read_source(tmp_path / "missing.csv")
    with pytest.raises(InputError, match="holds no runs"):
        report_inputs.read_source(tmp_path)
    assert report_inputs.fit_verdict(pd.DataFrame(), None) is None
