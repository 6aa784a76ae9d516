"""The joint law over recipes: merging recipe tables, exact recovery, the shared-parameter check,
the profile ends, and `loopscale fit --joint` / `compare` end to end."""

import json

import numpy as np
import pytest

from loopscale.fit import synthetic as S
from loopscale.fit.fit_table import fit_table
from loopscale.fit.joint import joint_data, joint_table, separate_fits, shared_parameter_check
from loopscale.fit.laws.registry import make_law
from loopscale.fit.objective import Loss
from loopscale.fit.optimize import fit_law
from loopscale.fit.runs_table import canonical_table
from loopscale.fit.uncertainty import profile_param, profile_values
from support.cli import run_cli

TRUTH = {**S.TRUE_DENSE, "phi[baseline]": 0.46, "phi[tbptt]": 0.38}


def merged(sweep):
    tables = [canonical_table(t, "looped-joint") for t in S.recipe_tables(sweep).values()]
    return joint_table(tables, "recipe")


def test_joint_table_keeps_each_shared_dense_run_once():
    sweep = S.recipe_sweep(seed=0)
    per_recipe = S.recipe_tables(sweep)
    n_dense = int((sweep["r"] == 1).sum())
    assert all(int((t["r"] == 1).sum()) == n_dense for t in per_recipe.values())
    table, recipes = merged(sweep)
    assert recipes == ("baseline", "tbptt")
    assert len(table) == len(sweep) == sum(len(t) for t in per_recipe.values()) - n_dense
    codes = table["_recipe_code"].to_numpy()
    assert set(codes[(table["recipe"] == "tbptt").to_numpy()]) == {1}
    # the published shapes: 29 baseline cells x 4 r, 34 probe cells x 3 r, no probe r = 1
    assert (table["r"] == 1).sum() == 29 and ((table["recipe"] == "tbptt") & (table["r"] == 1)).sum() == 0
    assert (table["recipe"] == "tbptt").sum() == 34 * 3
    with pytest.raises(ValueError, match="two or more recipes"):
        joint_table([canonical_table(per_recipe["baseline"], "looped")], "recipe")
    with pytest.raises(ValueError, match="r = 1 runs"):
        joint_table([canonical_table(sweep[sweep["r"] > 1], "looped")], "recipe")
    with pytest.raises(ValueError, match="'design' is not in table"):
        joint_table([canonical_table(sweep, "looped")], "design")


def test_noise_free_joint_fit_is_exact_and_reads_as_converged():
    table, recipes = merged(S.recipe_sweep(seed=0, noise=0.0))
    with np.errstate(all="ignore"):
        result, _ = fit_law(joint_data(table), make_law("looped-joint", recipes=recipes))
    assert result.objective < 1e-20
    assert result.n_best_basin >= 0.5 * result.n_refined
    assert not [w for w in result.warnings if "refined starts" in w]
    for name, value in TRUTH.items():
        assert result.params[name] == pytest.approx(value, rel=1e-9), name


NINE_PHI = {"baseline": 0.46, "tbptt": 0.38, "hyper": 0.5, "parcae": 0.3, "huginn": 0.6, "whole_stack": 0.2}
NINE_PHI |= {"lora": 0.7, "loop_index": 0.46, "stable_residual": 0.55}


def test_nine_recipes_fit_jointly_in_bounded_memory_and_exactly():
    """Nine recipes (the designs experiment): the product of every recipe's phi axis would screen 3e8 starts
    (tens of GB, what killed the designs' joint fit); the grid is bounded and the fit still exact."""
    table, recipes = merged(S.recipe_sweep(phi=NINE_PHI, seed=0, noise=0.0))
    law = make_law("looped-joint", recipes=recipes)
    axes = np.linspace(0.05, 1.2, 16), np.linspace(0.05, 1.2, 16), np.linspace(0.0, 1.2, 7)
    grid = law.projected_grid(*axes)
    assert grid.shape == (16 * 16 * 243, 11)
    phis = grid[:, 2:3] + np.hstack([np.zeros((len(grid), 1)), grid[:, 3:]])
    assert np.unique(phis, axis=0).shape[0] == 243  # distinct combinations, every one in [0, 1.2]
    assert phis.min() >= -1e-12 and phis.max() <= 1.2 + 1e-12
    # up to five recipes the grid is today's full product, unchanged
    five = make_law("looped-joint", recipes=recipes[:5])
    assert len(five.projected_grid(*axes)) == 16 * 16 * 3**5
    with np.errstate(all="ignore"):
        result, _ = fit_law(joint_data(table), law)
    assert result.objective < 1e-20
    for name, value in {**S.TRUE_DENSE, **{f"phi[{g}]": v for g, v in NINE_PHI.items()}}.items():
        assert result.params[name] == pytest.approx(value, rel=1e-7), name


def test_noise_free_single_recipe_fit_is_exact_and_reads_as_converged():
    sweep = S.recipe_sweep(seed=0, noise=0.0)
    table = canonical_table(sweep[sweep["recipe"] == "baseline"], "looped")
    with np.errstate(all="ignore"):
        result = fit_table(table, "looped")
    assert result.objective < 1e-20 and not result.warnings
    for name in S.TRUE_DENSE:
        assert result.params[name] == pytest.approx(S.TRUE_DENSE[name], rel=1e-9), name
    assert result.params["phi"] == pytest.approx(0.46, rel=1e-9)


