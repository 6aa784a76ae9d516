"""loopscale/fit/validation/record.py: a `loopscale validate` record as a dataclass with the JSON form it has
always had. tests/fixtures/validation/record.json holds a record written before the dataclass (made at 9bdf36a by
make_record.py): it reads back and is written key for key, in order; the record made now from the same inputs
has the same keys, in the same order, and the same values."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
from unit.test_verdict_record import _same

from loopscale.atomic import json_safe
from loopscale.fit.fit_table import fit_table
from loopscale.fit.runs_table import canonical_table
from loopscale.fit.validation.record import ValidationRecord, Verdict
from loopscale.fit.validation.run import validate
from loopscale.fit.validation.text import markdown
from support.paths import FIXTURES

RECORD = json.loads((FIXTURES / "validation" / "record.json").read_text())


def fresh_record():
    """The record of record.json, made again (~5 s on one core)."""
    table = canonical_table(pd.read_csv(FIXTURES / "looped_synthetic_small.csv"), "looped")
    with np.errstate(all="ignore"):
        fit = fit_table(table, "looped", n_refine=4)
        return validate(table, fit, n_refine=4)


def test_the_record_made_now_is_written_as_before():
    now = json.loads(json.dumps(json_safe(fresh_record().to_json())))
    for key in ("elapsed_s", "versions"):  # the wall time and the libraries' versions move; the rest must not
        now[key] = RECORD[key]
    assert now["approach2"].pop("tau_log") == 0.0  # added since (the budgets' scatter): none on this fixture
    assert 0 < now["approach2"].pop("a_interp") < 1  # added since: the interpolation rule's exponent beside a
    assert now.pop("once") is None  # added since (the loop against its block run once): no once-stacks here
    _without_form(now, "looped-entry")  # a rival added since (a one-off price of looping): the rest must not move
    _without_form(now, "looped-logn")  # a rival added since (an exponent that runs with the size): likewise
    _same(now, RECORD, "record")


def _without_form(record: dict, law: str) -> None:
    """The record as it was before the rival form `law` was registered: its form and its results dropped, the later
    forms' indices moved down by one."""
    index = next(i for i, form in enumerate(record["forms"]) if form["law"] == law)
    del record["forms"][index]
    record["results"] = [res for res in record["results"] if res["form"] != index]
    for res in record["results"]:
        res["form"] -= res["form"] > index


def test_an_old_record_reads_back_and_is_written_key_for_key():
    record = ValidationRecord.from_json(json.loads(json.dumps(RECORD)))
    assert isinstance(record.verdict, Verdict) and record.verdict.holds is RECORD["verdict"]["holds"]
    assert json.dumps(record.to_json()) == json.dumps(RECORD)  # same keys, same order, same values
    assert markdown(record) == markdown(ValidationRecord.from_json(record.to_json()))


def test_what_loopscale_validate_adds_is_written_after_the_record(tmp_path):
    extra = {"tables": ["runs.csv"], "table_check": {"changed": False}, "seed_repeats": None, "warnings": []}
    record = ValidationRecord.from_json(RECORD).replace(**extra)
    assert list(record.to_json()) == [*RECORD, *extra]
    assert ValidationRecord.from_json(json.loads(json.dumps(record.to_json()))) == record


def test_write_json_writes_strict_json_nan_as_null_and_numpy_as_plain_numbers(tmp_path):
    """`validate --out X.json`: plain JSON that a strict parser reads (no bare NaN / Infinity), numpy values written
    as the numbers they hold (an integer as an integer), NaN and infinities as null."""
    record = ValidationRecord(
        n_rows=np.int64(44),
        fit={"law": "looped", "params": {"phi": np.float64(0.5), "E": np.float32(1.5)}, "phi_interval": [np.nan, 0.7]},
        verdict=Verdict(line="held", flags=[], holds=True, phi_shift=np.float64(np.inf), half_width=np.float64(0.1)),
    )
    path = tmp_path / "validate.json"
    record.write_json(path)
    text = path.read_text()

    def refuse(name):
        raise ValueError(f"not strict JSON: {name}")

    back = json.loads(text, parse_constant=refuse)
    assert back["n_rows"] == 44 and '"n_rows": 44,' in text  # an integer, not 44.0
    assert back["fit"]["params"] == {"phi": 0.5, "E": 1.5} and back["fit"]["phi_interval"] == [None, 0.7]
    assert back["verdict"]["phi_shift"] is None and back["verdict"]["half_width"] == 0.1
