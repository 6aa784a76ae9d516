"""What a run's loss curve is worth toward `power`'s MDE (issue 55 item 3, loopscale/fit/curve_worth.py): a curve
fit's residuals split into a run-level offset and an AR(1) along the curve, recorded in the fit; the final points
a curve is worth on a design; `power` with a curve-law pilot whose noise is all run-level (no gain) or mostly
between evaluations (a smaller MDE)."""

from __future__ import annotations

import numpy as np
import pytest

from loopscale.analysis.power_designs import PowerRequest, power_record
from loopscale.analysis.power_text import markdown
from loopscale.data.heldout import curve_steps
from loopscale.fit.curve_worth import CurveNoise, ar1_mean_factor, curve_noise, curve_worth
from loopscale.fit.curves.synthetic import looped_curves
from loopscale.fit.fit_table import fit_table
from loopscale.fit.laws.registry import make_law
from loopscale.fit.pilot import truth_from_fit
from loopscale.fit.runs_table import canonical_table
from loopscale.fit.synthetic import DEMO_BATCH_TOKENS, DEMO_DENSE, demo_grid

TRUTH = {**DEMO_DENSE, "phi": 0.75, "K": 0.3}
POINTS = 12  # evaluations a run's curve has (trainer.curve_points), in the pilot and the planned sweep
SIGMA = 0.004  # a run's whole noise in log L, the same in both pilots
NOISE = {"run-level": (SIGMA, 0.0, 0.0), "evaluation-level": (0.0005, SIGMA, 0.3)}  # (s_run, s_eval, AR rho)


def evaluated(n: int, warmup: int, cooldown: int) -> list[int]:
    return curve_steps(n, POINTS, (warmup, cooldown), cooldown)


def pilot_fit(s_run: float, s_eval: float, rho: float, seed: int = 3):
    table = looped_curves(
        demo_grid(), make_law("looped-curve"), TRUTH, DEMO_BATCH_TOKENS, evaluated, s_run, s_eval, rho, seed=seed
    )
    canon = canonical_table(table.rename(columns={"val_loss": "L"}), "looped-curve")
    return fit_table(canon, "looped-curve", noise="off", profile=False, n_refine=2)


@pytest.fixture(scope="module")
def pilots():
    return {name: pilot_fit(*noise) for name, noise in NOISE.items()}


@pytest.fixture(scope="module")
def design(tmp_path_factory):
    """The demo grid's 44 runs as a runs table (their steps: what their curves are evaluated along)."""
    grid = demo_grid()
    path = tmp_path_factory.mktemp("design") / "runs.csv"
    grid.assign(steps=np.maximum(10, np.round(grid["D"] / DEMO_BATCH_TOKENS)).astype(int)).to_csv(path, index=False)
    return path


def test_a_curve_fit_records_its_noise_split_into_a_run_offset_and_an_ar1_along_the_curve(pilots):
    run, along = (pilots[k].noise["curve"] for k in NOISE)
    assert run["sigma_run_log"] == pytest.approx(SIGMA, rel=0.25) and run["eval_share"] < 0.1
    assert along["sigma_eval_log"] == pytest.approx(SIGMA, rel=0.15) and along["eval_share"] > 0.85
    assert along["rho"] == pytest.approx(0.3, abs=0.15)  # corrected for centring short curves (r1 ~ 0.2 raw)
    assert along["n_runs"] == 44 and 8 < along["evaluations_per_run"] <= POINTS + 2
    truth = truth_from_fit(pilots["evaluation-level"])
    assert truth.curve is not None and truth.curve.noise.share == pytest.approx(along["eval_share"])
    assert truth.sigma_dof <= 44 and truth.parent_share == 1.0  # runs, not evaluations; no within-curve "share"


