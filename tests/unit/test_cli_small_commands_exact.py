"""The small commands' defaults, printed numbers and refusals by hand (issue 58), in-process: loopscale/cli/equiv.py
(each line's number from eq. 1 and the closed-form optimum written out here, M vs B at 1e9, each refusal at and
past its boundary with nothing printed), loopscale/cli/params.py (the presets' defaults, --option's number parsing,
which of two flags wins) and loopscale/cli/__init__.py (no command: the help and exit 2; a mistyped choice names
the closest one)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loopscale.cli import build_parser
from loopscale.cli import params as params_cli
from loopscale.model.accounting import accounting_report, cpu_model, paper_model
from support.cli import run_cli

FIT = Path(__file__).resolve().parents[1] / "fixtures" / "plots" / "fit.baseline.json"


def _m(n: float) -> str:
    return f"{n / 1e9:.3g}B" if n >= 1e9 else f"{n / 1e6:.3g}M"


def test_equiv_prints_the_unique_effective_and_cost_sizes_of_eq_1():
    r, once, rec, phi = 3.0, 1.234e8, 3.21e8, 0.437
    res = run_cli(["equiv", "--r", r, "--n-once", once, "--n-rec", rec, "--phi", phi])
    assert res.returncode == 0 and res.stderr == ""
    n_eff = once + r**phi * rec  # 1.234e8 + 1.6163 x 3.21e8
    assert res.stdout.splitlines() == [
        "r = 3, phi = 0.437: unique parameters N_once + N_rec = 444M",
        f"  N_eff = N_once + r^phi N_rec = {n_eff / 1e6:.3g}M: the non-looped size with the same loss",
        "  N_once + r N_rec = 1.09B: the non-looped size with the same training cost",
    ]
    assert f"{n_eff / 1e6:.3g}" == "642"
    # exactly 1e9 is written in B
    res = run_cli(["equiv", "--r", "4", "--n-once", "2e8", "--n-rec", "2e8", "--phi", "0.5"])
    assert res.stdout.splitlines()[2] == "  N_once + r N_rec = 1B: the non-looped size with the same training cost"
    assert res.stdout.splitlines()[1].startswith("  N_eff = N_once + r^phi N_rec = 600M:")


def _optimum(p, C, rho, f):
    """argmin over N_cost of A (rho N)^-alpha + B (C / (f N))^-beta, in closed form."""
    a, b = p["alpha"], p["beta"]
    n = (a * p["A"] * rho**-a * (C / f) ** b / (b * p["B"])) ** (1 / (a + b))
    d = C / (f * n)
    return n, rho * n, d, p["E"] + p["A"] * (rho * n) ** -a + p["B"] * d**-b


def test_equiv_budget_gives_the_dense_and_looped_optima_each_at_its_own_flops_per_token():
    p = json.loads(FIT.read_text())["params"]
    r, once, rec, C, F, dense_F = 4.0, 2.2e8, 1.9e8, 1e19, 3.1e9, 2.7e9
    args = ["--n-once", once, "--n-rec", rec, "--fit", FIT, "--budget", C]
    res = run_cli(["equiv", "--r", r, *args, "--flops-per-token", F, "--dense-flops-per-token", dense_F])
    assert res.returncode == 0, res.stderr
    unique, cost = once + rec, once + r * rec
    dense = _optimum(p, C, 1.0, dense_F / unique)
    rho = (once + r ** p["phi"] * rec) / cost  # N_eff / N_cost of this model's shape
    looped = _optimum(p, C, rho, F / cost)
    lines = res.stdout.splitlines()
    assert lines[0] == f"r = 4, phi = {p['phi']:.4g}: unique parameters N_once + N_rec = 410M"
    for line, rr, (n, n_eff, d, L) in ((lines[3], 1, dense), (lines[4], 4, looped)):
        assert line == (
            f"  compute-optimal at C = 1e+19, r = {rr}: N_cost* = {_m(n)}, N_eff* = {_m(n_eff)}, D* = {d:.3g} "
            f"tokens, L* = {L:.4f}"
        )
    # without the FLOPs per token: 6 per parameter for both
    res = run_cli(["equiv", "--r", r, *args])
    n, n_eff, d, L = _optimum(p, C, rho, 6.0)
    assert res.stdout.splitlines()[4] == (
        f"  compute-optimal at C = 1e+19, r = 4: N_cost* = {_m(n)}, N_eff* = {_m(n_eff)}, D* = {d:.3g} tokens, "
        f"L* = {L:.4f}"
    )


R2 = ["--r", "2", "--phi", "0.5"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--r", "0.999", "--phi", "0.5"], "--r must be >= 1; got 0.999"),
        (["--r", "nan", "--phi", "0.5"], "--r must be a finite number; got nan"),
        (["--r", "2", "--phi", "inf"], "--phi must be a finite number; got inf"),
        ([*R2, "--budget", "1e19"], "--budget needs --fit (E, A, alpha, B, beta come from the fit)"),
        ([*R2, "--budget", "0"], "--budget must be a positive number; got 0.0"),
        ([*R2, "--flops-per-token", "-1"], "--flops-per-token must be a positive number; got -1.0"),
        ([*R2, "--dense-flops-per-token", "0"],
         "--dense-flops-per-token must be a positive number; got 0.0"),
    ],
)  # fmt: skip
def test_equiv_refuses_in_one_line_exit_2_and_prints_nothing(args, message):
    res = run_cli(["equiv", "--n-once", "1e8", "--n-rec", "1e8", *args])
    assert (res.returncode, res.stdout) == (2, "")
    assert res.stderr.strip() == f"loopscale equiv: error: {message}"


def test_equiv_takes_r_1_exactly():
    res = run_cli(["equiv", "--r", "1", "--n-once", "1e8", "--n-rec", "2e8", "--phi", "0.3"])
    assert res.returncode == 0 and res.stdout.splitlines()[1].startswith("  N_eff = N_once + r^phi N_rec = 300M:")


def _config(*flags):
    return params_cli.build_config(build_parser("params").parse_args(["params", *flags]))


def test_params_defaults_are_the_cpu_preset_at_width_128_r_1_and_the_paper_preset_at_size_6():
    res = run_cli(["params"])
    assert res.returncode == 0
    assert json.loads(res.stdout) == json.loads(json.dumps(accounting_report(cpu_model(128, 1))))
    assert _config("--preset", "paper") == paper_model(6, 1, "auto")
    assert _config("--d-model", "96", "--r", "2") == cpu_model(96, 2)


def test_params_options_are_numbers_where_they_parse_and_option_wins_over_its_flag():
    assert params_cli.parse_options(["lora_rank=8", "residual_lambda=0.5", "scale=1e-3", "mode=fast", "x=1=2"]) == {
        "lora_rank": 8,
        "residual_lambda": 0.5,
        "scale": 0.001,
        "mode": "fast",
        "x": "1=2",
    }
    assert type(params_cli.parse_options(["k=8"])["k"]) is int
    cfg = _config("--r", "4", "--injection", "hyper", "--hyper-lanes", "3", "--option", "hyper_lanes=2")
    assert cfg.options["hyper_lanes"] == 2
    cfg = _config("--r", "4", "--injection", "hyper", "--hyper-lanes", "3", "--hyper-dynamic")
    assert (cfg.options["hyper_lanes"], cfg.options["hyper_dynamic"]) == (3, True)
    assert "hyper_dynamic" not in (_config("--r", "4", "--injection", "hyper").options or {})


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--option", "=3"], "--option '=3': give KEY=VALUE"),
        (["--option", "lora_rank"], "--option 'lora_rank': give KEY=VALUE"),
        (["--preset", "paper", "--d-model", "128"],
         "--d-model applies to --preset cpu; the paper preset sets d_model from --size"),
    ],
)  # fmt: skip
def test_params_refusals(flags, message):
    res = run_cli(["params", *flags])
    assert (res.returncode, res.stdout, res.stderr.strip()) == (2, "", f"loopscale params: error: {message}")


def test_no_command_prints_the_help_and_exits_2_and_a_mistyped_choice_names_the_closest():
    res = run_cli([])
    assert res.returncode == 2 and res.stdout.startswith("usage: loopscale")
    for name in ("params", "fit", "demo"):
        assert name in res.stdout
    res = run_cli(["params", "--preset", "papr"])
    assert res.returncode == 2 and res.stdout == ""
    assert "invalid choice: 'papr' (choose from 'paper', 'cpu') (did you mean 'paper'?)" in res.stderr
