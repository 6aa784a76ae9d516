"""A law is one module (issue 36): the worked example of docs/architecture.md ("How to add a law"), loaded from a
file of its own with nothing else edited, is fitted, bootstrapped, held out, printed, tabled, fitted by
`loopscale fit --law` and reported with its figures; the registry's rules; and every registered law's stated
multiplier m_r is the one its prediction uses."""

from __future__ import annotations

import importlib.util
import json
import re
import sys

import numpy as np
import pandas as pd
import pytest

from loopscale.analysis.report import law_section, parameter_table
from loopscale.cli.fit_output import print_result
from loopscale.fit import synthetic as S
from loopscale.fit.fit_table import fit_table
from loopscale.fit.laws import registry
from loopscale.fit.laws.form import Law
from loopscale.fit.laws.registry import law_class, law_names, make_law, per_recipe_form, register, single_laws
from loopscale.fit.objective import Loss, objective, objective_and_grad
from loopscale.fit.runs_table import canonical_table
from support.cli import run_cli
from support.paths import FIXTURES, REPO_ROOT

ARCHITECTURE = REPO_ROOT / "docs" / "architecture.md"
FIXTURE = FIXTURES / "looped_synthetic_small.csv"
TRUTH = {"E": 1.6, "A": 40.0, "alpha": 0.22, "B": 400.0, "beta": 0.32, "lam": 0.4}


def example_source() -> str:
    """The Python block that follows the "law example" marker in docs/architecture.md."""
    text = ARCHITECTURE.read_text()
    after = text.split("<!-- law example:", 1)[1]
    return re.search(r"```python\n(.*?)```", after, flags=re.S).group(1)


@pytest.fixture
def example_law(tmp_path, monkeypatch):
    """The docs' example as a module of its own in tmp_path, imported (registering its law); the registry's
    table is left as the test found it (emptied and refilled in place: `register` holds that table)."""
    saved = dict(registry._LAWS)
    path = tmp_path / "looped_linear_example.py"
    path.write_text(example_source())
    spec = importlib.util.spec_from_file_location("looped_linear_example", path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "looped_linear_example", module)
    spec.loader.exec_module(module)
    yield law_class("looped-linear")
    registry._LAWS.clear()
    registry._LAWS.update(saved)


def drawn_table(law: type[Law], noise: float = 0.001) -> pd.DataFrame:
    """The fixture's grid with L drawn from `law` at TRUTH, times (1 + noise z)."""
    table = pd.read_csv(FIXTURE)
    L = law.predict_table(TRUTH, table)
    table["L"] = L * (1 + noise * np.random.default_rng(0).standard_normal(len(table)))
    return table


def gradient_error(law: Law, data, theta: np.ndarray) -> float:
    """max |analytic - central finite-difference gradient| of the Huber objective, relative to the largest."""
    loss = Loss()
    _, g = objective_and_grad(theta, law, data, loss)
    h = 1e-6
    fd = np.array([(objective(theta + h * e, law, data, loss) - objective(theta - h * e, law, data, loss)) / (2 * h)
                   for e in np.eye(len(theta))])  # fmt: skip
    return float(np.max(np.abs(g - fd)) / max(1e-12, np.abs(fd).max()))


def test_the_docs_example_is_a_law_of_one_module(example_law, tmp_path, capsys):
    assert example_law.name in law_names() and example_law.name in single_laws()
    table = canonical_table(drawn_table(example_law), example_law.name)
    law = make_law(example_law.name, table["r"])
    data = law.data_from_table(table)
    assert gradient_error(law, data, law.from_user(TRUTH)) < 1e-5
    with np.errstate(all="ignore"):
        fit = fit_table(table, example_law.name, n_bootstrap=4, holdout=True, jobs=1)
    assert fit.law == "looped-linear" and list(fit.params) == ["E", "A", "alpha", "B", "beta", "lam"]
    assert fit.params["lam"] == pytest.approx(TRUTH["lam"], abs=0.05)
    assert len(fit.bootstrap["params"]["lam"]) == 4 and np.isfinite(fit.bootstrap["params"]["lam"]).all()
    lo, hi = fit.ci95["lam"]
    assert lo <= hi and fit.holdout["mean_abs_rel_error"] < 0.01
    assert fit.profile_phi is None  # no profile_param: nothing profiled by default
    assert fit.conditioning["verdict"].startswith(("fit measured", "not measured"))
    print_result(fit)
    printed = capsys.readouterr().out
    assert "looped-linear fit" in printed and "lam" in printed
    assert example_law.formula in law_section(fit)
    rows = parameter_table(fit).set_index("parameter")
    assert rows.loc["lam", "ci95_low"] == pytest.approx(lo)


