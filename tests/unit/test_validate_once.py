"""`loopscale validate`'s law-free check of the loop (loopscale/fit/validation/once.py, issue 54): each looped run
against the r = 1 stack whose middle is its block run once, at the looped run's tokens; hand-built tables with hand
interpolations. And a validation whose phi interval is open on a side (a profile of the refit with no bootstrap:
it crashed the conventions' half-width and the Markdown's interval line)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from loopscale.fit.validation.flags import interval_half_width, once_flags, verdict
from loopscale.fit.validation.once import loss_at, once_lines, once_section
from loopscale.fit.validation.record import ValidationRecord
from loopscale.fit.validation.text import markdown


def test_the_once_stacks_loss_is_linear_in_ln_d_and_extrapolated_by_at_most_a_quarter():
    D, L = [1e5, 2e5, 4e5, 2e5], [4.0, 3.75, 3.7, 3.85]  # two seeds at 2e5: 3.80 on average
    assert loss_at(D, L, 2e5) == pytest.approx(3.8)
    assert loss_at(D, L, math.sqrt(2) * 1e5) == pytest.approx(3.9)  # halfway in ln D between 4.0 and 3.8
    assert loss_at(D, L, 2 * math.sqrt(2) * 1e5) == pytest.approx(3.75)
    # below the first D along the first segment: 4.0 - 0.2 ln(0.9) / ln 2
    assert loss_at(D, L, 0.9e5) == pytest.approx(4.0 - 0.2 * math.log(0.9) / math.log(2))
    assert loss_at(D, L, 4e5 * 1.2) == pytest.approx(3.7 - 0.1 * math.log(1.2) / math.log(2))
    assert loss_at(D, L, 0.79e5) is None and loss_at(D, L, 5.1e5) is None  # more than 1.25x past the ends
    assert loss_at([1e5, 1e5], [4.0, 4.1], 1e5) is None  # one D: no line


def _row(r, n_rec, width, D, L, **extra):
    return {"r": r, "n_rec": n_rec, "width": width, "D": D, "L": L, "n_prelude": 1, "n_coda": 1, **extra}


def table() -> pd.DataFrame:
    return pd.DataFrame(
        [
            _row(1, 8, 24, 2e5, 3.60),  # the iso-depth r = 1 run: not a once-stack of anything here
            _row(1, 4, 24, 1e5, 3.90),  # r = 2's once-stack at width 24: 3.80 at 2e5
            _row(1, 4, 24, 4e5, 3.70),
            _row(1, 4, 32, 1e5, 3.50),  # width 32's: never compared with width 24's looped runs
            _row(1, 4, 32, 4e5, 3.30),
            _row(1, 4, 24, 1e5, 3.00, n_prelude=2),  # another prelude: not the block run once
            _row(2, 4, 24, 2e5, 3.75),  # beats its once-stack by 0.05
            _row(2, 4, 24, 4e5, 3.72),  # loses by 0.02
            _row(2, 4, 32, 2e5, 3.45),  # width 32: 3.40 there, loses by 0.05
            _row(2, 4, 24, 1e6, 3.60),  # beyond 4e5 x 1.25: left out, counted
            _row(4, 2, 24, 2e5, 3.80),  # no 2-layer stack: not compared
        ]
    )


def test_each_looped_run_is_read_against_its_own_block_run_once_at_its_own_tokens():
    section = once_section(table())
    assert [(row["width"], row["D"], round(row["L_once"], 6), round(row["gain"], 6)) for row in section["rows"]] == [
        (24.0, 2e5, 3.8, 0.05),
        (24.0, 4e5, 3.7, -0.02),
        (32.0, 2e5, 3.4, -0.05),
    ]
    (summary,) = section["by_r"]
    assert summary["r"] == 2 and summary["block_layers"] == 4 and summary["runs"] == 3 and summary["better"] == 1
    assert summary["mean_gain"] == pytest.approx(-0.02 / 3) and summary["min_gain"] == pytest.approx(-0.05)
    assert summary["max_gain"] == pytest.approx(0.05) and section["skipped"] == 1
    assert once_lines(section)[-3:] == [
        "| 2 | 4 | 3 | -0.0067 [-0.0500, +0.0500] | 1 of 3 |",
        "",
        "1 looped run(s) left out: their once-stack's tokens do not reach theirs.",
    ]
    assert once_section(table().drop(columns="n_rec")) is None
    assert once_section(table()[table()["r"] != 1]) is None  # no once-stack at all


def test_an_r_whose_every_looped_run_loses_to_its_block_run_once_is_flagged():
    lost = {"r": 4, "block_layers": 2, "runs": 3, "mean_gain": -0.04, "min_gain": -0.05, "max_gain": -0.03}
    flags = once_flags({"by_r": [{**lost, "better": 0}, {**lost, "r": 2, "better": 1}, {**lost, "r": 8, "runs": 2}]})
    assert flags == [
        "r = 4: every looped run (3) lost to its block run once at equal data (mean -0.0400 nats): its passes are "
        "worth less than one pass"
    ]  # r = 2 won once; r = 8 has two runs only
    assert once_flags(None) == []


def test_a_phi_interval_open_on_a_side_has_no_half_width_and_prints_open():
    assert interval_half_width([0.2, 0.6]) == pytest.approx(0.2)
    assert interval_half_width([None, -0.863]) is None and interval_half_width(None) is None
    record = ValidationRecord(
        fit={"law": "looped", "path": "runs.csv", "phi_interval": [None, -0.863], "interval_source": "a profile"},
        n_rows=4,
        forms=[],
        folds=[],
        results=[],
        once=once_section(table()),
    )
    text = markdown(record.replace(verdict=verdict(record)))
    assert "phi interval (a profile): [open, -0.863]." in text
    assert "## The loop against its block run once (equal data)" in text
    assert "| 2 | 4 | 3 | -0.0067 [-0.0500, +0.0500] | 1 of 3 |" in text
