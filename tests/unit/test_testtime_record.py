"""loopscale/fit/testtime_record.py: a test-time record (`loopscale fit-testtime`) as dataclasses with the JSON form
it has always had. tests/fixtures/testtime/record.json holds a record written before the dataclasses (made at
f64ac6a by make_record.py): it reads back and is written key for key, in order; the record made now from the same
rows has the same keys, in the same order, and the same values."""

from __future__ import annotations

import json

from unit.test_testtime_law import drawn
from unit.test_verdict_record import _same

from loopscale.atomic import json_safe
from loopscale.fit import testtime as tt
from loopscale.fit.testtime_record import TestTimeFit, TestTimeRecord
from loopscale.fit.verdict_record import Conditioning
from support.paths import FIXTURES

RECORD = json.loads((FIXTURES / "testtime" / "record.json").read_text())


def fresh_record():
    """The record of record.json, made again (~5 s on one core)."""
    return tt.fit_testtime(tt.testtime_table(drawn("exp", 0.7, noise=0.002, seed=0)), "exp", compare=True)


def _json(record) -> dict:
    return json.loads(json.dumps(json_safe(record.to_json() if hasattr(record, "to_json") else record)))


def test_the_record_made_now_is_written_as_before():
    _same(_json(fresh_record()), RECORD, "record")


def test_an_old_record_reads_back_and_is_written_key_for_key():
    record = TestTimeRecord.from_json(json.loads(json.dumps(RECORD)))
    assert all(isinstance(f, TestTimeFit) for f in [*record.per_model.values(), record.joint])
    assert isinstance(record.joint.conditioning, Conditioning)
    assert json.dumps(record.to_json()) == json.dumps(RECORD)  # same keys, same order, same values
    source = {"input": {"path": "t.csv"}, "testtime_phi": {}}
    assert list(record.replace(**source).to_json()) == [*RECORD, *source]  # what fit-testtime adds comes last
