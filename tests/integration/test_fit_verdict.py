"""One verdict everywhere (issue 29, item 2): every fit JSON carries its conditioning checks
({"checks": [{"name", "target", "value", "ok"}], "verdict", "measured"}), `fit` and `compare` print them and
end in one line ("phi measured" / "Δφ measured" or "not measured: <reasons>"), joint fits have their own
(per-recipe phi, iso-FLOP minima per recipe, the delta-phi interval), and a forked sweep is bootstrapped by
parent job unless told otherwise. Through loopscale.cli.main in this process (support.cli.run_cli)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from loopscale.fit import synthetic as S
from loopscale.fit.runs_table import budget_column
from support.cli import run_cli
from support.paths import FIXTURES

SMALL = FIXTURES / "looped_synthetic_small.csv"


def loopscale(*args):
    return run_cli([str(a) for a in args])


def _last_line(text: str) -> str:
    return text.strip().splitlines()[-1]


def _check_schema(cond: dict, joint: bool = False) -> None:
    assert set(cond) == {"checks", "warnings", "verdict", "measured", "noise"} | (
        {"delta_phi", "mde_formula"} if joint else set()
    )
    for c in cond["checks"]:
        assert set(c) == {"name", "protects", "target", "value", "ok"}
        assert isinstance(c["name"], str) and isinstance(c["target"], str) and isinstance(c["ok"], bool)
        assert c["protects"] in ("phi identified", "intervals calibrated", "N*/D* extrapolation")
        assert isinstance(c["value"], (int, float, str))
    blocking = [c for c in cond["checks"] if c["protects"] != "N*/D* extrapolation"]
    warned = [c for c in cond["checks"] if c["protects"] == "N*/D* extrapolation" and not c["ok"]]
    assert len(cond["warnings"]) == len(warned)  # a failed extrapolation check is a warning, never a reason
    if not joint:
        assert cond["measured"] == all(c["ok"] for c in blocking)


def test_a_well_conditioned_fit_says_phi_measured_in_the_json_fit_and_compare(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for out, seed in ((b, 1), (a, 0)):  # a last: `res` is a's
        res = loopscale("fit", SMALL, "--bootstrap", 30, "--seed", seed, "--out", out)
        assert res.returncode == 0, res.stderr
    cond = json.loads(a.read_text())["conditioning"]
    _check_schema(cond)
    names = [c["name"] for c in cond["checks"]]
    assert names == [
        "E off its bounds",
        "phi off its bounds",
        "phi interval",
        "phi interval width",
        "iso-FLOP minima inside the grid",
    ]
    assert cond["verdict"].startswith("phi measured: phi = ") and cond["measured"]
    assert "conditioning:" in res.stdout and cond["verdict"] in res.stdout
    cmp = loopscale("compare", a, b)
    assert cmp.returncode == 0, cmp.stderr
    # two fits of one sweep's law with different bootstrap seeds: the same phi, the difference within +-0.08
    assert _last_line(cmp.stdout).startswith("no difference detected: |Δφ| < 0.0")
    assert "minimum detectable |Δφ| of this design: " in cmp.stdout


def test_E_on_its_bound_is_not_measured(tmp_path):
    table = pd.read_csv(SMALL)
    table["L"] = table["L"] - 1.65  # below the law's floor: the fit pins E to its lower bound
    src, out = tmp_path / "runs.csv", tmp_path / "fit.json"
    table.to_csv(src, index=False)
    res = loopscale("fit", src, "--no-profile", "--out", out)
    assert res.returncode == 0, res.stderr
    cond = json.loads(out.read_text())["conditioning"]
    _check_schema(cond)
    failed = {c["name"] for c in cond["checks"] if not c["ok"]}
    assert {"E off its bounds", "phi interval"} <= failed
    assert cond["verdict"].startswith("not measured: ") and "on its lower bound" in cond["verdict"]
    assert "no profile interval for phi" in cond["verdict"]
    assert _last_line(res.stdout.split("wrote")[0]) == cond["verdict"]  # the verdict ends what fit prints
    cmp = loopscale("compare", out, out)
    assert _last_line(cmp.stdout).startswith(f"not measured: {out}: E off its bounds fails (4.54e-05; target inside")


def test_an_iso_flop_minimum_on_the_edge_beyond_the_noise_is_a_warning_not_a_failure(tmp_path):
    """Widths below 768 left out at 1e18: 768 becomes the edge, ~2% below 1024 in log L, beyond the noise of
    single runs about this law (RMS residual ~0.4%): phi is still measured, N*/D* extrapolation is warned."""
    table = pd.read_csv(SMALL)
    table = table[~(np.isclose(budget_column(table), 1e18) & (table.width < 768))]
    src, out = tmp_path / "runs.csv", tmp_path / "fit.json"
    table.to_csv(src, index=False)
    res = loopscale("fit", src, "--out", out)
    assert res.returncode == 0, res.stderr
    cond = json.loads(out.read_text())["conditioning"]
    _check_schema(cond)
    assert {c["name"] for c in cond["checks"] if not c["ok"]} == {"iso-FLOP minima inside the grid"}
    assert cond["measured"] and cond["verdict"].startswith("phi measured: ")
    assert cond["warnings"] == [
        "N*/D* extrapolation not warranted: iso-FLOP minimum on the edge of the sizes (r = 1 at 1e+18, r = 2 at "
        "1e+18, r = 4 at 1e+18)"
    ]
    lines = res.stdout.split("wrote")[0].strip().splitlines()
    assert lines[-2] == f"warning: {cond['warnings'][0]}" and lines[-1] == cond["verdict"]


def test_a_joint_fit_carries_the_joint_checks_and_compare_prints_them(tmp_path):
    src, out = tmp_path / "runs.csv", tmp_path / "joint.json"
    S.small_recipe_sweep(seed=0).to_csv(src, index=False)
    res = loopscale("fit", src, "--joint", "recipe", "--bootstrap", 30, "--out", out)
    assert res.returncode == 0, res.stderr
    cond = json.loads(out.read_text())["conditioning"]
    _check_schema(cond, joint=True)
    names = [c["name"] for c in cond["checks"]]
    for name in (
        "E off its bounds",
        "phi[baseline] off its bounds",
        "phi[additive] off its bounds",
        "Δφ[additive] off its bounds",
        "iso-FLOP minima inside the grid (baseline)",
        "iso-FLOP minima inside the grid (additive)",
        "Δφ[additive] interval",
    ):
        assert name in names
    ok = {c["name"]: c["ok"] for c in cond["checks"]}
    assert ok["Δφ[additive] interval"] and ok["Δφ[additive] off its bounds"] and ok["E off its bounds"]
    # the sweep's true delta-phi is 0.38 - 0.46 = -0.08; with 30 runs at 0.5% noise the answer comes with numbers
    answer = cond["delta_phi"]["additive"]
    assert answer["answer"] in ("real", "no difference", "not measured") and cond["verdict"] == answer["line"]
    assert answer["mde"] == pytest.approx(2.8016 * answer["se"], rel=1e-4) and "2.80 se" in cond["mde_formula"]
    lo, hi = answer["interval"]
    assert f"[{lo:+.3f}, {hi:+.3f}]" in cond["verdict"]
    assert cond["verdict"] in res.stdout
    cmp = loopscale("compare", out)
    assert cmp.returncode == 0 and _last_line(cmp.stdout) == cond["verdict"]


@pytest.fixture
def forked(tmp_path):
    """The small table as a forked sweep: one parent run per model (r, width), a branch per budget."""
    table = pd.read_csv(SMALL)
    table["parent"] = "runs/sweep/r" + table.r.astype(str) + "-w" + table.width.astype(str)
    src = tmp_path / "forked.csv"
    table.to_csv(src, index=False)
    return src


def test_a_forked_sweep_is_bootstrapped_by_parent_job_by_default(tmp_path, forked):
    out = tmp_path / "fit.json"
    res = loopscale("fit", forked, "--bootstrap", 30, "--out", out)
    assert res.returncode == 0, res.stderr
    d = json.loads(out.read_text())
    assert d["bootstrap"]["cluster"] == "parent" and d["settings"]["cluster"] == "parent"
    assert "resampling clusters of parent" in res.stdout
    interval = next(c for c in d["conditioning"]["checks"] if c["name"] == "phi interval")
    assert interval["ok"] and "parent" in interval["target"]


def test_a_forked_sweep_is_judged_on_a_profile_that_groups_each_parents_branches(tmp_path, forked):
    """The verdict reads the profile (issue 53), whose scale sums a parent's branches; a bootstrap by rows stays
    beside it in the record and is not what the verdict reads. Without a profile there is no verdict interval."""
    out = tmp_path / "fit.json"
    res = loopscale("fit", forked, "--bootstrap", 30, "--cluster", "rows", "--out", out)
    assert res.returncode == 0, res.stderr
    d = json.loads(out.read_text())
    assert d["bootstrap"]["cluster"] is None
    assert 1 < d["profile_phi"]["groups"] < d["n_rows"]
    assert "bootstrap" not in d["conditioning"]["verdict"]
    res = loopscale("fit", forked, "--bootstrap", 30, "--no-profile", "--out", out)
    d = json.loads(out.read_text())
    assert not d["conditioning"]["measured"] and "no profile interval for phi" in d["conditioning"]["verdict"]


def test_a_check_without_a_value_prints_as_n_a():
    """A NaN check value (a bootstrap whose interval could not be formed) is stored as null in the JSON;
    reading the record back prints it, it does not stop `compare` with a format error."""
    from loopscale.fit.verdict_render import verdict_lines

    cond = {
        "checks": [
            {
                "name": "phi interval width",
                "protects": "phi identified",
                "target": "<= 0.16 wide",
                "value": None,
                "ok": False,
            }
        ],
        "verdict": "not measured: phi's interval could not be formed",
        "measured": False,
    }
    assert verdict_lines(cond) == [
        "conditioning:",
        "  FAIL  [phi identified] phi interval width: n/a (target <= 0.16 wide)",
        "not measured: phi's interval could not be formed",
    ]
    # a record written before checks said what they protect: every failure blocks, as then
    old = {"checks": [{"name": "phi interval width", "target": "<= 0.35 wide", "value": 0.4, "ok": False}]}
    assert verdict_lines({**old, "verdict": "not measured: x", "measured": False})[1] == (
        "  FAIL  phi interval width: 0.4 (target <= 0.35 wide)"
    )


def test_report_gives_a_verdict_for_a_record_written_before_the_checks(tmp_path):
    """`report` on a fit JSON without a conditioning block computes the checks from the table (as the notebook
    does) instead of saying nothing; a joint record it cannot compute them for says to refit."""
    plots = FIXTURES / "plots"
    res = loopscale("report", plots / "runs.csv", "--fit", plots / "fit.baseline.json", "--out", tmp_path / "r.md")
    assert res.returncode == 0, res.stderr[-3000:]
    assert _last_line(res.stdout).startswith("verdict: ") and "iso-FLOP minima inside the grid" in res.stdout
    assert "## Can the fit be trusted?" in (tmp_path / "r.md").read_text()
    res = loopscale("report", plots / "runs.csv", "--fit", plots / "fit.joint.json", "--out", tmp_path / "j.md")
    assert res.returncode == 0, res.stderr[-3000:]
    assert _last_line(res.stdout) == (
        "verdict: not measured: this joint fit record has no conditioning checks: refit it (`loopscale fit --joint`)"
    )


def test_joint_drop_top_k_counts_a_shared_run_once(tmp_path):
    """`fit T1 T2 --joint recipe --drop-top-k K` leaves out the K highest losses of the merged table: the
    r = 1 runs both recipe tables hold are one row each, so the result is the same however the runs are split
    into tables (each table's own top K would leave out between K and 2K rows)."""
    table = S.small_recipe_sweep(seed=0)
    dense = table[table["r"] == 1]
    base, other = tmp_path / "base.csv", tmp_path / "other.csv"
    table[table["recipe"] == "baseline"].to_csv(base, index=False)
    pd.concat([dense, table[(table["recipe"] != "baseline") & (table["r"] > 1)]]).to_csv(other, index=False)
    out = tmp_path / "joint.json"
    res = loopscale("fit", base, other, "--joint", "recipe", "--drop-top-k", 2, "--no-profile", "--out", out)
    assert res.returncode == 0, res.stderr[-3000:]
    record = json.loads(out.read_text())
    assert record["input"]["n_duplicate_rows_dropped"] == len(dense)
    assert record["input"]["n_rows_used"] == len(table) - 2