def test_the_docs_example_through_fit_and_report_commands(example_law, tmp_path):
    csv = tmp_path / "runs.csv"
    drawn_table(example_law).to_csv(csv, index=False)
    out = tmp_path / "fit.json"
    res = run_cli(["fit", str(csv), "--law", "looped-linear", "--bootstrap", "4", "--jobs", "1", "--out", str(out)])
    assert res.returncode == 0, res.stderr
    assert "looped-linear fit" in res.stdout
    record = json.loads(out.read_text())
    assert record["law"] == "looped-linear" and "lam" in record["ci95"]
    report = tmp_path / "report.md"
    res = run_cli(["report", str(csv), "--fit", str(out), "--out", str(report)])
    assert res.returncode == 0, res.stderr
    text = report.read_text()
    assert example_law.formula in text
    drawn = {p.stem for p in (tmp_path / "figures").glob("*.png")}
    assert {"report_iso_flop", "report_residuals", "report_compute_optimal"} <= drawn
    assert "report_collapse" not in drawn  # no phi to collapse at


def test_a_law_with_a_column_of_its_own_is_one_module(tmp_path):
    """The per-pass parameter class N_pass (loopscale/fit/laws/looped_pass.py: read from its own column, counted
    in the training cost, kept through resampling in `LawData.extra`): fitted, held out, and drawn by the report
    (the law's columns interpolated along the iso-FLOP lines, its N_eff in the collapse and the compute-optimal
    sizes); the looped law refuses the same table (it has no place for N_pass)."""
    law = law_class("looped-pass")
    table = pd.read_csv(FIXTURE).drop(columns=["D"])  # D from C = 6 (N_once + N_pass + r N_rec) D
    table["N_pass"] = np.where(table["r"] > 1, 0.2 * table["N_rec"], 0.0)
    truth = {**{k: TRUTH[k] for k in ("E", "A", "alpha", "B", "beta")}, "phi": 0.5}
    canonical = canonical_table(table.assign(L=1.0), "looped-pass")
    assert canonical.attrs["columns_used"]["D"] == "C / (6 (N_once + N_pass + r N_rec))"
    noise = 1 + 0.001 * np.random.default_rng(1).standard_normal(len(table))
    table["L"] = law.predict_table(truth, canonical) * noise
    csv, out, report = tmp_path / "runs.csv", tmp_path / "fit.json", tmp_path / "report.md"
    table.to_csv(csv, index=False)
    res = run_cli(["fit", str(csv), "--law", "looped-pass", "--holdout-largest", "--out", str(out)])
    assert res.returncode == 0, res.stderr
    record = json.loads(out.read_text())
    assert record["params"]["phi"] == pytest.approx(0.5, abs=0.05) and record["profile_phi"]["interval"][0] < 0.5
    assert record["holdout"]["mean_abs_rel_error"] < 0.01
    assert run_cli(["report", str(csv), "--fit", str(out), "--out", str(report)]).returncode == 0
    drawn = {p.stem for p in (tmp_path / "figures").glob("*.png")}
    assert {"report_iso_flop", "report_collapse", "report_residuals", "report_compute_optimal"} <= drawn
    res = run_cli(["fit", str(csv), "--law", "looped"])
    assert res.returncode == 2 and "has no place for parameters used once per pass" in res.stderr
    table.assign(N_pass=-1.0).to_csv(tmp_path / "bad.csv", index=False)
    res = run_cli(["fit", str(tmp_path / "bad.csv"), "--law", "looped-pass"])
    assert res.returncode == 2 and "column 'N_pass' must be >= 0" in res.stderr


def test_a_law_instance_with_options_of_its_own_fits_as_it_is():
    """A law built with an option (E pinned, a box of its own: the shipped looped-pinned-e) goes through
    `fit_table` as an instance; without its value it is refused in one line."""
    PinnedE = law_class("looped-pinned-e")
    table = canonical_table(pd.read_csv(FIXTURE), "looped")
    with np.errstate(all="ignore"):
        free = fit_table(table, "looped")
        pinned = fit_table(table, PinnedE(E_pinned=1.5), n_bootstrap=2, holdout=True, jobs=1)
    assert pinned.law == "looped-pinned-e" and pinned.settings["law"] == "looped-pinned-e"
    assert pinned.params["E"] == pytest.approx(1.5, rel=1e-12)
    assert pinned.bootstrap["params"]["E"] == pytest.approx([1.5, 1.5], rel=1e-12)
    assert pinned.holdout["params"]["E"] == pytest.approx(1.5, rel=1e-12)
    assert pinned.objective > free.objective  # E is not 1.5 in this table: the free fit does better
    res = run_cli(["fit", str(FIXTURE), "--law", "looped-pinned-e"])
    assert res.returncode == 2 and "needs the value of E to pin" in res.stderr and len(res.stderr.splitlines()) == 1


