"""loopscale/fit/record_blocks.py: a fit record's blocks (settings, group, bootstrap, profile_phi, holdout, noise,
joint) as dataclasses with the JSON form fit records have always had. tests/fixtures/fit_records/records.json holds
records written before the dataclasses (made at d38bfa1 by make_records.py: the plots fixtures read and written
again, and three fits made then): each reads back and is written key for key, in order; the fits made now from the
same inputs are written with the same keys, in the same order, and the same values."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest
from unit.test_verdict_record import _same

from loopscale.atomic import json_safe
from loopscale.fit import synthetic as S
from loopscale.fit.fit_table import fit_table
from loopscale.fit.joint import fit_joint, joint_table
from loopscale.fit.record_blocks import Noise
from loopscale.fit.result import FitResult, load_fit
from loopscale.fit.runs_table import canonical_table

RECORDS = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "fit_records" / "records.json").read_text())


def fresh_fits() -> dict[str, FitResult]:
    """The fits records.json holds as "single", "noise_off" and "joint" (~5 s on one core)."""
    sweep = S.seeded_sweep(S.isodepth_grid(S.CPU_SIZES), S.PUBLISHED_PHI["baseline"], 3, 0.005, seed=3)
    table = canonical_table(sweep, "looped")
    tables = [canonical_table(t, "looped") for t in S.recipe_tables(S.small_recipe_sweep(seed=1)).values()]
    jt, recipes = joint_table(tables, "recipe")
    with np.errstate(all="ignore"):
        return {
            "single": fit_table(table, n_bootstrap=4, holdout=True, n_refine=4),
            "noise_off": fit_table(table, noise="off", profile=False, n_refine=4),
            "joint": fit_joint(jt, "recipe", recipes, n_bootstrap=4, n_refine=4),
        }


def written(fit: FitResult) -> dict:
    return json.loads(json.dumps(fit.to_json_dict()))


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_an_old_record_reads_back_and_is_written_key_for_key(name, tmp_path):
    record = RECORDS[name]
    fit = load_fit(json.loads(json.dumps(record)))
    assert json.dumps(fit.to_json_dict()) == json.dumps(record)  # same keys, same order, same values
    fit.write_json(tmp_path / "fit.json")
    assert FitResult.from_json(tmp_path / "fit.json") == fit
    # a fit crosses to worker processes pickled (task_pool): it comes back written the same, absent keys absent
    assert json.dumps(pickle.loads(pickle.dumps(fit)).to_json_dict()) == json.dumps(record)


def test_the_fits_made_now_are_written_as_before():
    for name, fit in fresh_fits().items():
        now, then = written(fit), RECORDS[name]
        now["versions"], then = then["versions"], dict(then)  # the libraries' versions move; the rest must not
        # added since (issue 53): the standardised residuals `power` resamples, a new key at the noise block's end
        assert list(now["noise"])[-1] == "units" and now["noise"].pop("units")["seed"]
        _same(now, then, name)


def test_a_key_the_block_does_not_name_survives_replace_and_is_written_back_in_place():
    """record_blocks: a key the class does not name (a record from another version) is kept and written back, in
    the order read, also by a copy with a changed field (`replace`); a key the copy adds comes after."""
    read = {"sigma_of": "log L", "from_a_later_version": {"x": 1}, "sigma_log": 0.004, "dof": 12}
    noise = Noise.from_json(read)
    assert noise["from_a_later_version"] == {"x": 1}
    changed = noise.replace(sigma_log=0.005, parent_share=0.5)
    assert changed.to_json() == {**read, "sigma_log": 0.005, "parent_share": 0.5}
    assert list(changed.to_json()) == [*read, "parent_share"]
    assert changed.get("from_a_later_version") == {"x": 1} and noise.sigma_log == 0.004


def test_records_are_written_as_plain_json():
    """atomic.json_safe, what the fit, advice, validation and test-time records go through: numpy scalars and arrays
    as JSON numbers and lists, keys as text, NaN and infinity as null (strict JSON)."""
    value = {1: np.float32(0.5), "n": np.int64(3), "ok": np.bool_(True), "v": np.array([1.0, np.nan]), "x": -np.inf}
    text = json.dumps(json_safe(value), allow_nan=False)
    assert text == '{"1": 0.5, "n": 3, "ok": true, "v": [1.0, null], "x": null}'
    fit = load_fit(json.loads(json.dumps(RECORDS["fixture:fit.baseline"])))
    fit.params = {"E": np.float64(1.5), "A": np.float32(2.0), "alpha": np.nan}
    assert json.loads(json.dumps(fit.to_json_dict(), allow_nan=False))["params"] == {"E": 1.5, "A": 2.0, "alpha": None}


def test_every_json_loopscale_writes_goes_through_json_text():
    """Issue 52: `power --json` wrote NaN (json.dumps' default), which strict parsers refuse. Every JSON file or line
    is now written by atomic.json_text (json_safe, allow_nan=False); a json.dumps elsewhere may only hash or round-trip
    (its text never reaches a file), or be the lock's owner line (pid, host, times: never NaN)."""
    package = Path(__file__).resolve().parents[2] / "loopscale"
    writers = [
        f"{path.relative_to(package)}:{i}"
        for path in sorted(package.rglob("*.py"))
        if path.name not in ("atomic.py", "lock.py")
        for i, line in enumerate(path.read_text().splitlines(), 1)
        if "json.dump" in line and "hashlib." not in line and "json.loads(json.dumps(" not in line
    ]
    assert writers == []
