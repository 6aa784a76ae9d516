"""`loopscale report` and `loopscale plot` on what a recipe comparison and a public table give them (issue 29,
items 6 and 9): a joint fit's report from the recipe tables as `fit T1 T2 --joint` read them (no merged
table), its figures drawn recipe by recipe, two reports in one folder, the fit's conditioning verdict, a
separate-fit delta-phi figure named by recipe, and the Chinchilla points through a column mapping with the
5 highest losses dropped, next to the published parameters."""

import json
import re
import shutil

import pandas as pd
import pytest
from PIL import Image

from loopscale.fit.result import load_fit
from loopscale.fit.runs_table import drop_top_k
from loopscale.plots import single_fit
from loopscale.plots.inputs import as_looped_table, read_table
from loopscale.plots.isoflop import iso_flop
from loopscale.plots.registry import figure_names, figures
from support.cli import run_cli
from support.fit_fixtures import PLOTS_FIXTURE as FIXTURE
from support.paths import CHINCHILLA

RUNS_FIGURES = figure_names("runs")  # a runs-table fit's figures (a curves fit gets its own)
JOINT_FIGURES = RUNS_FIGURES  # a joint fit draws every one of them (loop_gap: a panel per recipe)

RECIPES = ("baseline", "tbptt", "hyper")
JOINT = FIXTURE / "fit.joint.json"


@pytest.fixture()
def recipe_tables(tmp_path):
    """One table per recipe, each with the baseline's r = 1 runs, as each recipe's sweep collects them."""
    raw = pd.read_csv(FIXTURE / "runs.csv")
    dense = raw[(raw["recipe"] == "baseline") & (raw["r"] == 1)]
    paths = []
    for g in RECIPES:
        path = tmp_path / f"{g}.csv"
        pd.concat([dense, raw[(raw["recipe"] == g) & (raw["r"] > 1)]]).to_csv(path, index=False)
        paths.append(path)
    return paths


def figure_text(fig) -> set[str]:
    out = {ax.get_title() for ax in fig.axes} | {t.get_text() for t in fig.texts}
    for legend in fig.legends + [ax.get_legend() for ax in fig.axes if ax.get_legend()]:
        out |= {t.get_text() for t in legend.get_texts()}
    for ax in fig.axes:
        out |= {t.get_text() for t in ax.get_xticklabels()}
    return out


def test_joint_report_from_the_recipe_tables(recipe_tables, tmp_path):
    out = tmp_path / "reports" / "joint.md"
    res = run_cli(["report", *recipe_tables, "--fit", JOINT, "--out", out])
    assert res.returncode == 0, res.stderr
    text = out.read_text()
    assert "### delta-phi across recipes (joint fit)" in text
    names = sorted(p.name for p in (out.parent / "figures").iterdir())
    assert names == sorted(f"joint_{n}.{ext}" for n in JOINT_FIGURES for ext in ("png", "pdf"))
    for name in JOINT_FIGURES:
        assert min(Image.open(out.parent / "figures" / f"joint_{name}.png").info["dpi"]) >= 199.9
    # the report's runs: every recipe's looped runs, the shared r = 1 runs once
    assert "| baseline | 1 |" in text and text.count("| tbptt | 8 |") == 17 and text.count("| baseline | 1 |") == 13

    # what the figures show: the rows read from the three tables, drawn recipe by recipe
    table = pd.concat([pd.read_csv(p) for p in recipe_tables]).drop_duplicates().reset_index(drop=True)
    table = as_looped_table(table)
    joint = load_fit(JOINT)
    collapse = single_fit.collapse(table, joint)
    titles = [ax.get_title().splitlines()[0] for ax in collapse.axes]
    for g in RECIPES:  # one panel per recipe at its own phi, not the baseline's phi for all
        assert f"{g}: $\\hat{{\\phi}} = {joint.params[f'phi[{g}]']:.3f}$" in titles
    assert len(collapse.axes) == len(RECIPES) + 2
    assert set(RECIPES) <= figure_text(collapse)  # the legend names the recipes (a marker each)
    iso = iso_flop(table, joint)
    markers = {c.get_paths()[0].vertices.shape[0] for ax in iso.axes for c in ax.collections if len(c.get_offsets())}
    assert len(markers) >= 3 and set(RECIPES) <= figure_text(iso)  # recipes apart by marker, r by colour
    profile = figures(table, joint)["phi_profile"]
    assert [len(ax.lines) > 0 or len(ax.patches) > 0 for ax in profile.axes] == [True, True]  # drawn, not empty
    assert {"tbptt", "hyper"} <= figure_text(profile)


