"""The lines `loopscale fit`, `compare` and `report` print from a fit record, written out by hand (issue 58):
loopscale/fit/noise_text.py (the seed-noise block: the seed counts in numeric order, each sigma model's form,
per r, the scale line only above 1) and loopscale/fit/verdict_render.py (each check's status: ok, FAIL for what
blocks, warn for the rest; a record's own blocking list; the MDE lines; the verdict last). Records are JSON
written here: milliseconds."""

from __future__ import annotations

from loopscale.fit.noise_text import noise_lines
from loopscale.fit.record_blocks import Noise
from loopscale.fit.verdict_render import closing_lines, verdict_lines, verdict_rows


def noise(**over) -> Noise:
    base = {
        "n_points": 9,
        "seeds_per_point": {"10": 1, "2": 3, "1": 5},
        "dof": 12,
        "model": {"kind": "constant", "params": {"sigma": 0.0123456}},
        "sigma_log": 0.0098765,
        "sigma_L_nats": 0.0321987,
        "per_r": {
            "1": {"sigma_log": 0.0111111, "sigma_L_nats": 0.0345678, "n_replicated_points": 2, "n_points": 4},
            "4": {"sigma_log": None, "model_sigma_log": 0.0087654, "n_points": 5},
        },
        "weights": "weights 1 / sigma_i^2 from the model",
    }
    return Noise.from_json({**base, **over})


def test_the_noise_block_in_lines_with_seed_counts_in_numeric_order():
    assert noise_lines(noise()) == [
        "seed noise: 9 points (5 with 1 seed, 3 with 2 seeds, 1 with 10 seeds); 12 degrees of freedom",
        "  sigma of log L: constant (0.0123; rule: lowest AICc, another model must beat the constant by 2); "
        "RMS 0.00988, i.e. 0.0322 nats of L",
        "  per r, pooled from that r's points: r=1 0.0111 (0.0346 nats, 2 of 4 points repeated); "
        "r=4 not repeated (model 0.00877)",
        "  weights 1 / sigma_i^2 from the model",
    ]


def test_each_sigma_model_prints_its_own_form():
    per_r = noise(model={"kind": "per r", "params": {"sigma_r": {"1": 0.0123456, "8": 0.0234567}}})
    assert noise_lines(per_r)[1].startswith("  sigma of log L: per r (r=1 0.0123, r=8 0.0235; rule:")
    trend = {"covariate": "log_N_eff", "a": -4.56789, "b": -0.345678, "x_mean": 19.87654}
    lines = noise_lines(noise(model={"kind": "trend", "params": trend}))
    assert lines[1].startswith("  sigma of log L: trend (exp(-4.57 -0.346 (log N eff - 19.88)); rule:")
    trend["b"] = 0.5
    assert "exp(-4.57 +0.5 (log N eff - 19.88))" in noise_lines(noise(model={"kind": "trend", "params": trend}))[1]


def test_no_sigma_model_is_the_statement_and_a_block_without_seeds_says_zero_dof():
    lines = noise_lines(noise(model=None, statement="no seed repeats: the intervals omit seed noise"))
    assert lines == [
        "seed noise: 9 points (5 with 1 seed, 3 with 2 seeds, 1 with 10 seeds); 12 degrees of freedom",
        "  no seed repeats: the intervals omit seed noise",
    ]
    bare = Noise.from_json({"n_points": 3, "model": None, "statement": "s"})
    assert noise_lines(bare)[0] == "seed noise: 3 points (); 0 degrees of freedom"
    assert noise_lines(None) == [] and noise_lines(Noise.from_json({})) == []


def test_the_scale_line_only_above_one_the_f_reference_always_and_the_bootstrap_last():
    scaled = noise(
        lack_of_fit=2.345678,
        scale={"scale": 1.53219, "scatter_dof": 7, "reference_dof": 7},
        bootstrap="resamples the seeds within each point",
    )
    assert noise_lines(scaled)[3:] == [
        "  weights 1 / sigma_i^2 from the model; scatter about the law / seed noise S^2 = 2.35",
        "  the law misses its points by more than seed noise: sigma x 1.53 (the scatter about the law, 7 degrees "
        "of freedom) in the fit and its intervals",
        "  profile intervals on F(1, 7) (the degrees of freedom of the scale)",
        "  bootstrap resamples the seeds within each point",
    ]
    at_one = noise(lack_of_fit=0.8, scale={"scale": 1.0, "scatter_dof": 7, "reference_dof": 12})
    assert noise_lines(at_one)[3:] == [
        "  weights 1 / sigma_i^2 from the model; scatter about the law / seed noise S^2 = 0.8",
        "  profile intervals on F(1, 12) (the degrees of freedom of the scale)",
    ]
    assert noise_lines(noise(lack_of_fit=0.0))[3] == (
        "  weights 1 / sigma_i^2 from the model; scatter about the law / seed noise S^2 = 0"
    )


