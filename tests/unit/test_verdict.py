"""loopscale/fit/verdict.py on hand-built fit records and tables: every check seen passing AND failing, with
the reason the verdict gives, so that a check that always says ok (or never says it) fails here (issue 35).
The end-to-end path (`loopscale fit` writing the block, `compare` printing it) is
tests/integration/test_fit_verdict.py."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from loopscale.fit.result import FitResult
from loopscale.fit.verdict import (
    HOLDOUT_MRE_MAX,
    PHI_CI_WIDTH_MAX,
    fit_checks,
    joint_checks,
    verdict_of,
)

WIDTHS = (16, 24, 32)
BUDGETS = (1e10, 2e10)
PARAMS = {"E": 1.8, "A": 400.0, "alpha": 0.3, "B": 2000.0, "beta": 0.3, "phi": 0.5}


def _curve(width: int, best: int) -> float:
    """An iso-FLOP curve with its minimum at `best`."""
    return 3.0 + 0.001 * (width - best) ** 2


def _table(r_values=(1, 2), best: dict | None = None, recipe: str | None = None) -> pd.DataFrame:
    """Runs at every (r, budget, width); each (r, budget) curve has its minimum at width 24 unless `best`
    maps (r, budget) to another width."""
    best = best or {}
    rows = [
        {"r": r, "C": C, "C_budget": C, "width": w, "L": _curve(w, best.get((r, C), 24))}
        for r in r_values
        for C in BUDGETS
        for w in WIDTHS
    ]
    table = pd.DataFrame(rows)
    if recipe is not None:
        table["recipe"] = recipe
    return table


def _fit(params=None, ci=(0.4, 0.6), cluster=None, profile=None, holdout=None, law="looped") -> FitResult:
    """A fit record as `fit_table` writes one, with only what the checks read."""
    params = dict(PARAMS if params is None else params)
    return FitResult(
        law=law,
        params=params,
        objective=0.0,
        grad_norm=0.0,
        n_starts=16,
        n_refined=16,
        n_best_basin=16,
        settings={},
        ci95={"phi": list(ci)} if ci is not None else {},
        bootstrap={"n_replicates": 30, "cluster": cluster} if ci is not None else None,
        profile_phi=profile,
        holdout=None if holdout is None else {"mean_abs_rel_error": holdout},
    )


def _by_name(cond: dict) -> dict[str, dict]:
    return {c["name"]: c for c in cond["checks"]}


def _failed(cond: dict) -> set[str]:
    return {c["name"] for c in cond["checks"] if not c["ok"]}


# -- one fit ---------------------------------------------------------------------------------------------


def test_a_well_conditioned_fit_is_phi_measured_with_every_check_ok():
    cond = fit_checks(_table(), _fit(holdout=0.004))
    assert [c["name"] for c in cond["checks"]] == [
        "E off its bounds",
        "phi off its bounds",
        "phi interval width",
        "iso-FLOP minima inside the grid",
        "held-out largest budget error",
    ]
    assert all(c["ok"] for c in cond["checks"])
    assert cond["verdict"] == "phi measured" and cond["measured"] is True
    checks = _by_name(cond)
    assert checks["phi interval width"]["value"] == pytest.approx(0.2)
    assert checks["iso-FLOP minima inside the grid"]["value"] == "4 of 4 curves"  # r = 1, 2 at two budgets
    assert checks["E off its bounds"]["value"] == 1.8


@pytest.mark.parametrize(
    ("E", "side"),
    [(math.exp(-10.0), "lower"), (math.exp(5.0), "upper"), (math.exp(-10.0 + 5e-7), "lower")],
)
def test_E_on_either_bound_is_not_measured(E, side):
    cond = fit_checks(_table(), _fit(params={**PARAMS, "E": E}))
    assert _failed(cond) == {"E off its bounds"}
    assert cond["verdict"] == f"not measured: E = {E:.4g} on its {side} bound" and not cond["measured"]


def test_E_just_inside_its_bounds_is_off_them():
    cond = fit_checks(_table(), _fit(params={**PARAMS, "E": math.exp(-10.0 + 1e-4)}))
    assert _by_name(cond)["E off its bounds"]["ok"] and cond["measured"]


@pytest.mark.parametrize(("phi", "side"), [(-1.0, "lower"), (3.0, "upper")])
def test_phi_on_either_bound_is_not_measured(phi, side):
    cond = fit_checks(_table(), _fit(params={**PARAMS, "phi": phi}))
    assert _failed(cond) == {"phi off its bounds"}
    assert cond["verdict"] == f"not measured: phi = {phi:.4g} on its {side} bound"


def test_phi_interval_wider_than_the_limit_is_not_measured_and_at_the_limit_is():
    wide = fit_checks(_table(), _fit(ci=(0.3, 0.3 + PHI_CI_WIDTH_MAX + 0.01)))
    assert _failed(wide) == {"phi interval width"}
    assert wide["verdict"] == "not measured: phi's 95% bootstrap interval is 0.36 wide (> 0.35)"
    assert _by_name(wide)["phi interval width"]["value"] == pytest.approx(0.36)
    at_limit = fit_checks(_table(), _fit(ci=(0.0, PHI_CI_WIDTH_MAX)))
    assert at_limit["measured"] and _by_name(at_limit)["phi interval width"]["value"] == PHI_CI_WIDTH_MAX


def test_no_interval_or_an_open_one_is_not_measured():
    none = fit_checks(_table(), _fit(ci=None))
    assert _by_name(none)["phi interval width"] == {
        "name": "phi interval width",
        "target": "<= 0.35 wide",
        "value": "not computed",
        "ok": False,
    }
    assert none["verdict"] == "not measured: no interval for phi (--bootstrap N)"
    open_profile = fit_checks(_table(), _fit(ci=None, profile={"interval": [None, 0.7]}))
    assert open_profile["verdict"] == "not measured: phi's profile interval is open on one side"


def test_without_a_bootstrap_the_profile_interval_is_judged():
    narrow = fit_checks(_table(), _fit(ci=None, profile={"interval": [0.4, 0.5]}))
    assert narrow["measured"] and _by_name(narrow)["phi interval width"]["value"] == pytest.approx(0.1)
    wide = fit_checks(_table(), _fit(ci=None, profile={"interval": [0.1, 0.9]}))
    assert wide["verdict"] == "not measured: phi's 95% profile interval is 0.8 wide (> 0.35)"


def test_a_forked_sweep_needs_a_bootstrap_by_parent_job():
    table = _table()
    table["parent"] = "r" + table.r.astype(str) + "-w" + table.width.astype(str)
    by_rows = fit_checks(table, _fit(cluster=None))
    assert _failed(by_rows) == {"phi interval width"}
    assert by_rows["verdict"] == (
        "not measured: phi's bootstrap interval treats forked branches as independent runs "
        "(--bootstrap N --cluster parent)"
    )
    by_profile = fit_checks(table, _fit(ci=None, profile={"interval": [0.4, 0.5]}))
    assert "phi's profile interval treats forked branches" in by_profile["verdict"]
    by_parent = fit_checks(table, _fit(cluster="parent"))
    assert by_parent["measured"]
    assert _by_name(by_parent)["phi interval width"]["target"] == "<= 0.35 wide (bootstrap by parent job)"
    # an unforked table (empty parents) is judged by its interval alone
    table["parent"] = ""
    assert fit_checks(table, _fit(cluster=None))["measured"]


def test_an_iso_flop_minimum_on_the_edge_is_not_measured():
    cond = fit_checks(_table(best={(2, 2e10): 32, (1, 1e10): 16}), _fit())
    assert _failed(cond) == {"iso-FLOP minima inside the grid"}
    assert _by_name(cond)["iso-FLOP minima inside the grid"]["value"] == "2 of 4 curves"
    assert cond["verdict"] == "not measured: iso-FLOP minimum on the edge of the sizes (r = 1 at 1e+10, r = 2 at 2e+10)"


def test_budgets_with_fewer_than_three_sizes_have_no_iso_flop_check():
    table = _table(best={(1, 1e10): 32})
    table = table[table.width != 24]  # two sizes per budget: the check cannot be made
    cond = fit_checks(table, _fit())
    assert "iso-FLOP minima inside the grid" not in _by_name(cond) and cond["measured"]


def test_the_held_out_budget_above_its_limit_is_not_measured():
    bad = fit_checks(_table(), _fit(holdout=0.02))
    assert _failed(bad) == {"held-out largest budget error"}
    assert bad["verdict"] == "not measured: the held-out largest budget is predicted to 2.00%"
    assert fit_checks(_table(), _fit(holdout=HOLDOUT_MRE_MAX))["measured"]
    assert "held-out largest budget error" not in _by_name(fit_checks(_table(), _fit(holdout=None)))


def test_every_failing_check_is_a_reason_in_order():
    cond = fit_checks(
        _table(best={(1, 2e10): 16}),
        _fit(params={**PARAMS, "E": math.exp(5.0)}, ci=(0.1, 0.9), holdout=0.03),
    )
    assert cond["verdict"] == (
        "not measured: E = 148.4 on its upper bound; phi's 95% bootstrap interval is 0.8 wide (> 0.35); "
        "iso-FLOP minimum on the edge of the sizes (r = 1 at 2e+10); the held-out largest budget is predicted to 3.00%"
    )


def test_a_law_without_phi_is_fit_measured():
    params = {k: v for k, v in PARAMS.items() if k != "phi"}
    cond = fit_checks(_table(r_values=(1,)), _fit(params=params, ci=None, law="chinchilla"))
    assert cond["verdict"] == "fit measured" and [c["name"] for c in cond["checks"]] == [
        "E off its bounds",
        "iso-FLOP minima inside the grid",
    ]


def test_verdict_of_drops_the_reasons_and_joins_them():
    checks = [
        {"name": "a", "target": "t", "value": 1.0, "ok": False, "_reason": "one"},
        {"name": "b", "target": "t", "value": 2.0, "ok": True, "_reason": "never said"},
        {"name": "c", "target": "t", "value": 3.0, "ok": False, "_reason": "two"},
    ]
    cond = verdict_of(checks, "phi")
    assert cond == {
        "checks": [{k: v for k, v in c.items() if k != "_reason"} for c in checks],
        "verdict": "not measured: one; two",
        "measured": False,
    }
    assert verdict_of(checks[1:2], "Δφ")["verdict"] == "Δφ measured"


# -- a joint fit over recipes ----------------------------------------------------------------------------


def _joint_table(best: dict | None = None) -> tuple[pd.DataFrame, np.ndarray]:
    """baseline: r = 1, 2; additive: r = 2 (its r = 1 reference is baseline's). Recipe codes as fit_joint
    makes them (0 = the reference)."""
    best = best or {}
    base = _table((1, 2), {k[1:]: v for k, v in best.items() if k[0] == "baseline"}, "baseline")
    add = _table((2,), {k[1:]: v for k, v in best.items() if k[0] == "additive"}, "additive")
    table = pd.concat([base, add], ignore_index=True)
    return table, (table["recipe"] == "additive").to_numpy(dtype=int)


def _joint_fit(phi_add=0.7, dphi_ci=(0.1, 0.3), cluster=None) -> FitResult:
    params = {k: v for k, v in PARAMS.items() if k != "phi"}
    params.update({"phi[baseline]": 0.5, "phi[additive]": phi_add})
    fit = _fit(params=params, ci=(0.4, 0.6), cluster=cluster, law="looped-joint")
    fit.ci95 = {"phi[baseline]": [0.4, 0.6], "delta_phi[additive]": list(dphi_ci)}
    fit.joint = {"recipes": ["baseline", "additive"], "reference": "baseline"}
    return fit


def test_a_well_conditioned_joint_fit_is_delta_phi_measured():
    table, codes = _joint_table()
    cond = joint_checks(table, _joint_fit(), codes)
    assert [c["name"] for c in cond["checks"]] == [
        "E off its bounds",
        "phi[baseline] off its bounds",
        "phi[additive] off its bounds",
        "Δφ[additive] off its bounds",
        "iso-FLOP minima inside the grid (baseline)",
        "iso-FLOP minima inside the grid (additive)",
        "Δφ[additive] interval width",
    ]
    assert cond["verdict"] == "Δφ measured" and cond["measured"]
    checks = _by_name(cond)
    assert checks["iso-FLOP minima inside the grid (baseline)"]["value"] == "4 of 4 curves"
    assert checks["iso-FLOP minima inside the grid (additive)"]["value"] == "2 of 2 curves"  # no r = 1 of its own
    assert checks["Δφ[additive] off its bounds"]["value"] == pytest.approx(0.2)


def test_a_joint_iso_flop_minimum_on_the_edge_is_not_measured_for_its_recipe_only():
    table, codes = _joint_table(best={("additive", 2, 2e10): 16})
    cond = joint_checks(table, _joint_fit(), codes)
    assert _failed(cond) == {"iso-FLOP minima inside the grid (additive)"}
    assert cond["verdict"] == "not measured: additive: iso-FLOP minimum on the edge of the sizes (r = 2 at 2e+10)"
    table, codes = _joint_table(best={("baseline", 1, 1e10): 32})
    cond = joint_checks(table, _joint_fit(), codes)
    assert _failed(cond) == {"iso-FLOP minima inside the grid (baseline)"}
    assert "baseline: iso-FLOP minimum on the edge of the sizes (r = 1 at 1e+10)" in cond["verdict"]


def test_a_joint_phi_or_delta_phi_on_its_bound_is_not_measured():
    table, codes = _joint_table()
    cond = joint_checks(table, _joint_fit(phi_add=3.0), codes)
    assert _failed(cond) == {"phi[additive] off its bounds"}
    assert cond["verdict"] == "not measured: phi[additive] = 3 on its upper bound"
    # phi[additive] inside its box, but 3 above the reference's: delta-phi on its bound
    fit = _joint_fit(phi_add=2.5)
    fit.params["phi[baseline]"] = -0.5
    cond = joint_checks(table, fit, codes)
    assert _failed(cond) == {"Δφ[additive] off its bounds"}
    assert cond["verdict"] == "not measured: Δφ[additive] = 3 on its upper bound"


def test_a_wide_or_missing_delta_phi_interval_is_not_measured():
    table, codes = _joint_table()
    wide = joint_checks(table, _joint_fit(dphi_ci=(-0.2, 0.3)), codes)
    assert _failed(wide) == {"Δφ[additive] interval width"}
    assert wide["verdict"] == "not measured: Δφ[additive]'s 95% bootstrap interval is 0.5 wide (> 0.35)"
    fit = _joint_fit()
    fit.bootstrap, fit.ci95 = None, {}
    missing = joint_checks(table, fit, codes)
    assert missing["verdict"] == "not measured: no interval for Δφ[additive] (--bootstrap N)"


def test_a_forked_joint_sweep_needs_its_delta_phi_bootstrapped_by_parent_job():
    table, codes = _joint_table()
    table["parent"] = table.recipe + "-r" + table.r.astype(str) + "-w" + table.width.astype(str)
    by_rows = joint_checks(table, _joint_fit(cluster=None), codes)
    assert _failed(by_rows) == {"Δφ[additive] interval width"}
    assert "Δφ[additive]'s bootstrap interval treats forked branches as independent runs" in by_rows["verdict"]
    assert joint_checks(table, _joint_fit(cluster="parent"), codes)["measured"]
