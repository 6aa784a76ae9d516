"""A fit record's blocks by hand (issue 58, loopscale/fit/record_blocks.py): keys written in the order read with
new keys after, an absent key stays absent and a None stays None, keys the class does not name kept through
`replace`, `get` and `[]` by JSON key, an empty block falsy, a non-object refused in one line naming the block;
the phi profile's grid under its parameter's name and its statistics read and written as the JSON has them; and
loopscale/fit/verdict_record.py's conditioning block (an old check without "protects", the optional keys)."""

from __future__ import annotations

import pytest

from loopscale.errors import InputError
from loopscale.fit.record_blocks import ABSENT, Holdout, Profile


def test_a_block_is_written_in_the_order_it_was_read_with_unnamed_keys_kept_and_new_ones_last():
    d = {"mean_abs_rel_error": 0.012, "custom": [1, 2], "held_out_budget": 2e19, "max_abs_rel_error": None}
    block = Holdout.from_json(d)
    assert list(block.to_json()) == ["mean_abs_rel_error", "custom", "held_out_budget", "max_abs_rel_error"]
    assert block.to_json() == d  # None stays None, absent stays absent
    assert block.n_train is ABSENT and "n_train" not in block.to_json()
    changed = block.replace(n_train=40, held_out_budget=1e19)
    assert list(changed.to_json()) == [*d, "n_train"]
    assert changed.to_json()["held_out_budget"] == 1e19 and changed["custom"] == [1, 2]
    # fields by their JSON key: None and absent give the default to get, [] refuses an absent key only
    assert block.get("max_abs_rel_error", "none") == "none" and block.get("n_train", 7) == 7
    assert block["max_abs_rel_error"] is None and block["custom"] == [1, 2]
    with pytest.raises(KeyError):
        block["n_train"]
    assert not Holdout.from_json({}) and Holdout.from_json({"x": 1})
    assert Holdout.from_json(block) is block


def test_a_block_that_is_no_object_is_refused_naming_it():
    with pytest.raises(InputError, match=r"^the fit's holdout must be an object; got list$"):
        Holdout.from_json([1, 2])
    with pytest.raises(InputError, match=r"^the fit's profile_phi must be an object; got str$"):
        Profile.from_json("x")


def test_the_profile_keeps_its_grid_under_the_parameters_name_and_its_statistics_in_place():
    d = {"param": "phi", "phi": [0.3, 0.4, 0.5], "objective": [2.0, 1.0, 2.5], "interval": [0.35, None],
         "threshold": 3.84, "mean_psi_sq": 0.7, "mean_psi_prime": 0.9, "warning": "walked below"}  # fmt: skip
    prof = Profile.from_json(d)
    assert prof.x == [0.3, 0.4, 0.5] and prof.stats == {"mean_psi_sq": 0.7, "mean_psi_prime": 0.9}
    assert prof["phi"] == [0.3, 0.4, 0.5] and prof["mean_psi_sq"] == 0.7 and prof["interval"] == [0.35, None]
    assert prof.to_json() == d and list(prof.to_json()) == list(d)
    # a profile written without its parameter's name keeps its grid under x
    bare = Profile.from_json({"x": [1.0, 2.0], "objective": [0.1, 0.2]})
    assert bare.x == [1.0, 2.0] and bare.stats == {} and bare.to_json() == {"x": [1.0, 2.0], "objective": [0.1, 0.2]}
    # the statistics before the warning, the grid last, for a block made now
    made = Profile(objective=[1.0], interval=[0.1, 0.2], param="phi", stats={"s": 1.0}, warning="w", x=[0.4])
    assert list(made.to_json()) == ["objective", "interval", "param", "s", "warning", "phi"]


def test_the_conditioning_block_writes_what_it_has_and_an_old_check_without_what_it_protects():
    import numpy as np

    from loopscale.fit.verdict_record import Check, Conditioning

    old = Check("phi interval width", None, "<= 0.35 wide", 0.4, np.bool_(False))
    assert old.ok is False and type(old.ok) is bool
    assert list(old.to_json()) == ["name", "target", "value", "ok"]  # no "protects" before issue 38
    new = Check("E off its bounds", "phi identified", "inside", [0.1, 2.0], True)
    assert list(new.to_json()) == ["name", "protects", "target", "value", "ok"]
    cond = Conditioning([old, new], ["w"], None, False, blocking=("drift",))
    out = cond.to_json()
    # verdict and measured always written (None and False included); the optional blocks only when present
    assert out == {
        "checks": [old.to_json(), new.to_json()],
        "warnings": ["w"],
        "verdict": None,
        "measured": False,
        "blocking": ["drift"],
    }
    back = Conditioning.from_json(out)
    assert back.blocking == ("drift",) and back.checks[0].protects is None and back.to_json() == out