def test_a_curve_is_worth_one_final_point_under_run_level_noise_and_up_to_its_evaluations_otherwise():
    design = demo_grid().assign(steps=lambda t: np.maximum(10, np.round(t["D"] / DEMO_BATCH_TOKENS)).astype(int))
    worth = {
        share: curve_worth(design, TRUTH, "looped-curve", CurveNoise(*noise, 44, 12.0), evaluated)
        for share, noise in ((0.0, (SIGMA, 0.0, 0.0)), (1.0, (0.0, SIGMA, 0.0)), (0.8, (0.002, 0.004, 0.5)))
    }
    assert 0.6 < worth[0.0] < 1.05  # one draw: the l2 curve fit is no better than the final points (here worse)
    assert 3 < worth[1.0] <= POINTS + 2  # independent evaluations: at most the m evaluations of a curve
    # AR(1) and a run offset take it below the share's own bound 1 / ((1 - s) + s v(m, rho) / m)
    assert 1 < worth[0.8] < 1 / (0.2 + 0.8 * ar1_mean_factor(12, 0.5) / 12) < worth[1.0]


def test_power_gives_a_pilot_whose_curve_noise_is_all_run_level_no_gain(pilots, design):
    truth = truth_from_fit(pilots["run-level"])
    record = power_record(PowerRequest(table=str(design), no_menu=True, sims=30, curve_points=POINTS), truth)
    d = record["designs"][0]
    assert d["curves"]["worth"] < 1.05 and d["curves"]["worth_used"] == 1.0
    finals, curves = d["delta_phi"]["mde"], d["curves"]["delta_phi"]["mde"]
    assert curves == pytest.approx(finals, abs=2 * d["delta_phi"]["mde_mc_se"])
    assert "a run's curve worth (final points)" in markdown(record)


def test_power_gives_a_pilot_with_noise_between_evaluations_a_smaller_mde(pilots, design):
    truth = truth_from_fit(pilots["evaluation-level"])
    record = power_record(PowerRequest(table=str(design), no_menu=True, sims=30, curve_points=POINTS), truth)
    d = record["designs"][0]
    assert d["curves"]["worth"] > 3
    finals, curves = d["delta_phi"]["mde"], d["curves"]["delta_phi"]["mde"]
    assert curves < 0.75 * finals
    # the simulated MDE follows the worth (the noise variance / n_eff), within the Monte-Carlo error
    assert curves == pytest.approx(finals / np.sqrt(d["curves"]["worth"]), rel=0.3)
    assert d["curves"]["phi"]["width95"] < 0.75 * d["phi"]["width95"]
    # --finals: the sweep planned from its final points only
    plain = power_record(PowerRequest(table=str(design), no_menu=True, sims=30, curves=False), truth)
    assert "curves" not in plain["designs"][0] and plain["designs"][0]["delta_phi"]["mde"] == finals


def test_curve_noise_is_its_moment_formulas_written_out():
    """curve_noise on residuals drawn by hand, 7 runs of 5-9 evaluations in shuffled step order (plus a run of one,
    left out), against the module docstring's moments: rho from the centred lag-1 autocorrelation r1 as
    (r1 + 1 / m) / (1 - 3 / m); s_eval^2 = sum of squares about each run's mean / sum_i (m_i - v(m_i, rho));
    s_run^2 = sum of the runs' squared means / (G - p) - s_eval^2 mean_i(v_i / m_i), over G - p with p = 3 fitted
    parameters (not G)."""
    rng = np.random.default_rng(11)
    lengths, p = [5, 9, 6, 8, 7, 9, 6], 3
    runs, steps, res = [], [], []
    for g, m in enumerate(lengths):
        offset = 0.01 * rng.standard_normal()
        walk = np.zeros(m)  # an AR(1) along the curve, rho 0.7
        for j in range(m):
            walk[j] = 0.7 * walk[j - 1] * (j > 0) + 0.004 * rng.standard_normal()
        order = rng.permutation(m)  # the rows are not in step order: the function must sort them
        runs += [f"run{g}"] * m
        steps += list(100 * order)
        res += list(offset + walk[order])
    runs, steps, res = [*runs, "lone"], [*steps, 0], [*res, 0.5]  # one evaluation: no within-run information
    found = curve_noise(np.array(res), runs, steps, p)

    series = []  # each run's residuals in step order
    for g in range(len(lengths)):
        rows = [i for i, name in enumerate(runs) if name == f"run{g}"]
        series.append(np.array([res[i] for i in sorted(rows, key=lambda i: steps[i])]))
    centred = [s - s.mean() for s in series]
    a = np.concatenate([c[:-1] for c in centred])
    b = np.concatenate([c[1:] for c in centred])
    r1 = (a * b).sum() / np.sqrt((a * a).sum() * (b * b).sum())
    m = np.array(lengths, dtype=float)
    G, m_bar = len(lengths), m.mean()
    rho = float(np.clip((r1 + 1 / m_bar) / (1 - 3 / m_bar), 0.0, 0.95))
    v = np.array([1 + 2 * sum((1 - k / n) * rho**k for k in range(1, int(n))) for n in m])
    s_eval2 = sum((c**2).sum() for c in centred) / (m - v).sum()
    means = np.array([s.mean() for s in series])
    s_run2 = max(0.0, (means**2).sum() / (G - p) - s_eval2 * np.mean(v / m))
    assert 0 < rho < 0.95 and s_run2 > 0  # the case exercises both clips' insides
    assert found.n_runs == G and found.evaluations_per_run == pytest.approx(m_bar)
    assert found.rho == pytest.approx(rho, rel=1e-12)
    assert found.sigma_eval_log == pytest.approx(np.sqrt(s_eval2), rel=1e-12)
    assert found.sigma_run_log == pytest.approx(np.sqrt(s_run2), rel=1e-12)


