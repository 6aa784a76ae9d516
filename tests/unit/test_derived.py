"""Derived quantities: equivalent sizes (the published example), compute optima, the iso-FLOP minimum's vertex."""

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from loopscale.fit.derived import (
    compute_optimal,
    eff_per_cost,
    equivalent_sizes,
    isodepth_once_fraction,
)
from loopscale.fit.isoflop import window_vertex
from support.cli import run_cli


def test_published_cost_equivalent_example():
    s = equivalent_sizes(r=4, N_once=220e6, N_rec=190e6, phi=0.46)
    assert s.N_unique == pytest.approx(410e6)
    assert s.N_eff == pytest.approx(580e6, rel=0.01)  # matches a 580M non-looped model in loss
    assert s.N_cost == pytest.approx(1e9, rel=0.03)  # at the training cost of a ~1B model
    with pytest.raises(ValueError, match="r >= 1"):
        equivalent_sizes(r=0.5, N_once=1, N_rec=1, phi=0.5)


def test_equiv_cli_prints_the_example():
    out = run_cli(
        [
            "equiv",
            "--r",
            "4",
            "--n-once",
            "220e6",
            "--n-rec",
            "190e6",
            "--phi",
            "0.46",
        ],
    )
    assert out.returncode == 0, out.stderr
    assert "N_eff = N_once + r^phi N_rec = 580M" in out.stdout
    assert "980M" in out.stdout


@pytest.mark.parametrize(
    "sizes, accepted",
    [(("0", "0"), False), (("-1e6", "2e8"), False), (("2e8", "-1"), False), (("0", "1e8"), True), (("2e8", "0"), True)],
)
def test_equiv_takes_sizes_of_zero_or_more_not_both_zero(sizes, accepted):
    """--n-once and --n-rec >= 0, not both 0: a model of no parameters is refused in one line (exit 2, nothing on
    stdout), as is a negative size; one of them 0 is a model (all once, or all in the loop)."""
    n_once, n_rec = sizes
    res = run_cli(["equiv", "--r", "4", f"--n-once={n_once}", f"--n-rec={n_rec}", "--phi", "0.5"])
    if accepted:
        assert res.returncode == 0 and "N_eff = N_once + r^phi N_rec" in res.stdout, res.stderr
    else:
        assert res.returncode == 2 and res.stdout == ""
        assert "--n-once and --n-rec must be >= 0, not both 0" in res.stderr


@pytest.mark.parametrize("r", [1, 4])
def test_compute_optimal_matches_numerical_minimum(r):
    params = {"E": 1.57, "A": 28.0, "alpha": 0.20, "B": 916.0, "beta": 0.37, "phi": 0.46}
    C = 1e19
    f = isodepth_once_fraction(r)
    opt = compute_optimal(params, C, r, f)
    rho = eff_per_cost(r, params["phi"], f)

    def loss(log_n):
        n = np.exp(log_n)
        return params["A"] * (rho * n) ** -params["alpha"] + params["B"] * (C / (6 * n)) ** -params["beta"]

    num = minimize_scalar(loss, bounds=(np.log(1e6), np.log(1e12)), method="bounded", options={"xatol": 1e-10})
    assert opt.N_cost == pytest.approx(np.exp(num.x), rel=1e-4)
    assert opt.D == pytest.approx(C / (6 * opt.N_cost))
    assert opt.L == pytest.approx(params["E"] + num.fun, rel=1e-9)


def test_isodepth_fraction_and_eff_per_cost():
    assert isodepth_once_fraction(4) == pytest.approx(4 / 8)
    assert eff_per_cost(8, 1.0, 0.3) == pytest.approx(1.0)  # phi = 1: loops worth their cost
    assert eff_per_cost(8, 0.0, 0.5) == pytest.approx(1.0 / 4.5)


def test_eff_per_cost_is_n_eff_over_n_cost_of_a_model_with_that_once_share():
    """eff_per_cost(r, phi, f): N_eff / N_cost of a model whose unique parameters are a share f run once, the
    rest looped (f + r^phi (1 - f)) / (f + r (1 - f)); checked against the sizes themselves at shares other
    than 1/2 (where f and 1 - f cannot be told apart)."""
    for r, phi, once in ((4, 0.46, 0.2), (8, 0.0, 0.3), (2, 0.7, 0.9)):
        s = equivalent_sizes(r, N_once=once * 1e8, N_rec=(1 - once) * 1e8, phi=phi)
        assert eff_per_cost(r, phi, once) == pytest.approx(s.N_eff / s.N_cost, rel=1e-12), (r, phi, once)


def test_an_iso_flop_curves_minimum_is_its_windows_parabola_vertex():
    """fit/isoflop.py, the one home of the measured minima: the vertex of the parabola in ln N through the lowest
    size and its neighbours; none at an edge or with too few sizes."""
    x = np.log([1e8, 2e8, 4e8, 8e8, 1.6e9])
    for x0 in (np.log(4e8), np.log(3e8)):
        v, window, why = window_vertex(x, 2.0 + 0.05 * (x - x0) ** 2, np.ones(5))
        assert why is None and np.exp(v) == pytest.approx(np.exp(x0), rel=1e-8) and window == slice(0, 5)
    assert window_vertex(x[:2], np.array([3.0, 2.9]), np.ones(2))[2] == "2 size(s), a parabola needs 3"
    assert "at an edge" in window_vertex(x, -x, np.ones(5))[2]


@pytest.mark.parametrize("r, recipe", [(1, "baseline"), (4, "baseline"), (4, "tbptt")])
def test_compute_optimal_uses_each_models_flops_per_token(r, recipe):
    from loopscale.model.accounting import flops_per_token, paper_model, param_counts

    params = {"E": 1.57, "A": 28.0, "alpha": 0.20, "B": 916.0, "beta": 0.37, "phi": 0.46}
    cfg = paper_model(16, r, recipe)
    counts = param_counts(cfg)
    n_cost = counts.N_once + r * counts.N_rec
    f = flops_per_token(cfg) / n_cost  # exact FLOPs per cost-counted parameter (head, attention, bptt)
    assert abs(f - 6) > 0.3  # not the 6 N estimate
    once = counts.N_once / counts.N
    C = 1e19
    opt = compute_optimal(params, C, r, once, flops_per_param=f)
    rho = eff_per_cost(r, params["phi"], once) if r != 1 else 1.0

    def loss(log_n):
        n = np.exp(log_n)
        return params["A"] * (rho * n) ** -params["alpha"] + params["B"] * (C / (f * n)) ** -params["beta"]

    num = minimize_scalar(loss, bounds=(np.log(1e6), np.log(1e12)), method="bounded", options={"xatol": 1e-10})
    assert opt.N_cost == pytest.approx(np.exp(num.x), rel=1e-4)
    assert opt.D == pytest.approx(C / (f * opt.N_cost))
    assert opt.N_cost != pytest.approx(compute_optimal(params, C, r, once).N_cost, rel=1e-2)
