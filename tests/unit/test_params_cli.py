"""`loopscale params`: JSON on stdout for good input, exit 2 with one line on stderr for bad input. In-process
(support.cli.run_cli); tests/system/test_commands.py runs the command once as a child process."""

import json

import pytest

from loopscale.model.accounting import accounting_report, cpu_model, paper_model
from support.cli import CliResult, run_cli


def params(*args: str) -> CliResult:
    return run_cli(["params", *args])


def test_paper_preset_json():
    out = params("--preset", "paper", "--size", "6", "--r", "2")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert (report["N_once"], report["N_rec"]) == (7_377_024, 14_161_920)
    # the same report as the library's (whose keys tests/unit/test_accounting.py checks)
    assert report == json.loads(json.dumps(accounting_report(paper_model(6, 2))))


@pytest.mark.parametrize("size,r,recipe", [(6, 1, "baseline"), (40, 8, "tbptt"), (18, 4, "hyper")])
def test_paper_preset_is_the_published_model(size, r, recipe):
    """r = 1 the plain 0-20-0 stack, r > 1 2 + 16/r x r + 2 (concat injection, or the hyper lanes); the
    published init and soft-cap; the same numbers as the accounting functions."""
    out = params("--preset", "paper", "--size", str(size), "--r", str(r), "--recipe", recipe)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report == json.loads(json.dumps(accounting_report(paper_model(size, r, recipe))))
    assert (report["p"], report["k"], report["c"]) == ((0, 20, 0) if r == 1 else (2, 16 // r, 2))
    assert report["injection"] == {"baseline": "passthrough", "tbptt": "concat", "hyper": "hyper"}[recipe]
    assert (report["init"], report["logit_softcap"], report["vocab_padded"]) == ("paper", 15.0, 32064)


def test_cpu_preset_with_overrides():
    out = params(
        "--preset",
        "cpu",
        "--d-model",
        "128",
        "--r",
        "4",
        "--bptt-k",
        "2",
        "--mlp",
        "swiglu",
        "--tie-embeddings",
        "--seq-len",
        "128",
        "--vocab-size",
        "1000",
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    expected = cpu_model(128, 4, bptt_k=2, mlp="swiglu", tie_embeddings=True, seq_len=128, vocab_size=1000)
    assert report == json.loads(json.dumps(accounting_report(expected)))
    assert (report["bptt_k"], report["recipe"], report["lm_head"], report["k"]) == (2, "tbptt", 0, 2)


@pytest.mark.parametrize("flags,recipe", [(["--bptt-k", "2"], "tbptt"), (["--injection", "additive"], "additive")])
def test_a_preset_names_the_design_its_flags_describe(flags, recipe):
    """--recipe auto (the default) labels the design the flags describe, on the paper preset as on the cpu one (the
    paper preset refused both: its recipe was resolved to baseline before the flags applied)."""
    for preset in ("paper", "cpu"):
        out = params("--preset", preset, "--r", "4", *flags)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["recipe"] == recipe


@pytest.mark.parametrize(
    "args,message",
    [
        (["--r", "3"], "not divisible by r=3"),
        (["--r", "4", "--bptt-k", "5"], "bptt_k=5 must be between 1 and r=4"),
        (["--r", "2", "--injection", "sum"], "injection='sum' is not allowed"),
        (["--r", "1", "--injection", "hyper"], "injection='hyper' needs r > 1"),
        (["--preset", "paper", "--recipe", "a/b"], "recipe='a/b' is not a safe name"),
        (["--preset", "cpu", "--size", "6"], "--size applies to --preset paper"),
    ],
)
def test_bad_input_exits_2(args, message):
    out = params(*args)
    assert out.returncode == 2
    assert out.stdout == ""
    assert message in out.stderr and len(out.stderr.strip().splitlines()) == 1
