"""The looped law whose exponent runs with the size (fit/laws/looped_logn.py):
m = r^(phi + psi ln(N_c / N_ref)), N_c = N_once + r N_rec.

Tables drawn from the law itself on the published grid's baseline rows (r in {1, 2, 4, 8}, widths 384-2176): its
parameters come back, psi = 0 data give the looped law's phi, a table of one size is refused, a law with no
reference size says where it comes from, a fit record rebuilds the law it was fitted with, and `validate` puts it
among the rival forms, where it wins on data whose exponent runs with the size and not on r^phi's own."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from loopscale.errors import InputError
from loopscale.fit import synthetic as S
from loopscale.fit.fit_table import fit_table
from loopscale.fit.laws.looped_logn import LoopedLogN, reference_size
from loopscale.fit.laws.registry import law_class, law_data_from_table
from loopscale.fit.result import load_fit
from loopscale.fit.runs_table import canonical_table
from loopscale.fit.validation.run import validate
from loopscale.plots.curves import collapse_coordinates

DENSE = {"E": 1.6, "A": 30.0, "alpha": 0.21, "B": 900.0, "beta": 0.36}
N_REF = 1.2e8  # inside the published grid's N_c (0.2e8-1e9)


@pytest.fixture(scope="module")
def grid() -> pd.DataFrame:
    sweep = S.recipe_sweep(seed=0, noise=0.0)
    return sweep[sweep["recipe"] == "baseline"].reset_index(drop=True)


def drawn(grid: pd.DataFrame, phi: float, psi: float, noise: float, seed: int = 0) -> pd.DataFrame:
    """The grid with L from the law at (phi, psi) and N_REF, times exp(noise z)."""
    table = grid.copy()
    z = np.random.default_rng(seed).standard_normal(len(table))
    params = {**DENSE, "phi": phi, "psi": psi, "N_ref": N_REF}
    table["L"] = LoopedLogN.predict_table(params, table) * np.exp(noise * z)
    return table


def test_each_row_is_worth_r_to_the_exponent_of_its_own_size(grid):
    """N_eff = N_once + r^(phi + psi ln((N_once + r N_rec) / N_ref)) N_rec and L from it, written out row by row."""
    params = {**DENSE, "phi": 0.5, "psi": -0.2, "N_ref": N_REF}
    law = LoopedLogN.from_params(params)
    N_c = grid["N_once"] + grid["r"] * grid["N_rec"]
    n_eff = grid["N_once"] + grid["r"] ** (0.5 - 0.2 * np.log(N_c / N_REF)) * grid["N_rec"]
    np.testing.assert_allclose(law.effective_size(params, grid), n_eff, rtol=1e-12)
    L = DENSE["E"] + DENSE["A"] * n_eff ** -DENSE["alpha"] + DENSE["B"] * grid["D"] ** -DENSE["beta"]
    np.testing.assert_allclose(LoopedLogN.predict_table(params, grid), L, rtol=1e-12)
    with pytest.raises(InputError, match="no multiplier of r alone"):  # advice prices r by m_r: it refuses
        law.multiplier(params, 8.0)
    assert len(set(np.round(law.effective_size(params, grid) / grid["N_rec"], 6))) > 4  # m differs by size


def test_the_reference_is_the_tables_geometric_size_to_two_figures(grid):
    data = law_data_from_table(grid, "looped")
    N_c = grid["N_once"] + grid["r"] * grid["N_rec"]
    centre = float(np.exp(np.log(N_c).mean()))
    assert reference_size(data) == pytest.approx(centre, rel=0.05)
    assert reference_size(data) == float(f"{reference_size(data):.2g}")
    assert LoopedLogN.for_data(data).N_ref == reference_size(data)


def test_noise_free_tables_give_their_phi_and_psi_back_at_the_tables_reference(grid):
    """The fit reads phi at the table's own N_ref: the truth there is phi + psi ln(N_ref_table / N_REF)."""
    for phi, psi in ((0.45, -0.25), (0.6, 0.15)):
        table = drawn(grid, phi, psi, noise=0.0)
        with np.errstate(all="ignore"):
            fit = fit_table(table, "looped-logn", profile=False)
        ref = fit.params["N_ref"]
        assert ref == reference_size(law_data_from_table(table, "looped"))
        assert fit.params["phi"] == pytest.approx(phi + psi * np.log(ref / N_REF), abs=1e-4)
        assert fit.params["psi"] == pytest.approx(psi, abs=1e-4)
        assert fit.params["alpha"] == pytest.approx(DENSE["alpha"], abs=1e-4)


def test_data_of_the_plain_looped_law_give_psi_near_zero_and_the_looped_phi(grid):
    table = drawn(grid, 0.5, 0.0, noise=0.002, seed=3)
    with np.errstate(all="ignore"):
        logn = fit_table(table, "looped-logn", profile=False)
        looped = fit_table(table, "looped", profile=False)
    assert abs(logn.params["psi"]) < 0.05
    assert logn.params["phi"] == pytest.approx(looped.params["phi"], abs=0.03)