def test_an_entry_curve_is_weighed_against_looped_entrys_own_final_points():
    """looped-entry-curve's final points follow looped-entry (m_r = kappa r^phi for r > 1, `final_law`), where phi is
    the slope across r = 2, 4, 8 alone: against them a curve under run-level noise is worth ~1 final point, as
    looped-curve's is. Weighed against r^phi's final points (phi read from r = 1 too) it would be worth 0.39."""
    design = demo_grid().assign(steps=lambda t: np.maximum(10, np.round(t["D"] / DEMO_BATCH_TOKENS)).astype(int))
    entry = {**TRUTH, "kappa": 0.5}
    run_level = curve_worth(design, entry, "looped-entry-curve", CurveNoise(SIGMA, 0.0, 0.0, 44, 12.0), evaluated)
    along = curve_worth(design, entry, "looped-entry-curve", CurveNoise(0.0, SIGMA, 0.0, 44, 12.0), evaluated)
    assert 0.6 < run_level < 1.05  # 0.90 (r^phi's finals: 0.39)
    assert 6 < along <= POINTS + 2  # 9.4 (r^phi's finals: 4.0)


def test_a_logn_curve_is_weighed_at_the_pilots_n_ref_against_looped_logns_final_points():
    """looped-logn-curve's final points follow looped-logn at the curve law's N_ref (kept in its parameters): the
    design's curves and final points are both read there, so a curve under run-level noise is worth ~1 final point
    (1.15: its curve also places psi and K) and under evaluation-level noise nearly its evaluations (12.5 of ~12), as
    the other curve laws'. Its N_ref moved 4x changes the worth (0.89 / 9.6: phi read at another size), so the law
    is not rebound to the design's own N_ref."""
    design = demo_grid().assign(steps=lambda t: np.maximum(10, np.round(t["D"] / DEMO_BATCH_TOKENS)).astype(int))
    logn = {**TRUTH, "phi": 0.6, "psi": -0.24, "N_ref": 1e5}
    run_level = curve_worth(design, logn, "looped-logn-curve", CurveNoise(SIGMA, 0.0, 0.0, 44, 12.0), evaluated)
    along = curve_worth(design, logn, "looped-logn-curve", CurveNoise(0.0, SIGMA, 0.0, 44, 12.0), evaluated)
    assert 0.8 < run_level < 1.5
    assert 6 < along <= POINTS + 2
    elsewhere = curve_worth(
        design, {**logn, "N_ref": 4e5}, "looped-logn-curve", CurveNoise(0.0, SIGMA, 0.0, 44, 12.0), evaluated
    )
    assert abs(elsewhere / along - 1) > 0.05
