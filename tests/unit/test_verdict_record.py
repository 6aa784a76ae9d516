"""loopscale/fit/verdict_record.py: the verdict as dataclasses with one JSON form. A "conditioning" block written
before the dataclasses (tests/fixtures/verdict/blocks.json, made at ec0f890 by make_blocks.py) reads back and is
written key for key, in order; a fit record carrying one is written with the same block; the verdict computed
now from the same inputs is the block that was written then."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from unit.test_verdict import _joint_fit, _joint_table

from loopscale.analysis.conditioning import verdict
from loopscale.errors import InputError
from loopscale.fit.result import FitResult, ParamDifference, compare_param, load_fit
from loopscale.fit.runs_table import read_table
from loopscale.fit.verdict import compare_conditioning, joint_checks
from loopscale.fit.verdict_record import Check, Conditioning, DeltaAnswer, NoiseScale

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
BLOCKS = json.loads((FIXTURES / "verdict" / "blocks.json").read_text())
PLOTS = FIXTURES / "plots"


def _same(now, then, where="block") -> None:
    """Key for key and in order; numbers to 1e-9 (another CPU's last bits), everything else exactly."""
    if isinstance(then, dict):
        assert isinstance(now, dict) and list(now) == list(then), where
        for key in then:
            _same(now[key], then[key], f"{where}.{key}")
    elif isinstance(then, list):
        assert isinstance(now, list) and len(now) == len(then), where
        for i, (a, b) in enumerate(zip(now, then)):
            _same(a, b, f"{where}[{i}]")
    elif isinstance(then, float) and not isinstance(now, bool):
        assert isinstance(now, float) and math.isclose(now, then, rel_tol=1e-9, abs_tol=1e-12), where
    else:
        assert type(now) is type(then) and now == then, where


@pytest.mark.parametrize("kind", sorted(BLOCKS))
def test_an_old_block_reads_back_and_is_written_key_for_key(kind):
    block = BLOCKS[kind]
    cond = Conditioning.from_json(block)
    assert isinstance(cond, Conditioning) and all(isinstance(c, Check) for c in cond.checks)
    assert json.dumps(cond.to_json()) == json.dumps(block)  # same keys, same order, same values


def test_a_fit_record_with_a_block_is_written_with_the_same_block(tmp_path):
    record = json.loads((PLOTS / "fit.baseline.json").read_text())
    record["conditioning"] = BLOCKS["looped"]
    fit = load_fit(record)
    assert isinstance(fit.conditioning, Conditioning) and isinstance(fit.conditioning.noise, NoiseScale)
    fit.write_json(tmp_path / "fit.json")
    written = json.loads((tmp_path / "fit.json").read_text())
    assert json.dumps(written["conditioning"]) == json.dumps(BLOCKS["looped"])
    assert FitResult.from_json(tmp_path / "fit.json").conditioning == fit.conditioning


def test_the_verdict_now_is_the_block_written_before_the_dataclasses():
    table = read_table(PLOTS / "runs.csv")
    base, hyper = load_fit(PLOTS / "fit.baseline.json"), load_fit(PLOTS / "fit.hyper.json")
    base.conditioning = verdict(table, base)
    _same(json.loads(json.dumps(base.conditioning.to_json())), BLOCKS["looped"])
    joint_table, codes = _joint_table()
    joint = joint_checks(joint_table, _joint_fit(), codes)
    assert all(isinstance(a, DeltaAnswer) for a in joint.delta_phi.values())
    _same(json.loads(json.dumps(joint.to_json())), BLOCKS["joint"])
    hyper.conditioning = verdict(table, hyper)
    difference = compare_param(base, hyper)
    assert isinstance(difference, ParamDifference) and difference.delta == hyper.params["phi"] - base.params["phi"]
    cmp = compare_conditioning({"a.json": base, "b.json": hyper}, difference)
    _same(json.loads(json.dumps(cmp.to_json())), BLOCKS["compare"])


def test_fields_read_by_their_json_keys_and_a_hand_edited_block_is_refused_in_one_line():
    cond = Conditioning.from_json(BLOCKS["joint"])
    assert cond["verdict"] == cond.verdict and cond["checks"][0]["ok"] == cond.checks[0].ok
    assert cond.get("blocking", "none") == "none" and "delta_phi" in cond and "blocking" not in cond
    with pytest.raises(KeyError):
        cond["nope"]
    with pytest.raises(InputError, match="'conditioning' must be a dict; got list"):
        Conditioning.from_json(["measured"])
    with pytest.raises(InputError, match="verdict must be text; got int"):
        Conditioning.from_json({**BLOCKS["looped"], "verdict": 3})
