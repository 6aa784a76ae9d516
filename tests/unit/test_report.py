"""loopscale.analysis.report and the `loopscale plot` / `loopscale report` subcommands, on the fixture table and
its real fits (tests/fixtures/plots), and on a sweep directory of run.json records collected for real."""

import re
from pathlib import Path

import pandas as pd
import pytest

from loopscale.analysis import report
from loopscale.atomic import write_json_atomic
from loopscale.cli import main
from loopscale.fit.result import load_fit
from loopscale.fit.result_text import joint_lines
from loopscale.fit.verdict import shared_check_verdict
from loopscale.plots.registry import figure_names, save_all
from support.fit_fixtures import PLOTS_FIXTURE as FIXTURE

RUNS_FIGURES = figure_names("runs")  # a runs-table fit's figures (a curves fit gets its own)


def test_write_report_law_cis_figures_and_runs(table, fit, tmp_path):
    figs = save_all(table, fit, tmp_path / "figures", dpi=40)
    out = report.write_report(table, fit.to_json_dict(), figs, tmp_path / "report.md", title="demo")
    text = out.read_text()
    assert text.startswith("# demo\n")
    assert "`L = E + A (N_once + r^phi N_rec)^-alpha + B D^-beta`" in text
    assert "Fitted on the 72 runs with recipe = baseline." in text
    for name, (lo, hi) in fit.ci95.items():
        row = f"| {name} | {report.fmt(fit.params[name])} | [{report.fmt(lo)}, {report.fmt(hi)}] |"
        assert row in text
    assert f"percentile bootstrap over {fit.bootstrap['n_replicates']} replicates" in text
    lo, hi = fit.profile_phi["interval"]
    assert f"profile interval for phi (95%): [{report.fmt(lo)}, {report.fmt(hi)}]" in text
    assert "holdout: refit without the largest budget" in text
    # every figure is linked relative to the report and the link resolves
    links = re.findall(r"!\[(\w+)\]\(([^)]+)\)", text)
    assert [name for name, _ in links] == [p.stem for p in figs if p.suffix == ".png"]
    assert all(f"([PDF](figures/{p.stem}.pdf))" in text for p in figs)
    assert all((out.parent / link).is_file() and not Path(link).is_absolute() for _, link in links)
    assert f"{len(table)} finished runs; r in {{1, 2, 4, 8}}; 6 compute budgets" in text
    run_rows = [line for line in text.splitlines() if line.startswith(("| baseline |", "| hyper |"))]
    assert len(run_rows) == 144  # the sweep's runs, every recipe
    assert "Failed or missing runs" not in text  # a bare table says nothing about missing runs


def test_report_of_a_joint_fit_shows_delta_phi_next_to_the_separate_fits(table, tmp_path):
    joint = load_fit(FIXTURE / "fit.joint.json")
    text = report.build_report(table, joint)
    assert "`L = E + A (N_once + r^phi_g N_rec)^-alpha + B D^-beta   (g: the run's recipe)`" in text
    assert "### delta-phi across recipes (joint fit)" in text
    t = report.delta_phi_table(joint)
    assert list(t["recipe"]) == ["tbptt", "hyper"]
    for row in t.itertuples():
        d = joint.joint["delta_phi"][row.recipe]
        assert row.delta_phi == d["estimate"] and [row.joint_ci95_low, row.joint_ci95_high] == d["bootstrap_ci"]
        assert row.width_ratio == pytest.approx(
            (d["bootstrap_ci"][1] - d["bootstrap_ci"][0]) / (d["separate"]["ci"][1] - d["separate"]["ci"][0])
        )
        assert f"| {row.recipe} | {report.fmt(row.delta_phi)} |" in text
    chk = joint.joint["shared_check"]
    assert f"robust LR statistic {report.fmt(chk['statistic'], 3)} on {chk['df']} df" in text
    for name in ("phi[baseline]", "phi[tbptt]", "phi[hyper]"):
        assert f"| {name} | {report.fmt(joint.params[name])} |" in text


@pytest.mark.parametrize("p_value", [0.01, 0.5])
def test_the_shared_check_verdict_is_worded_once(p_value):
    """The report and `fit --joint`'s terminal lines print the same verdict of the shared-parameter check, from
    one renderer (fit/verdict.py), and it follows the check's p-value."""
    joint = load_fit(FIXTURE / "fit.joint.json")
    joint.joint = joint.joint.replace(shared_check=joint.joint.shared_check.replace(p_value=p_value))
    verdict = shared_check_verdict(joint.joint["shared_check"])
    assert ("NOT share" in verdict) == (p_value < 0.05)
    assert f"{verdict}." in report.joint_section(joint)
    assert joint_lines(joint.joint)[-1].endswith(f": {verdict}")


def test_report_without_fit_lists_runs_only(table, tmp_path):
    text = report.write_report(table, None, [], tmp_path / "r.md", problems=[]).read_text()
    assert "No fit given" in text and "## Figures" not in text
    assert "None: every run found in the sweep finished." in text


