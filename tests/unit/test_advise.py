"""`loopscale advise`'s optimiser against closed forms and ground truth (the package loopscale/analysis/advise/).

Closed forms, on the power-law family (N_unique = c d^2, a share f run once, F = 6 (N_once + r N_rec)):
- r = 1 is Chinchilla's problem: N* = G (C / 6)^(beta / (alpha + beta)), G = (alpha A / (beta B))^(1 / (alpha + beta)),
  D* = C / (6 N*) (Hoffmann et al. 2022, eq. 4);
- r > 1: N_eff = rho N_unique and F = 6 kappa N_unique (rho = f + r^phi (1 - f), kappa = f + r (1 - f)), so the
  optimum is `derived.optimal_size(params, C, rho, 6 kappa)`;
- a binding cap M: N_unique = M, D = C / (6 kappa M);
- the break-even cap where both caps bind: M^(alpha + beta) = A (1 - rho^-alpha) / (B (6 / C)^beta (kappa^beta - 1)).
Ground truth on the published family: the advised width per r is the best valid width found by evaluating the
law on every width with the exact accounting (`paper_model`-style configs through `param_counts` and
`flops_per_token`), and a fit of a synthetic sweep with a known law recovers the truth's advice.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest

from loopscale.analysis.advise.advice import advise
from loopscale.analysis.advise.family import named_family, power_law_family
from loopscale.analysis.advise.law_sets import fit_law_sets, looped_sets
from loopscale.analysis.advise.matching import mismatches, resolve_family
from loopscale.analysis.advise.optimum import Constraints, continuous_optimum, snapped_optimum, width_domain
from loopscale.fit.derived import optimal_size
from loopscale.fit.result import FitResult
from loopscale.model.accounting import flops_per_token, model_preset, param_counts

TRUTH = {"E": 1.57, "A": 28.0, "alpha": 0.20, "B": 916.0, "beta": 0.37, "phi": 0.46}  # synthetic.TRUE_PARAMS
F_ONCE = 0.2
R_ALL = (1, 2, 4, 8)


def make_fit(params, replicates=None, law="looped", shapes=None, data=None) -> FitResult:
    """A fit record with these parameters (and bootstrap replicates: name -> list)."""
    fit = FitResult(
        law=law, params=dict(params), objective=0.0, grad_norm=0.0, n_starts=1, n_refined=1, n_best_basin=1, settings={}
    )
    if replicates is not None:
        fit.bootstrap = {"params": {k: list(v) for k, v in replicates.items()}, "n_replicates": len(replicates["E"])}
    if shapes is not None or data is not None:
        fit.data = {"shapes": shapes or [], **(data or {})}
    return fit


def kappa_rho(r, phi=TRUTH["phi"]):
    return F_ONCE + r * (1 - F_ONCE), F_ONCE + r**phi * (1 - F_ONCE)


def optimum(params, family, r, cons):
    sets = looped_sets(params, [r])
    domain = width_domain(family, r, cons)
    return sets, domain, continuous_optimum(sets, family, r, cons, domain)


# ----------------------------------------------------------------------------------------------------
# closed forms


@pytest.mark.parametrize("C", [1e18, 1e20, 1e23])
def test_r1_optimum_is_chinchillas_closed_form(C):
    family = power_law_family([1], F_ONCE)
    _, _, d = optimum(TRUTH, family, 1, Constraints(C))
    a, b = TRUTH["alpha"], TRUTH["beta"]
    N_star = (a * TRUTH["A"] / (b * TRUTH["B"])) ** (1 / (a + b)) * (C / 6) ** (b / (a + b))
    assert family.value("N_unique", 1, d)[0] == pytest.approx(N_star, rel=1e-10)
    D = C / family.value("F", 1, d)[0]
    assert D == pytest.approx(C / (6 * N_star), rel=1e-10)


@pytest.mark.parametrize("r", [2, 4, 8])
def test_looped_optimum_matches_the_derived_closed_form(r):
    C = 3e20
    family = power_law_family([r], F_ONCE)
    _, _, d = optimum(TRUTH, family, r, Constraints(C))
    kappa, rho = kappa_rho(r)
    expected = optimal_size(TRUTH, C, rho, 6 * kappa)  # N_eff = rho N_unique, F = 6 kappa N_unique
    assert family.value("N_unique", r, d)[0] == pytest.approx(expected, rel=1e-10)


def test_binding_memory_cap_gives_the_capped_closed_form():
    C, r = 1e21, 4
    family = power_law_family([r], F_ONCE)
    kappa, rho = kappa_rho(r)
    free = optimal_size(TRUTH, C, rho, 6 * kappa)
    M = free / 7  # well below the free optimum: the cap binds
    fit = make_fit(TRUTH)
    advice = advise(fit, compute_flops=C, max_unique_params=M, family=family, r_values=[r])
    rec = advice.record["per_r"][0]
    assert rec["binding"] == "max_unique_params"
    assert rec["continuous"]["N_unique"] == pytest.approx(M, rel=1e-10)
    D = C / (6 * kappa * M)
    L = TRUTH["E"] + TRUTH["A"] * (rho * M) ** -TRUTH["alpha"] + TRUTH["B"] * D ** -TRUTH["beta"]
    assert rec["continuous"]["L"] == pytest.approx(L, rel=1e-12)
    assert rec["advised"]["N_unique"] <= M  # the snapped width stays under the cap


def test_break_even_cap_is_the_closed_form_where_both_caps_bind():
    C, r = 1e20, 4
    a, b = TRUTH["alpha"], TRUTH["beta"]
    kappa, rho = kappa_rho(r)
    M_be = (TRUTH["A"] * (1 - rho**-a) / (TRUTH["B"] * (6 / C) ** b * (kappa**b - 1))) ** (1 / (a + b))
    assert M_be < optimal_size(TRUTH, C, rho, 6 * kappa) and M_be < optimal_size(TRUTH, C, 1.0, 6.0)  # both bind
    advice = advise(make_fit(TRUTH), compute_flops=C, family=power_law_family([1, r], F_ONCE), r_values=[1, r])
    assert advice.record["break_even"]["overall"]["M"] == pytest.approx(M_be, rel=1e-9)
    below = advise(
        make_fit(TRUTH), compute_flops=C, max_unique_params=0.8 * M_be, family=power_law_family([1, r]), r_values=[1, r]
    )
    above = advise(
        make_fit(TRUTH),
        compute_flops=C,
        max_unique_params=1.25 * M_be,
        family=power_law_family([1, r]),
        r_values=[1, r],
    )
    assert below.record["best"]["r"] == r and above.record["best"]["r"] == 1


def test_inference_cap_and_lifetime_cost_against_a_brute_force_search():
    from scipy.optimize import minimize_scalar

    C, r, T_inf = 1e21, 2, 3e11
    family = power_law_family([r], F_ONCE)
    kappa, rho = kappa_rho(r)

    def lifetime_loss(log_n):  # eq. 2': D = (C - 2 kappa N T_inf) / (6 kappa N), written out independently
        n = np.exp(log_n)
        D = (C - 2 * kappa * n * T_inf) / (6 * kappa * n)
        return TRUTH["E"] + TRUTH["A"] * (rho * n) ** -TRUTH["alpha"] + TRUTH["B"] * D ** -TRUTH["beta"]

    best = minimize_scalar(
        lifetime_loss,
        bounds=(np.log(1e6), np.log(C / (2 * kappa * T_inf)) - 1e-9),
        method="bounded",
        options={"xatol": 1e-12},
    )
    _, _, d = optimum(TRUTH, family, r, Constraints(C, inference_tokens=T_inf))
    assert family.value("N_unique", r, d)[0] == pytest.approx(np.exp(best.x), rel=1e-6)
    cap_flops = (
        0.5 * family.value("F_infer", r, optimum(TRUTH, family, r, Constraints(C))[2])[0]
    )  # half the free optimum's
    _, domain, d = optimum(TRUTH, family, r, Constraints(C, max_inference_flops=cap_flops))
    assert domain.binding == "max_inference_flops"
    assert family.value("F_infer", r, d)[0] == pytest.approx(cap_flops, rel=1e-10)


# ----------------------------------------------------------------------------------------------------
# the published family: exact accounting, snapped widths


@functools.lru_cache
def paper_model_at(r, recipe="baseline"):
    return model_preset("paper", "fineweb_edu_packed", r=r, recipe=recipe)


def paper_counts(d, r, recipe="baseline"):
    cfg = dataclasses.replace(paper_model_at(r, recipe), d_model=int(d))
    counts = param_counts(cfg)
    return counts.N_once, counts.N_rec, flops_per_token(cfg)


@pytest.mark.parametrize("recipe", ["baseline", "tbptt", "hyper"])
def test_family_polynomials_equal_the_accounting_at_every_width(recipe):
    r_values = (1, 2, 4, 8) if recipe != "hyper" else (2, 4, 8)
    family = named_family("paper", r_values, recipe)
    for r in r_values:
        for d in (128, 640, 1152, 2176, 4096):
            n_once, n_rec, F = paper_counts(d, r, recipe)
            assert (family.value("N_once", r, d), family.value("N_rec", r, d)) == (n_once, n_rec)
            assert family.value("F", r, d) == pytest.approx(F, rel=1e-13)
            full = flops_per_token(dataclasses.replace(paper_model_at(r), d_model=d))  # full backprop
            if recipe == "tbptt" and r > 1:
                assert family.value("F", r, d) < full  # truncated passes cost 2x, not 6x
            assert family.value("F_infer", r, d) == pytest.approx((full if recipe == "tbptt" else F) / 3, rel=1e-13)


@pytest.mark.parametrize("C", [1e19, 1e20, 1e21])
def test_paper_advice_is_the_best_valid_width_of_an_exhaustive_search(C):
    family = named_family("paper", R_ALL)
    advice = advise(make_fit(TRUTH), compute_flops=C, family=family, r_values=R_ALL)
    widths = np.arange(128, 16384 + 1, 128)
    for rec in advice.record["per_r"]:
        r = rec["r"]
        counts = np.array([paper_counts(d, r) for d in widths])
        n_eff = counts[:, 0] + r ** TRUTH["phi"] * counts[:, 1]
        L = TRUTH["E"] + TRUTH["A"] * n_eff ** -TRUTH["alpha"] + TRUTH["B"] * (C / counts[:, 2]) ** -TRUTH["beta"]
        assert rec["advised"]["d_model"] == widths[np.argmin(L)]
        assert rec["advised"]["L"] == pytest.approx(L.min(), rel=1e-12)
        assert rec["continuous"]["L"] <= L.min()  # the continuous optimum is at least as good as any valid width
        assert abs(rec["continuous"]["d_model"] - rec["advised"]["d_model"]) < 128  # grid resolution


def test_snapping_respects_a_cap_between_valid_widths():
    family = named_family("paper", [4])
    cap = float(family.value("N_unique", 4, 1000.0))  # between widths 896 and 1024
    cons = Constraints(1e21, max_unique_params=cap)
    sets, domain, d = optimum(TRUTH, family, 4, cons)
    snapped, _ = snapped_optimum(sets, family, 4, cons, domain, d)
    assert d[0] == pytest.approx(1000.0, rel=1e-9) and snapped[0] == 896


# ----------------------------------------------------------------------------------------------------
# families and fits


def test_families_recognise_the_models_a_fit_was_made_for():
    demo = named_family("demo", R_ALL)
    paper = named_family("paper", R_ALL)
    demo_shapes = [
        [r, float(demo.value("N_once", r, d)), float(demo.value("N_rec", r, d))] for r in R_ALL for d in (16, 24, 48)
    ]
    paper_shapes = [[r, *paper_counts(d, r)[:2]] for r in R_ALL for d in (384, 1280)]
    assert mismatches(demo, demo_shapes) == [] and mismatches(paper, paper_shapes) == []
    assert mismatches(paper, demo_shapes) and mismatches(demo, paper_shapes)
    assert resolve_family(demo_shapes, R_ALL)[0].name == "demo"
    assert resolve_family(paper_shapes, R_ALL)[0].name == "paper"
    with pytest.raises(ValueError, match="--family paper does not match the fit"):
        resolve_family(demo_shapes, R_ALL, "paper")
    with pytest.raises(ValueError, match="cannot loop r = 3"):
        named_family("paper", [3])


def test_free_and_joint_laws_give_the_looped_advice_at_equal_multipliers():
    family = named_family("paper", R_ALL)
    cons = dict(compute_flops=1e20, max_unique_params=2e8, family=family, r_values=R_ALL)
    looped = advise(make_fit(TRUTH), **cons).record
    base = {k: TRUTH[k] for k in ("E", "A", "alpha", "B", "beta")}
    free = {**base, **{f"k_{r}": r ** TRUTH["phi"] for r in (2, 4, 8)}}
    joint = {**base, "phi[baseline]": 0.9, "phi[tbptt]": TRUTH["phi"]}
    for other in (
        advise(make_fit(free, law="looped-free"), **cons).record,
        advise(make_fit(joint, law="looped-joint"), **cons, recipe="tbptt").record,
    ):
        assert [x["advised"]["L"] for x in other["per_r"]] == pytest.approx(
            [x["advised"]["L"] for x in looped["per_r"]], rel=1e-12
        )


def test_a_chinchilla_fit_advises_r1_only():
    base = {k: TRUTH[k] for k in ("E", "A", "alpha", "B", "beta")}
    fit = make_fit(base, law="chinchilla")
    record = advise(fit, compute_flops=1e20, family=named_family("paper", [1]), r_values=[1]).record
    assert record["best"]["r"] == 1
    with pytest.raises(ValueError, match="only r = 1 can be advised"):
        fit_law_sets(fit, [1, 4])


def test_without_replicates_the_advice_is_point_estimates_only():
    record = advise(make_fit(TRUTH), compute_flops=1e20, family=named_family("paper", R_ALL), r_values=R_ALL).record
    assert record["best"]["share"] is None and "no statement about the noise" in record["best"]["verdict"]
    assert all(rec["advised"]["L_interval"] is None and "replicates" not in rec for rec in record["per_r"])
    assert any("point estimates only" in w for w in record["warnings"])


def _two_camps(phi_point: float, camps: tuple[float, float], n: int = 40) -> FitResult:
    """A fit at phi_point whose replicates sit half at one phi, half at another (the rest at the truth)."""
    reps = {k: [v] * n for k, v in TRUTH.items()}
    reps["phi"] = [camps[0]] * (n // 2) + [camps[1]] * (n - n // 2)
    return make_fit({**TRUTH, "phi": phi_point}, reps)


def test_a_close_call_is_within_the_noise_and_says_so():
    """Under a 1e8 cap at 1e20 FLOPs, looping once more loses at phi = 0 and wins at phi = 1: replicates split
    between the two make r = 1 and r = 2 each best in half of them, so the advice names both."""
    cons = dict(compute_flops=1e20, max_unique_params=1e8, family=named_family("paper", (1, 2)), r_values=(1, 2))
    record = advise(_two_camps(1.0, (0.0, 1.0)), **cons).record
    best = record["best"]
    assert best["r"] == 2 and best["within_noise"] == [1] and best["n_replicates"] == 40
    assert best["share"] == {"1": 0.5, "2": 0.5}
    assert best["verdict"] == "within the noise: r = 2 (best in 50% of 40 replicates) and r = 1 (50%)"
    lo, hi = next(rec for rec in record["per_r"] if rec["r"] == 1)["replicates"]["L_minus_best"]
    assert lo < 0 < hi  # r = 1 is better than r = 2 in some replicates, worse in others
    # the same fit with every replicate at phi = 1: r = 2 wins each, r = 1 is worse beyond the noise
    clear = advise(_two_camps(1.0, (1.0, 1.0)), **cons).record["best"]
    assert clear["within_noise"] == []
    assert clear["verdict"] == "r = 2: best in 100% of 40 replicates; every other r is worse beyond the noise (95%)"


def test_a_winner_needs_every_other_r_worse_in_more_than_97_5_percent_of_the_replicates():
    """docs/design.md: a winner is named only when every other r's optimal loss is higher in more than 97.5% of
    the replicates (paired). Of 80 replicates, r = 1 is best in those at phi = 0: in 3 (3.75%, so r = 1 is worse
    in only 96.25%) the advice is within the noise; in 1 (1.25%) r = 2 wins beyond the noise (blind round 3)."""
    cons = dict(compute_flops=1e20, max_unique_params=1e8, family=named_family("paper", (1, 2)), r_values=(1, 2))

    def best_with(n_at_phi_0: int) -> dict:
        reps = {k: [v] * 80 for k, v in TRUTH.items()}
        reps["phi"] = [0.0] * n_at_phi_0 + [1.0] * (80 - n_at_phi_0)
        return advise(make_fit({**TRUTH, "phi": 1.0}, reps), **cons).record["best"]

    close = best_with(3)
    assert close["r"] == 2 and close["share"] == {"1": 3 / 80, "2": 77 / 80}
    assert close["within_noise"] == [1] and close["verdict"].startswith("within the noise: r = 2 (best in 96%")
    clear = best_with(1)
    assert clear["r"] == 2 and clear["share"] == {"1": 1 / 80, "2": 79 / 80} and clear["within_noise"] == []
    assert "every other r is worse beyond the noise (95%)" in clear["verdict"]


def test_impossible_constraints_name_every_r():
    family = named_family("paper", R_ALL)
    with pytest.raises(ValueError, match="no r meets the constraints.*r = 1.*r = 8"):
        advise(make_fit(TRUTH), compute_flops=1e20, max_unique_params=1e5, family=family, r_values=R_ALL)
    # one head wide (d = 128), r = 1 has 20 unique layers, r = 8 has 2 + 2 + 2 and the injection
    smallest = {r: float(family.value("N_unique", r, 128)) for r in R_ALL}
    assert smallest[8] < 2e6 < smallest[1]
    part = advise(make_fit(TRUTH), compute_flops=1e20, max_unique_params=2e6, family=family, r_values=R_ALL).record
    by_r = {rec["r"]: rec for rec in part["per_r"]}
    assert by_r[8]["feasible"] and by_r[8]["advised"]["N_unique"] <= 2e6 and part["best"]["r"] > 1
    assert not by_r[1]["feasible"] and f"(d = 128) has {smallest[1]:.4g} unique parameters" in by_r[1]["reason"]
    assert part["break_even"] is None or part["break_even"]["overall"]  # r = 1 still has an uncapped optimum


def test_the_fit_records_its_model_shapes_and_ranges(published_fit):
    data = published_fit.data
    assert {int(s[0]) for s in data["shapes"]} == set(R_ALL)
    assert data["C"][1] == pytest.approx(2.15e19, rel=0.01) and data["N"][0] < data["N"][1]
    family, notes = resolve_family(data["shapes"], R_ALL)
    assert family.name == "paper" and "reproduces every fitted model" in notes[0]


def test_data_summary_of_a_dense_table_is_one_r1_shape_per_size():
    import pandas as pd

    from loopscale.fit.result import data_summary

    table = pd.DataFrame({"N": [1e8, 1e8, 4e8], "D": [2e9, 4e9, 8e9], "C": [1.2e18, 2.4e18, 1.9e19]})
    summary = data_summary(table)
    assert summary["shapes"] == [[1.0, 1e8, 0.0], [1.0, 4e8, 0.0]]
    assert summary["N"] == [1e8, 4e8] and summary["D"] == [2e9, 8e9] and summary["C"] == [1.2e18, 1.9e19]


# ----------------------------------------------------------------------------------------------------
# a fitted synthetic sweep with a known law (ground truth)


@pytest.fixture(scope="module")
def published_fit():
    """`fit_table` on the published baseline grid (116 runs, 0.5% noise) drawn from TRUTH, 100 replicates."""
    from loopscale.fit.fit_table import fit_table
    from loopscale.fit.runs_table import canonical_table
    from loopscale.fit.synthetic import recipe_sweep

    table = recipe_sweep(phi={"baseline": TRUTH["phi"]}, seed=3)
    return fit_table(canonical_table(table, "looped"), law="looped", seed=0, n_bootstrap=100, profile=False)


def test_published_fit_at_1e20_advises_r1_and_a_tight_cap_advises_looping(published_fit):
    free = advise(published_fit, compute_flops=1e20).record
    assert free["best"]["r"] == 1 and free["best"]["share"]["1"] >= 0.95 and not free["best"]["within_noise"]
    assert any("extrapolates" in w for w in free["warnings"])  # 1e20 is beyond the largest fitted budget
    N_star = free["per_r"][0]["advised"]["N_unique"]
    capped = advise(published_fit, compute_flops=1e20, max_unique_params=N_star / 20).record
    assert capped["best"]["r"] > 1 and capped["best"]["share"]["1"] == 0


def test_the_truths_advice_lies_inside_the_fits_intervals(published_fit):
    C = 1e19  # inside the fitted budgets
    family = named_family("paper", R_ALL)
    truth = advise(make_fit(TRUTH), compute_flops=C, family=family, r_values=R_ALL).record
    fitted = advise(published_fit, compute_flops=C, family=family, r_values=R_ALL).record
    for true, est in zip(truth["per_r"], fitted["per_r"]):
        lo, hi = est["replicates"]["N_unique"]
        assert lo <= true["advised"]["N_unique"] <= hi
        lo, hi = est["replicates"]["L_opt"]
        assert lo <= true["advised"]["L"] <= hi
    lo, hi = fitted["break_even"]["overall"]["interval"]
    assert lo <= truth["break_even"]["overall"]["M"] <= hi