def test_joint_report_reads_the_tables_the_fit_recorded(recipe_tables, tmp_path):
    """Given only the new recipe's table, the report reads the rest from the tables the joint fit recorded
    (fixture: runs.csv beside the fit); where those are gone, it says which recipe is missing."""
    out = tmp_path / "hyper.md"
    res = run_cli(["report", recipe_tables[2], "--fit", JOINT, "--out", out])
    assert res.returncode == 0, res.stderr
    assert "| tbptt | 8 |" in out.read_text()
    moved = tmp_path / "elsewhere" / "joint.json"
    moved.parent.mkdir()
    shutil.copy(JOINT, moved)
    res = run_cli(["report", recipe_tables[2], "--fit", moved, "--out", tmp_path / "x.md"])
    assert res.returncode == 2 and "no looped runs of baseline, tbptt" in res.stderr
    assert "Traceback" not in res.stderr and not (tmp_path / "x.md").exists()


def test_two_reports_in_one_folder_keep_their_figures(tmp_path):
    runs = FIXTURE / "runs.csv"
    a, b = tmp_path / "baseline.md", tmp_path / "hyper.md"
    assert run_cli(["report", runs, "--fit", FIXTURE / "fit.baseline.json", "--out", a]).returncode == 0
    assert run_cli(["report", runs, "--fit", FIXTURE / "fit.hyper.json", "--out", b]).returncode == 0
    for report, other in ((a, b), (b, a)):
        links = re.findall(r"!\[\w+\]\(([^)]+)\)", report.read_text())
        assert len(links) == 6 and all(f"figures/{report.stem}_" in link for link in links)  # loop_gap the 6th
        assert all((tmp_path / link).is_file() for link in links)
        assert f"{other.stem}_" not in report.read_text()
    # each report's collapse is its own fit's
    assert (tmp_path / "figures/baseline_collapse.png").read_bytes() != (
        tmp_path / "figures/hyper_collapse.png"
    ).read_bytes()


def test_separate_fits_are_named_by_recipe(recipe_tables, tmp_path):
    """Fits made on one recipe's table (no --group) are named by the recipe of their looped runs, not
    'fit 1', 'fit 2'."""
    fits = []
    for g, path in zip(RECIPES, recipe_tables):
        d = json.loads((FIXTURE / f"fit.{g}.json").read_text())
        d["group"], d["input"] = None, {**d["input"], "path": str(path)}
        fits.append(load_fit(d))
    table = read_table(FIXTURE / "runs.csv")
    fig = figures(table[table["recipe"] == "baseline"], fits[0], fits[1:])["delta_phi"]
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == list(RECIPES)
    assert [t.get_text() for t in fig.axes[1].get_xticklabels()] == ["tbptt", "hyper"]
    assert r"$\phi - \phi$(baseline)" == fig.axes[1].get_ylabel()


def test_report_prints_the_conditioning_verdict(tmp_path):
    d = json.loads((FIXTURE / "fit.baseline.json").read_text())
    d["conditioning"] = {
        "checks": [
            {"name": "E off its lower bound", "target": "> 1.05", "value": 1.43, "ok": True},
            {
                "name": "r = 1 iso-FLOP minima inside the widths",
                "target": "all budgets",
                "value": "4 of 6",
                "ok": False,
            },
        ],
        "verdict": "not measured: r = 1 iso-FLOP minima on the edge of the width grid",
        "measured": False,
    }
    fit = tmp_path / "fit.json"
    fit.write_text(json.dumps(d))
    res = run_cli(["report", FIXTURE / "runs.csv", "--fit", fit, "--out", tmp_path / "r.md"])
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[-1] == "verdict: not measured: r = 1 iso-FLOP minima on the edge of the width grid"
    # a record from before the checks said what they protect: every failure blocks, printed as `fit` prints it
    assert lines[1:4] == [
        "conditioning:",
        "  ok    E off its lower bound: 1.43 (target > 1.05)",
        "  FAIL  r = 1 iso-FLOP minima inside the widths: 4 of 6 (target all budgets)",
    ]
    text = (tmp_path / "r.md").read_text()
    assert "| check | protects | target | value | result |" in text
    assert "| E off its lower bound |  | > 1.05 | 1.43 | ok |" in text
    assert "| r = 1 iso-FLOP minima inside the widths |  | all budgets | 4 of 6 | **FAILS** |" in text
    assert "**verdict: not measured: r = 1 iso-FLOP minima on the edge of the width grid**" in text
    # a fit JSON without the block (written before fits carried it): the checks computed from the table; its
    # three iso-FLOP minima on an edge lie within the noise of its runs (RMS residual 0.47%)
    res = run_cli(["report", FIXTURE / "runs.csv", "--fit", FIXTURE / "fit.baseline.json", "--out", tmp_path / "s.md"])
    assert res.returncode == 0 and res.stdout.splitlines()[-1].startswith("verdict: phi measured: phi = 0.360")
    assert "(3 within the noise)" in res.stdout and "Can the fit be trusted?" in (tmp_path / "s.md").read_text()