def test_parameter_table(fit):
    params = report.parameter_table(fit)
    assert list(params["parameter"]) == ["E", "A", "alpha", "B", "beta", "phi"]
    phi = params.set_index("parameter").loc["phi"]
    assert [phi.ci95_low, phi.ci95_high] == fit.ci95["phi"]


def test_markdown_table_escapes_pipes():
    md = report.markdown_table(["a", "b"], [("x|y", 1.234567), (None, 12)])
    assert md.splitlines() == ["| a | b |", "|---|---|", "| x\\|y | 1.235 |", "|  | 12 |"]


def make_sweep(root: Path, table: pd.DataFrame) -> Path:
    """A sweep directory as training leaves it: a run.json per finished run, one failed run, and one
    run that was started (Hydra config written) but never finished."""
    sweep = root / "sweep"
    for i, row in enumerate(table.to_dict("records")):
        record = {k: (None if pd.isna(v) else v) for k, v in row.items()}
        name = f"run{i:03d}"  # a record names its run dir and carries an identity, as training writes it
        write_json_atomic(
            sweep / name / "run.json", {**record, "status": "done", "run_name": name, "identity": f"{i:016x}"}
        )
    write_json_atomic(
        sweep / "run_failed" / "run.json", {"status": "diverged", "reason": "loss is NaN at step 40", "step": 40}
    )
    (sweep / "run_killed" / ".hydra").mkdir(parents=True)
    (sweep / "run_killed" / ".hydra" / "config.yaml").write_text("model: {}\n")
    return sweep


def test_cli_report_on_a_sweep_dir(table, tmp_path, capsys):
    table = table[table["recipe"] != "tbptt"]
    sweep = make_sweep(tmp_path, table)
    out = tmp_path / "out" / "report.md"
    rc = main(
        [
            "report",
            str(sweep),
            "--fit",
            str(FIXTURE / "fit.baseline.json"),
            "--free",
            str(FIXTURE / "free.baseline.json"),
            "--compare",
            str(FIXTURE / "fit.tbptt.json"),
            "--dpi",
            "40",
            "--out",
            str(out),
        ]
    )
    printed = capsys.readouterr().out.splitlines()
    assert rc == 0 and printed[0] == str(out) and printed[-1].startswith("verdict: ")  # the path, then the verdict
    text = out.read_text()
    assert text.startswith("# loopscale report: sweep\n")
    assert f"{len(table)} finished runs" in text
    assert "2 run(s) did not finish" in text
    assert "| ../sweep/run_failed | diverged | loss is NaN at step 40 |" in text
    assert "| ../sweep/run_killed | incomplete |" in text
    figs = sorted(p.name for p in (out.parent / "figures").iterdir())
    assert figs == sorted(f"report_{n}.{ext}" for n in RUNS_FIGURES for ext in ("png", "pdf"))


def test_cli_plot_writes_pngs(tmp_path, capsys):
    out = tmp_path / "plots"
    rc = main(
        [
            "plot",
            str(FIXTURE / "runs.csv"),
            str(FIXTURE / "fit.baseline.json"),
            "--compare",
            str(FIXTURE / "fit.tbptt.json"),
            str(FIXTURE / "fit.hyper.json"),
            "--dpi",
            "40",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    printed = capsys.readouterr().out.split()
    assert printed == [str(out / f"{n}.{ext}") for n in RUNS_FIGURES for ext in ("png", "pdf")]
    assert all((out / f"{n}.png").stat().st_size > 2000 for n in RUNS_FIGURES)


@pytest.mark.parametrize(
    "case, message",
    [
        ("missing_table", "no such file"),
        ("no_loss_column", "lacks column(s) L"),
        ("not_a_fit", "is not a loopscale fit record"),
        ("free_is_looped", "the free multipliers need a looped-free fit"),
    ],
)
def test_cli_plot_bad_input_writes_nothing(case, message, table, tmp_path, capsys):
    runs, fit, free = FIXTURE / "runs.csv", FIXTURE / "fit.baseline.json", None
    if case == "missing_table":
        runs = tmp_path / "nope.csv"
    elif case == "no_loss_column":
        runs = tmp_path / "noL.csv"
        table.drop(columns=["L"]).to_csv(runs, index=False)
    elif case == "not_a_fit":
        fit = tmp_path / "x.json"
        fit.write_text('{"params": {}}')
    else:
        free = FIXTURE / "fit.baseline.json"
    out = tmp_path / "plots"
    argv = ["plot", str(runs), str(fit), "--out", str(out)] + (["--free", str(free)] if free else [])
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("loopscale plot: error:") and message in err and "\n" not in err
    assert not out.exists()


def test_cli_report_bad_input_writes_nothing(tmp_path, capsys):
    empty = tmp_path / "empty_sweep"
    empty.mkdir()
    out = tmp_path / "r" / "report.md"
    assert main(["report", str(empty), "--out", str(out)]) == 2
    assert "holds no runs" in capsys.readouterr().err
    assert main(["report", str(FIXTURE / "runs.csv"), "--fit", str(tmp_path / "missing.json"), "--out", str(out)]) == 2
    assert "cannot read fit JSON" in capsys.readouterr().err
    assert not out.parent.exists()