def test_profile_ends_are_roots_of_the_threshold_crossing():
    table, recipes = merged(S.recipe_sweep(seed=5))
    with np.errstate(all="ignore"):
        _, state = fit_law(joint_data(table), make_law("looped-joint", recipes=recipes))
        prof = profile_param(state, "dphi[tbptt]")
        lo, hi = prof["interval"]
        excess = [
            profile_values(state, "dphi[tbptt]", [x])[0].objective - state.best.objective - prof["threshold"]
            for x in (lo, hi)
        ]
    assert lo < state.best.theta[6] < hi
    # on a 0.05 grid, linear interpolation would miss the crossing by far more than this
    assert np.abs(excess).max() < 1e-3 * prof["threshold"]
    grid = np.array(prof["x"])
    assert not np.any(np.isclose(grid, lo)) and not np.any(np.isclose(grid, hi))


def test_shared_parameter_check_flags_recipes_with_different_dense_models():
    shared = S.recipe_sweep(seed=2)
    apart = S.recipe_sweep(seed=2, dense_by_recipe={"tbptt": {"alpha": 0.26, "A": 45.0, "E": 1.50}})
    p = {}
    for name, sweep in (("shared", shared), ("apart", apart)):
        table, recipes = merged(sweep)
        with np.errstate(all="ignore"):
            _, state = fit_law(joint_data(table), make_law("looped-joint", recipes=recipes))
            sep = separate_fits(table, recipes, Loss())
            p[name] = shared_parameter_check(state, table, sep)["p_value"]
    assert p["apart"] < 1e-3
    assert p["shared"] > 0.05


def loopscale(*args, cwd=None):
    return run_cli(args, cwd=cwd)


def test_fit_joint_cli_and_compare(tmp_path):
    sweep = S.recipe_sweep(seed=4)
    paths = []
    for g, t in S.recipe_tables(sweep).items():
        paths.append(tmp_path / f"runs_{g}.csv")
        t.to_csv(paths[-1], index=False)
    out = tmp_path / "joint.json"
    res = loopscale(
        "fit", *paths, "--joint", "recipe", "--bootstrap", 40, "--out", out, "--plot", tmp_path / "joint.png"
    )
    assert res.returncode == 0, res.stderr
    assert "phi[tbptt]" in res.stdout and "shared-parameter check" in res.stdout
    d = json.loads(out.read_text())
    assert d["law"] == "looped-joint"
    assert set(d["params"]) == {"E", "A", "alpha", "B", "beta", "phi[baseline]", "phi[tbptt]"}
    assert d["input"]["n_duplicate_rows_dropped"] == 29 and d["input"]["n_rows_used"] == len(sweep)
    assert [t["columns"]["L"] for t in d["input"]["tables"]] == ["L", "L"]
    delta = d["joint"]["delta_phi"]["tbptt"]
    lo, hi = delta["bootstrap_ci"]
    assert lo < delta["estimate"] < hi and len(d["bootstrap"]["params"]["delta_phi[tbptt]"]) == 40
    assert delta["profile_interval"][0] < delta["estimate"] < delta["profile_interval"][1]
    assert 0 <= delta["lr_test"]["p_value"] <= 1 and delta["separate"]["ci"] is not None
    assert d["joint"]["shared_check"]["df"] == 5
    assert (tmp_path / "joint.png").stat().st_size > 1000
    cmp = loopscale("compare", out)
    assert cmp.returncode == 0, cmp.stderr
    assert "joint bootstrap 95% CI" in cmp.stdout and "separate fits: delta phi" in cmp.stdout
    assert "LR test of delta phi = 0" in cmp.stdout
    # one table with both recipes gives the same fit as the two tables
    both = tmp_path / "all.csv"
    sweep.to_csv(both, index=False)
    res = loopscale("fit", both, "--joint", "recipe", "--no-profile", "--out", tmp_path / "one.json")
    assert res.returncode == 0, res.stderr
    one = json.loads((tmp_path / "one.json").read_text())
    assert one["params"] == pytest.approx(d["params"], rel=1e-6)


def test_fit_joint_cli_bad_input(tmp_path):
    sweep = S.recipe_sweep(seed=0)
    src = tmp_path / "runs.csv"
    sweep.to_csv(src, index=False)
    cases = [
        ([src, src], "several tables need --joint"),
        ([src, "--joint", "nope"], "--joint column 'nope'"),
        (
            [src, "--joint", "recipe", "--law", "chinchilla"],
            "--joint fits the looped or looped-entry or looped-logn or looped-pass law",
        ),
    ]
    for args, message in cases:
        res = loopscale("fit", *args, "--out", tmp_path / "o.json")
        assert res.returncode == 2 and message in res.stderr, (args, res.stderr)
        assert not (tmp_path / "o.json").exists()
    single = tmp_path / "single.json"
    loopscale("fit", src, "--no-profile", "--out", single)
    res = loopscale("compare", single)
    assert res.returncode == 2 and "not a joint fit" in res.stderr