def test_chinchilla_table_through_a_column_mapping(tmp_path):
    """`fit` on the Chinchilla points (5 highest losses dropped), then `plot` and `report` on the raw table
    with --columns and --drop-top-k 5: no N_once, N_rec or r asked for, at most 9 iso-FLOP panels, the
    published parameters next to the fit's."""
    columns = ["--columns", "N=Model Size,C=Training FLOP,L=loss"]
    kept = tmp_path / "chinchilla_240.csv"
    drop_top_k(pd.read_csv(CHINCHILLA), 5, loss="loss").to_csv(kept, index=False)
    fit = tmp_path / "chinchilla.json"
    res = run_cli(
        ["fit", kept, "--law", "chinchilla", "--n-col", "Model Size", "--c-col", "Training FLOP"]
        + ["--loss-col", "loss", "--starts", "4", "--out", fit]
    )
    assert res.returncode == 0, res.stderr
    res = run_cli(["plot", CHINCHILLA, fit, *columns, "--drop-top-k", "5", "--out", tmp_path / "plots"])
    assert res.returncode == 0, res.stderr
    assert {p.name for p in (tmp_path / "plots").iterdir()} == {
        f"{n}.{ext}" for n in ("iso_flop", "residuals", "compute_optimal") for ext in ("png", "pdf")
    }
    width, height = Image.open(tmp_path / "plots" / "iso_flop.png").size
    assert height < 2500  # 3 rows of panels at 200 dpi, not one per budget
    out = tmp_path / "chinchilla.md"
    res = run_cli(["report", CHINCHILLA, "--fit", fit, *columns, "--drop-top-k", "5", "--out", out])
    assert res.returncode == 0, res.stderr
    text = out.read_text()
    assert "| C | N | D | L |" in text  # no r, N_once, N_rec columns the table never had
    assert "240 finished runs" in text and "the 5 highest-loss rows were left out (--drop-top-k 5)" in text
    assert "### Published parameters" in text and "quoted, not fitted here" in text
    assert "| alpha |" in text and "| 0.34 | 0.3478 |" in text and "| 410.7 | 2085 |" in text
    # without the mapping the table lacks the columns: one line naming the mapping option
    res = run_cli(["plot", CHINCHILLA, fit, "--out", tmp_path / "bad"])
    assert res.returncode == 2 and "missing column 'N'" in res.stderr and "map names with --columns" in res.stderr


def test_plot_takes_the_recipe_tables_of_a_joint_fit(recipe_tables, tmp_path):
    out = tmp_path / "plots"
    res = run_cli(["plot", *recipe_tables, JOINT, "--dpi", "40", "--out", out])
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == [str(out / f"{n}.{ext}") for n in JOINT_FIGURES for ext in ("png", "pdf")]


def test_joint_report_on_a_sweep_directory(tmp_path):
    """The new recipe's sweep as training leaves it (a run.json per run), the baseline from the fit's record."""
    raw = pd.read_csv(FIXTURE / "runs.csv")
    mine = raw[(raw["recipe"] == "hyper") & (raw["r"] > 1)]
    for i, row in enumerate(mine.to_dict("records")):
        record = {k: (None if pd.isna(v) else v) for k, v in row.items()}
        name = f"run{i:03d}"
        path = tmp_path / "sweep" / name / "run.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps({**record, "status": "done", "run_name": name, "identity": f"{i:016x}"}))
    out = tmp_path / "mine.md"
    res = run_cli(["report", tmp_path / "sweep", "--fit", JOINT, "--out", out])
    assert res.returncode == 0, res.stderr
    text = out.read_text()
    assert text.count("| hyper | 8 |") == 20 and "| tbptt | 8 |" in text
    assert "None: every run found in the sweep finished." in text


def test_a_fit_of_another_table_is_flagged_in_the_report(tmp_path):
    """Issue 41 (9): the fit records the table it was fitted on (path, sha256); a report on a table with
    other contents says so, in the report and on stderr, while one on that table (copied elsewhere: the
    content counts) does not."""
    table, fit = tmp_path / "runs.csv", tmp_path / "fit.json"
    shutil.copy(FIXTURE / "runs.csv", table)
    baseline = pd.read_csv(table)
    baseline = baseline[baseline["recipe"] == "baseline"]
    baseline.to_csv(table, index=False)
    assert run_cli(["fit", table, "--no-profile", "--out", fit]).returncode == 0
    same, other = tmp_path / "copy.csv", tmp_path / "other.csv"
    shutil.copy(table, same)
    baseline.iloc[:-3].to_csv(other, index=False)  # three runs fewer
    ok = run_cli(["report", same, "--fit", fit, "--out", tmp_path / "same.md", "--dpi", "20"])
    assert ok.returncode == 0 and "warning" not in ok.stderr, ok.stderr
    assert "Warning" not in (tmp_path / "same.md").read_text()
    res = run_cli(["report", other, "--fit", fit, "--out", tmp_path / "other.md", "--dpi", "20"])
    recorded = json.loads(fit.read_text())["input"]
    assert res.returncode == 0, res.stderr
    line = res.stderr.strip().splitlines()[-1]
    assert line.startswith(f"warning: the fit was made from {recorded['path']} (sha256 {recorded['sha256'][:12]})")
    assert f"not from this report's table {other}" in line
    assert f"> **Warning:** {line.removeprefix('warning: ')}" in (tmp_path / "other.md").read_text()
