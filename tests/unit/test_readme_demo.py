"""The README's demo numbers are what `make demo` wrote (issue 53 item 6): docs/demo_summary.json is the
runs/demo/demo.json of the run the README quotes, and the README holds `loopscale.demo.readme_sentence` of it, the
line the demo itself prints after "README:". Rerunning the demo means copying its demo.json there and pasting the
sentence it printed."""

from __future__ import annotations

import json

from loopscale.demo import readme_sentence
from support.paths import REPO_ROOT


def test_the_readmes_demo_sentence_is_what_the_demo_wrote():
    summary = json.loads((REPO_ROOT / "docs" / "demo_summary.json").read_text())
    assert readme_sentence(summary) in (REPO_ROOT / "README.md").read_text()
    v = summary["verdict"]
    assert v["interval_name"] == "profile" and v["measured"] == v["line"].startswith("phi measured")
    if v["interval"] and None not in v["interval"]:  # a closed interval holds phi, and a measured line quotes it
        lo, hi = v["interval"]
        assert lo <= v["phi"] <= hi
        assert not v["measured"] or f"[{lo:.3f}, {hi:.3f}]" in v["line"]


def test_an_open_interval_gives_the_verdicts_reason_not_nan():
    summary = {
        "wall_time_s": 600.0,
        "verdict": {
            "line": "not measured: phi = -1 on its lower bound",
            "measured": False,
            "phi": -1.0,
            "interval": [None, None],
            "interval_name": "profile",
        },
    }
    sentence = readme_sentence(summary)
    assert "nan" not in sentence and sentence.endswith('"not measured"**: phi = -1 on its lower bound.')
    closed = {**summary, "verdict": {**summary["verdict"], "interval": [0.4, 0.6], "phi": 0.5}}
    assert "[0.400, 0.600] is 0.200 wide" in readme_sentence(closed)