def test_fit_help_lists_every_single_law(example_law):
    """`fit --law` takes the registered laws (a joint law through --joint only), the example's included, then
    the curve laws (`fit --curves`)."""
    help_text = "".join(run_cli(["fit", "--help"]).stdout.split())  # argparse wraps lines, at hyphens too
    assert (
        "thelawtofit:chinchilla,looped,looped-curve,looped-entry,looped-entry-curve,looped-free,looped-linear,looped-logn,looped-logn-curve,looped-logr,"
        "looped-nxd,"
        "looped-pass,"
        "looped-pinned-e,testtime,lr-annealing,multipower(defaultlooped;" in help_text
    )
    res = run_cli(["fit", str(FIXTURE), "--law", "looped-joint"])
    assert res.returncode == 2 and "invalid choice: 'looped-joint'" in res.stderr


def test_registry_rules(monkeypatch):
    monkeypatch.setattr(registry, "_LAWS", dict(registry._LAWS))
    with pytest.raises(ValueError, match="law='kaplan' is not a registered law; choose one of 'chinchilla', 'looped'"):
        law_class("kaplan")
    with pytest.raises(ValueError, match=r"\(did you mean 'looped'\?\)$"):
        law_class("loped")
    assert registry.find_law("kaplan") is None

    class Nameless(Law):
        pass

    with pytest.raises(ValueError, match="no name"):
        register(Nameless)

    class Again(Law):
        name = "looped"

    with pytest.raises(ValueError, match="registered twice"):
        register(Again)
    assert per_recipe_form("looped") is law_class("looped-joint")
    assert per_recipe_form("chinchilla") is None and "looped-joint" not in single_laws()


@pytest.fixture(scope="module")
def published_sweep() -> pd.DataFrame:
    return S.recipe_sweep(seed=0, noise=0.0)


# looped-logn's m reads the size as well as r: it (and its per-recipe and curve forms) states none of r alone (row by
# row: tests/unit/test_looped_logn.py, tests/unit/test_looped_logn_joint.py, tests/unit/test_looped_logn_curve.py)
SIZE_READING = ("looped-logn", "looped-logn-joint", "looped-logn-curve")


@pytest.mark.parametrize("name", [n for n in law_names() if law_class(n).table == "runs" and n not in SIZE_READING])
def test_each_law_predicts_with_the_multiplier_it_states(name, published_sweep):
    """L_hat = E + A (N_once + m_r N_rec)^-alpha + B D^-beta with m_r = `Law.multiplier` (what figures and advice
    read), on the published grid's rows of every r."""
    cls = law_class(name)
    sweep = published_sweep.assign(N_pass=0.0)  # no per-pass parameters in the published recipes
    dense = {"E": 1.6, "A": 30.0, "alpha": 0.21, "B": 900.0, "beta": 0.36}
    extra = {"looped": {"phi": 0.45}, "looped-free": {"k_2": 1.3, "k_4": 1.9, "k_8": 2.7}, "looped-pass": {"phi": 0.45}}
    extra["looped-joint"] = extra["looped-pass-joint"] = {"phi[baseline]": 0.46, "phi[tbptt]": 0.38}
    extra["looped-pinned-e"] = {"phi": 0.45}
    extra["looped-nxd"] = {"phi": 0.45, "gamma": 0.0}  # the N x D term vanishes at gamma = 0
    extra["looped-logr"] = {"phi": 0.45, "psi": 0.2}  # phi at r = 4, falling 0.2 per e-fold of r below it
    extra["looped-entry"] = {"phi": 0.45, "kappa": 0.4}  # looped blocks at 0.4 of their r^phi worth
    extra["looped-entry-joint"] = {**extra["looped-joint"], "kappa": 0.4}  # one kappa, a phi per recipe
    extra["looped-curve"] = {"phi": 0.45, "K": 0.3}  # runs at their peak lr to the end: S1 = D, no anneal
    extra["looped-entry-curve"] = {"phi": 0.45, "kappa": 0.4, "K": 0.3}  # the same, at looped-entry's multiplier
    params = {**dense, **extra.get(name, {})}
    law = cls.from_params(params)
    table = (sweep if cls.per_recipe else sweep[sweep["recipe"] == "baseline"]).reset_index(drop=True)
    predicted = cls.predict_table(params, table, "recipe")
    for (r, recipe), rows in table.groupby(["r", "recipe"]):
        m = law.multiplier(params, r, recipe if cls.per_recipe else None)
        N = rows["N_once"] + m * rows["N_rec"]
        expected = dense["E"] + dense["A"] * N ** -dense["alpha"] + dense["B"] * rows["D"] ** -dense["beta"]
        np.testing.assert_allclose(predicted[rows.index.to_numpy()], expected, rtol=1e-12)