# -- verdict_render.py ---------------------------------------------------------------------------------------


def check(name, protects, value, target, ok):
    return {"name": name, "protects": protects, "value": value, "target": target, "ok": ok}


def test_each_check_is_ok_fail_where_it_blocks_and_warn_where_it_does_not():
    cond = {
        "checks": [
            check("phi interval width", "phi identified", 0.123456, "<= 0.16 wide", True),
            check("phi off its bounds", "phi identified", [0.1, 2.0], "inside", False),
            check("seed sigma", "intervals calibrated", 0.05, 0.01, False),
            check("iso-FLOP minima inside the grid", "N*/D* extrapolation", "2 of 4 on an edge", "all inside", False),
        ],
        "warnings": ["N*/D* extrapolation not warranted: minima on the edge"],
        "verdict": "not measured: phi off its bounds",
        "measured": False,
    }
    assert verdict_rows(cond) == [
        ("ok", "phi identified", "phi interval width", "0.1235", "<= 0.16 wide"),
        ("FAIL", "phi identified", "phi off its bounds", "[0.1, 2]", "inside"),
        ("FAIL", "intervals calibrated", "seed sigma", "0.05", "0.01"),
        ("warn", "N*/D* extrapolation", "iso-FLOP minima inside the grid", "2 of 4 on an edge", "all inside"),
    ]
    assert verdict_lines(cond) == [
        "conditioning:",
        "  ok    [phi identified] phi interval width: 0.1235 (target <= 0.16 wide)",
        "  FAIL  [phi identified] phi off its bounds: [0.1, 2] (target inside)",
        "  FAIL  [intervals calibrated] seed sigma: 0.05 (target 0.01)",
        "  warn  [N*/D* extrapolation] iso-FLOP minima inside the grid: 2 of 4 on an edge (target all inside)",
        "warning: N*/D* extrapolation not warranted: minima on the edge",
        "not measured: phi off its bounds",
    ]


def test_a_record_naming_its_own_blocking_checks_blocks_on_those_only():
    cond = {
        "checks": [
            check("phi interval width", "phi identified", 0.3, "<= 0.16 wide", False),
            check("drift identified", "drift", 0.3, "<= 0.1", False),
            {"name": "old check", "value": 1.0, "target": 0.5, "ok": False},  # says nothing of what it protects
        ],
        "verdict": None,
        "measured": True,
        "blocking": ["drift"],
    }
    assert [row[0] for row in verdict_rows(cond)] == ["warn", "FAIL", "FAIL"]
    assert verdict_lines(cond)[3] == "  FAIL  old check: 1 (target 0.5)"
    # no verdict text: the measured flag speaks
    assert closing_lines(cond) == ["measured"]
    assert closing_lines({**cond, "measured": False}) == ["not measured"]


def test_each_delta_phis_mde_line_with_its_se_and_source_and_none_without_an_mde():
    answer = {"estimate": 0.1, "interval": [0.0, 0.2], "answer": "real", "line": "x"}
    cond = {
        "checks": [],
        "warnings": ["w1", "w2"],
        "verdict": "Δφ[tb] = -0.081: real",
        "measured": True,
        "delta_phi": {
            "tb": {**answer, "source": "joint profile", "se": 0.0354321, "mde": 0.0992817},
            "phi": {**answer, "source": "paired bootstrap", "se": 0.02, "mde": 0.05604},
            "hy": {**answer, "source": "bootstrap", "se": 0.03, "mde": None},  # no MDE: no line
        },
    }
    assert closing_lines(cond) == [
        "warning: w1",
        "warning: w2",
        "minimum detectable |Δφ[tb]| of this design: 0.099 (80% power, 5% two-sided: 2.80 x se 0.0354 from the "
        "joint profile)",
        "minimum detectable |Δφ| of this design: 0.056 (80% power, 5% two-sided: 2.80 x se 0.02 from the paired "
        "bootstrap)",
        "Δφ[tb] = -0.081: real",
    ]
    assert verdict_lines(cond)[0] == "conditioning:" and verdict_lines(cond)[1:] == closing_lines(cond)
    assert (
        verdict_lines(None)
        == verdict_lines({})
        == ["not measured: the fit record has no conditioning checks (fitted before they existed: refit)"]
    )
