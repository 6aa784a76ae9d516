"""`loopscale power` with a looped-entry pilot (issue 54; loopscale/fit/pilot.py, loopscale/fit/power.py): the sweeps
are drawn from m_1 = 1, m_r = kappa r^phi (r > 1) with the pilot's kappa, kappa drawn per sweep from the pilot's
uncertainty of it (its bootstrap interval), fitted with the same law (its per-recipe form for delta-phi) and read
by the verdict's interval; a pilot whose kappa has no interval, or whose law power cannot simulate, is refused."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from loopscale.errors import InputError
from loopscale.fit import synthetic as S
from loopscale.fit.pilot import params_draw, truth_from_fit
from loopscale.fit.power import make_problem, simulate_design
from loopscale.fit.result import FitResult
from loopscale.fit.verdict import Z_LEVEL
from support.designs import cpu_design

KAPPA, SE_LOG_KAPPA = 0.5, 0.25
ENTRY = {**S.TRUE_DENSE, "phi": S.PUBLISHED_PHI["baseline"], "kappa": KAPPA}


def _pilot(ci95: dict | None = None, sigma: float = 0.003) -> FitResult:
    """A looped-entry pilot fit's record: its law, a seed sigma, kappa's bootstrap 95% interval (by default the one
    whose ln is +-z se wide)."""
    ci = {"kappa": [KAPPA * math.exp(-Z_LEVEL * SE_LOG_KAPPA), KAPPA * math.exp(Z_LEVEL * SE_LOG_KAPPA)]}
    fit = FitResult("looped-entry", dict(ENTRY), 1e-3, 0.0, 1, 1, 1, {}, n_rows=48)
    fit.ci95, fit.noise = (ci if ci95 is None else ci95), {"sigma_log": sigma}
    return fit


def _design(seeds: int) -> pd.DataFrame:
    """The CPU-sized grid at r in {1, 2, 4, 8} (two r > 1 at least: phi is a slope across them), `seeds` times."""
    return cpu_design(seeds)


def test_a_looped_entry_pilot_is_simulated_with_its_law_and_fewer_seeds_give_a_larger_mde():
    truth = truth_from_fit(_pilot())
    assert truth.law == "looped-entry" and truth.params["kappa"] == KAPPA
    assert truth.params_se["kappa"] == pytest.approx(SE_LOG_KAPPA, rel=1e-9)
    single, joint = (make_problem(_design(1), truth, joint=j) for j in (False, True))
    assert (single.law.name, joint.law.name) == ("looped-entry", "looped-entry-joint")
    # the noise-free sweep is the pilot's law: m_r = kappa r^phi on looped rows, nothing at r = 1
    table = single.table
    r = table["r"].to_numpy(float)
    m = np.where(r > 1, KAPPA, 1.0) * r ** ENTRY["phi"]
    n_eff = table["N_once"].to_numpy(float) + m * table["N_rec"].to_numpy(float)
    L = ENTRY["E"] + ENTRY["A"] * n_eff ** -ENTRY["alpha"] + ENTRY["B"] * table["D"].to_numpy(float) ** -ENTRY["beta"]
    np.testing.assert_allclose(single.log_L, np.log(L), rtol=1e-12)
    one = simulate_design(_design(1), truth, n_sims=40, seed=0)
    four = simulate_design(_design(4), truth, n_sims=40, seed=0)
    for out in (one, four):
        assert out["phi"]["n_failed"] == 0 and out["delta_phi"]["n_failed"] == 0
        assert math.isfinite(out["delta_phi"]["mde"]) and math.isfinite(out["phi"]["width95"])
    assert one["delta_phi"]["mde"] > 1.4 * four["delta_phi"]["mde"]  # ~ sqrt(4) = 2 at seed noise alone
    assert one["phi"]["width95"] > 1.4 * four["phi"]["width95"]
    assert 0 < one["delta_phi"]["mde_mc_se"] < 0.3 * one["delta_phi"]["mde"]
    assert 0 < one["phi"]["width95_mc_se"] < 0.3 * one["phi"]["width95"]


def test_kappa_is_drawn_per_sweep_from_the_pilots_uncertainty():
    """ln kappa ~ N(ln kappa_hat, se^2) per sweep (se from the pilot's bootstrap interval), the other parameters
    the pilot's; the draw reaches the simulated sweeps: the same noise with kappa known exactly gives other fits."""
    truth = truth_from_fit(_pilot())
    rng = np.random.default_rng(0)
    draws = [params_draw(rng, truth) for _ in range(4000)]
    log_kappa = np.log([d["kappa"] for d in draws])
    assert np.mean(log_kappa) == pytest.approx(math.log(KAPPA), abs=4 * SE_LOG_KAPPA / math.sqrt(4000))
    assert np.std(log_kappa) == pytest.approx(SE_LOG_KAPPA, rel=0.05)
    assert all(d["phi"] == ENTRY["phi"] and d["E"] == ENTRY["E"] for d in draws)
    exact = truth_from_fit(_pilot({"kappa": [KAPPA, KAPPA]}))
    assert exact.params_se["kappa"] == 0.0 and params_draw(rng, exact)["kappa"] == pytest.approx(KAPPA, rel=1e-12)
    drawn = simulate_design(_design(1), truth, n_sims=8, seed=3, what=("phi",))["estimates"]["phi"]
    held = simulate_design(_design(1), exact, n_sims=8, seed=3, what=("phi",))["estimates"]["phi"]
    assert np.abs(drawn - held).max() > 1e-3


def test_a_looped_entry_pilot_without_kappas_interval_and_a_law_power_cannot_draw_are_refused():
    with pytest.raises(InputError, match="the pilot's kappa has no bootstrap interval.*--bootstrap N"):
        truth_from_fit(_pilot({}))
    for law, extra in (("looped-logr", {"psi": 0.3}), ("looped-nxd", {"gamma": 0.1})):
        fit = FitResult(law, {**ENTRY, **extra}, 1e-3, 0.0, 1, 1, 1, {}, n_rows=44, residual_rms_log=0.004)
        fit.params.pop("kappa")
        with pytest.raises(
            InputError, match=rf"power simulates the looped, looped-entry, looped-logn, looped-pass laws .*'{law}'"
        ):
            truth_from_fit(fit)