def test_the_record_rebuilds_the_law_at_its_reference(grid, tmp_path):
    """A fit record holds N_ref (not fitted, no interval), so predictions from it use the size it was fitted at."""
    table = drawn(grid, 0.5, -0.2, noise=0.0)
    with np.errstate(all="ignore"):
        fit = fit_table(table, "looped-logn", profile=False)
    path = tmp_path / "fit.json"
    fit.write_json(path)
    params = load_fit(path).params
    np.testing.assert_allclose(LoopedLogN.predict_table(params, table), table["L"], rtol=1e-6)
    assert "N_ref" not in LoopedLogN.from_params(params).user_names


def test_a_table_of_one_size_and_a_law_without_a_reference_are_refused(grid):
    one = drawn(grid, 0.5, 0.1, noise=0.0)
    with pytest.raises(InputError, match="at least 1.5x apart"):  # one width: its r differ in N_c by little
        LoopedLogN.check_table(one[one["width"] == one["width"].iloc[0]])
    with pytest.raises(InputError, match="reference size"):
        law_class("looped-logn").bind(r=one["r"]).bounds()


def aicc_of(record: dict, law: str) -> float:
    form = next(i for i, f in enumerate(record["forms"]) if f["law"] == law)
    return next(res for res in record["results"] if res["form"] == form and res["fold"] == 0)["information"]["aicc"]


def test_validate_ranks_it_among_the_rivals_by_what_the_data_do_and_flags_its_win(grid):
    """On data whose exponent runs with the size (psi = -0.25, the CPU demo's) the form beats r^phi by far (AICc
    below -4) and validate flags it with its psi; on r^phi's own data it does not (one parameter more for nothing)."""
    gaps, flags = {}, {}
    for psi in (-0.25, 0.0):
        table = canonical_table(drawn(grid, 0.5, psi, noise=0.002, seed=7), "looped")
        with np.errstate(all="ignore"):
            record = validate(table, fit_table(table, "looped", profile=False), conventions=False, jobs=1)
        gaps[psi] = aicc_of(record, "looped-logn") - aicc_of(record, "looped")
        flags[psi] = [f for f in record["verdict"]["flags"] if "phi runs with the size" in f]
    assert gaps[-0.25] < -4.0
    assert gaps[0.0] > -4.0
    assert len(flags[-0.25]) == 1 and flags[0.0] == []
    assert f"AICc {gaps[-0.25]:+.1f} against the fit's law" in flags[-0.25][0]
    psi_shown = float(flags[-0.25][0].split("psi = ")[1].split(",")[0])
    assert psi_shown == pytest.approx(-0.25, abs=0.05)


def test_the_collapse_reference_panels_are_pure_powers_of_r(grid):
    """The collapse figure's phi = 0 and phi = 1 panels mean m = 1 and m = r: on a looped-logn fit its psi is set
    to 0 there (else phi = 1 would still bend with the size); at the fit's phi its psi stays."""
    table = drawn(grid, 0.5, -0.25, noise=0.0)
    with np.errstate(all="ignore"):
        fit = fit_table(table, "looped-logn", profile=False)
    x1, _ = collapse_coordinates(table, fit, 1.0)
    x0, _ = collapse_coordinates(table, fit, 0.0)
    np.testing.assert_allclose(x1, table["N_once"] + table["r"] * table["N_rec"], rtol=1e-9)
    np.testing.assert_allclose(x0, table["N_once"] + table["N_rec"], rtol=1e-9)
    x_fit, _ = collapse_coordinates(table, fit, fit.params["phi"])
    np.testing.assert_allclose(x_fit, LoopedLogN.from_params(fit.params).effective_size(fit.params, table), rtol=1e-9)


def test_every_law_that_departs_from_r_phi_is_r_phi_at_its_looped_at(grid):
    """A rival whose win `validate` reads as a departure states where it is the looped law (`Law.looped_at`, what the
    collapse's phi = 0 / 1 panels set): there its prediction is r^phi's on every row, and one step off it is not."""
    from loopscale.fit.laws.looped import Looped
    from loopscale.fit.laws.registry import law_names

    departing = [law_class(n) for n in law_names() if law_class(n).departure and not law_class(n).reads_curves]
    assert {cls.name for cls in departing} >= {"looped-entry", "looped-logr", "looped-logn"}
    base = {**DENSE, "phi": 0.46}
    looped = Looped.predict_table(base, grid)
    for cls in departing:
        assert cls.looped_at, f"{cls.name} departs from r^phi but does not say where it is r^phi"
        params = {**base, **cls.looped_at, "N_ref": N_REF}
        np.testing.assert_allclose(cls.predict_table(params, grid), looped, rtol=1e-12, err_msg=cls.name)
        moved = {**params, **{k: v + 0.2 for k, v in cls.looped_at.items()}}
        assert np.max(np.abs(cls.predict_table(moved, grid) / looped - 1)) > 1e-3, cls.name
