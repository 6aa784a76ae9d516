"""`loopscale fit TABLE --curves` (issue 55): a curves table of any model (named columns) fitted by a curve law
on some schedules, the held-out ones predicted and scored, the record and predictions written; bad input is one
line, exit 2, nothing written."""

import json
import shutil

import numpy as np
import pandas as pd
import pytest

from loopscale.fit.curves.registry import curve_law
from loopscale.fit.curves.synthetic import draw_curves, schedule
from support.cli import run_cli

TRUTH = {"L0": 2.9, "A": 0.55, "alpha": 0.5, "B": 400.0, "C": 2.0, "beta": 0.6, "gamma": 0.6}


@pytest.fixture(scope="module")
def public_like(tmp_path_factory):
    """Curves named as the public multi-power curves are (schedule, step, lr, loss), from a known law."""
    schedules = {k: schedule(k, 2000, 3e-4, 100) for k in ("constant", "cosine", "step", "wsd")}
    table = draw_curves(curve_law("multipower"), TRUTH, schedules, every=40, noise=1e-4, seed=3)
    path = tmp_path_factory.mktemp("curves") / "curves.csv"
    table.rename(columns={"run": "schedule", "val_loss": "loss"}).to_csv(path, index=False)
    return path


def test_fit_curves_holds_out_and_writes(public_like, tmp_path):
    out, preds, png = tmp_path / "fits" / "mpl.json", tmp_path / "fits" / "mpl_pred.csv", tmp_path / "fits" / "mpl.png"
    res = run_cli(
        [
            "fit",
            str(public_like),
            "--curves",
            "--law",
            "multipower",
            "--run-col",
            "schedule",
            "--loss-col",
            "loss",
            "--holdout",
            "wsd",
            "--starts",
            "3",
            "--out",
            str(out),
            "--predictions",
            str(preds),
            "--plot",
            str(png),
        ]
    )
    assert res.returncode == 0, res.stderr
    assert "multipower law fitted to 3 run(s)" in res.stdout and "held out: mean relative error" in res.stdout
    record = json.loads(out.read_text())
    assert record["law"] == "multipower" and record["fitted_runs"] == ["constant", "cosine", "step"]
    assert record["holdout_summary"]["mean_rel_error"] < 1e-3
    assert record["params"]["alpha"] == pytest.approx(0.5, abs=0.05)
    table = pd.read_csv(preds)
    held = table[table.role == "holdout"]
    assert set(held.run) == {"wsd"} and np.allclose(held.rel_error, abs(held.predicted - held.loss) / held.loss)
    assert png.stat().st_size > 10_000 and png.with_suffix(".pdf").is_file()  # measured against fitted, per run


def test_fit_curves_rival_law(public_like):
    res = run_cli(
        [
            "fit",
            str(public_like),
            "--curves",
            "--law",
            "lr-annealing",
            "--run-col",
            "schedule",
            "--loss-col",
            "loss",
            "--holdout",
            "wsd",
            "--starts",
            "2",
        ]
    )
    assert res.returncode == 0, res.stderr
    assert "lr-annealing law fitted" in res.stdout and "S2" in res.stdout


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--holdout", "linear"], "--holdout ['linear']: no such run"),
        (["--holdout", "constant", "cosine", "step", "wsd"], "every run is held out"),
        (["--law", "looped"], "--curves fits a curve law"),
        (["--step-col", "iteration"], "no column(s) ['iteration']"),
        (["--warmup-drops", "--law", "lr-annealing"], "--warmup-drops is an option of the multipower law"),
        (["--curve-start", "1"], "--curve-start 1.0: a share of each run's steps, in [0, 1)"),
        (["--fit-runs", "cosine", "linear"], "--fit-runs ['linear']: no such run"),
        (["--fit-runs", "cosine", "--holdout", "wsd"], "--holdout and --fit-runs name the same split twice"),
    ],
)
def test_fit_curves_bad_input_is_one_line(public_like, tmp_path, extra, message):
    out = tmp_path / "never.json"
    res = run_cli(
        ["fit", str(public_like), "--curves", "--run-col", "schedule", "--loss-col", "loss", "--out", str(out), *extra]
    )
    assert res.returncode == 2 and message in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_curve_law_without_curves_is_refused(public_like):
    res = run_cli(["fit", str(public_like), "--law", "multipower"])
    assert res.returncode == 2 and "is a curve law: fit it to a curves table with --curves" in res.stderr


def test_curve_start_is_refused_for_a_law_of_final_points():
    from pathlib import Path

    table = Path(__file__).parents[1] / "fixtures" / "looped_synthetic_small.csv"
    res = run_cli(["fit", str(table), "--law", "looped", "--curve-start", "0.1", "--no-profile"])
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1
    assert "--curve-start drops evaluations of a loss curve: --law looped fits final points" in res.stderr


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--from-step", "1000"], "--from-step:"),
        (["--holdout", "a", "--lr-before-first", "hold"], "--holdout, --lr-before-first:"),
        (["--run-col", "schedule", "--repeated-steps", "last", "--fit-runs", "b"], "--run-col, --fit-runs, --repeated"),
    ],
)
def test_options_of_curves_without_curves_are_refused_not_ignored(tmp_path, extra, named):
    """`fit TABLE --law looped-entry-curve --from-step 1000` (no --curves) read none of --curves' own options: every
    row was fitted under the user's step filter or split. Refused in one line naming them, nothing written (review,
    issue 55)."""
    from pathlib import Path

    table = Path(__file__).parents[1] / "fixtures" / "looped_synthetic_small.csv"
    out = tmp_path / "never.json"
    res = run_cli(["fit", str(table), "--no-profile", "--out", str(out), *extra])
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert named in res.stderr and "option(s) of --curves" in res.stderr and not out.exists()


def test_curve_start_fits_the_later_evaluations_on_the_whole_schedule(public_like, tmp_path):
    """--curves --curve-start 0.5: each run's evaluations from half its steps on, the law still read over the whole
    schedule (drawn without noise from the law, so the later evaluations are fitted and predicted as closely)."""
    out, preds = tmp_path / "late.json", tmp_path / "late.csv"
    args = ["fit", str(public_like), "--curves", "--run-col", "schedule", "--loss-col", "loss", "--starts", "3"]
    res = run_cli([*args, "--holdout", "wsd", "--curve-start", "0.5", "--out", str(out), "--predictions", str(preds)])
    assert res.returncode == 0, res.stderr
    table = pd.read_csv(preds)
    assert table["step"].min() >= 1000 and (table["step"] == 2000).sum() == 4  # the later half of 2,000 steps
    record = json.loads(out.read_text())
    assert record["curve_start"] == 0.5 and record["holdout_summary"]["mean_rel_error"] < 1e-3
    assert record["params"]["alpha"] == pytest.approx(0.5, abs=0.1)


def test_from_step_fits_every_run_from_one_step_whatever_its_length(tmp_path):
    """--from-step 610: runs of 1,000 and 2,000 steps both scored from step 610 on (a share would start them at
    different steps); a run with nothing left after it is refused in one line."""
    schedules = {"cosine": schedule("cosine", 2000, 3e-4, 100), "wsd": schedule("wsd", 1000, 3e-4, 100)}
    path = tmp_path / "two.csv"
    draw_curves(curve_law("lr-annealing"), {"L0": 2.9, "A": 0.5, "alpha": 0.5, "C": 3.0}, schedules, 40).to_csv(
        path, index=False
    )
    out, preds = tmp_path / "from.json", tmp_path / "from.csv"
    args = ["fit", str(path), "--curves", "--law", "lr-annealing", "--starts", "2"]
    res = run_cli([*args, "--from-step", "610", "--out", str(out), "--predictions", str(preds)])
    assert res.returncode == 0, res.stderr
    first = pd.read_csv(preds).groupby("run")["step"].min()
    assert first.to_dict() == {"cosine": 620, "wsd": 620}  # evaluated every 40 steps from 100
    assert json.loads(out.read_text())["from_step"] == 610
    res = run_cli([*args, "--from-step", "1500"])
    assert res.returncode == 2 and "--from-step 1500: run(s) wsd have no evaluation at or after it" in res.stderr


def test_repeated_steps_last_reads_a_resumed_runs_later_log(public_like, tmp_path):
    """The wsd curve's last five evaluations logged again 1% higher (a resumed run): refused in one line naming
    the option; with --repeated-steps last those steps are read (and scored) at the later values."""
    table = pd.read_csv(public_like)
    again = table[(table.schedule == "wsd") & table.loss.notna()].tail(5).assign(loss=lambda t: t.loss * 1.01)
    path, preds = tmp_path / "resumed.csv", tmp_path / "resumed_pred.csv"
    pd.concat([table, again]).to_csv(path, index=False)
    args = ["fit", str(path), "--curves", "--run-col", "schedule", "--loss-col", "loss", "--starts", "2"]
    res = run_cli([*args, "--holdout", "wsd"])
    assert res.returncode == 2 and "--repeated-steps last reads the last" in res.stderr
    res = run_cli([*args, "--holdout", "wsd", "--repeated-steps", "last", "--predictions", str(preds)])
    assert res.returncode == 0, res.stderr
    got = pd.read_csv(preds).set_index(["run", "step"]).loc[[("wsd", s) for s in again.step], "loss"]
    np.testing.assert_allclose(got.to_numpy(), again.loss.to_numpy(), rtol=1e-12)


def test_a_pickle_or_a_json_document_refused_in_one_line(public_like, tmp_path):
    """The public 100M-20B curves come as a pickle of DataFrames, the 124M SlimPajama logs as wandb JSON: each
    refused naming what it is (read as CSV, the pickle was "incomplete: no line ending")."""
    pd.read_csv(public_like).to_pickle(tmp_path / "curves.pkl")
    (tmp_path / "run.json").write_text('{"history": {"val": {"iter": [0, 200]}}}')
    for name, what in (("curves.pkl", "a pickle, not read"), ("run.json", "one JSON document")):
        res = run_cli(["fit", str(tmp_path / name), "--curves", "--run-col", "schedule", "--loss-col", "loss"])
        assert res.returncode == 2 and f"{name}: {what}" in res.stderr and "write it as CSV" in res.stderr


def test_validate_reads_a_curve_fit_without_the_evaluations_it_left_out(tmp_path):
    """`validate` refits and scores the rows `fit --curve-start` fitted, not every evaluation of the table."""
    from loopscale.data.heldout import curve_steps
    from loopscale.fit.curves.synthetic import looped_curves
    from loopscale.fit.laws.registry import make_law
    from loopscale.fit.synthetic import DEMO_BATCH_TOKENS, DEMO_DENSE, demo_grid
    from loopscale.fit.validation.inputs import read_fit, validation_tables

    truth = {**DEMO_DENSE, "phi": 0.75, "K": 0.3}
    at = lambda steps, warmup, cooldown: curve_steps(steps, 8, (warmup, cooldown), cooldown)  # noqa: E731
    path, out = tmp_path / "curves.csv", tmp_path / "fit.json"
    looped_curves(demo_grid(), make_law("looped-curve"), truth, DEMO_BATCH_TOKENS, at).to_csv(path, index=False)
    args = ["--law", "looped-curve", "--loss-col", "val_loss", "--no-profile", "--starts", "2", "--out", str(out)]
    res = run_cli(["fit", str(path), *args, "--curve-start", "0.3"])
    assert res.returncode == 0, res.stderr
    fit = read_fit(out)
    table, _, _ = validation_tables(fit)
    assert fit.settings["curve_start"] == 0.3 and len(table) == fit.input["n_rows_used"]
    last = table.groupby("run")["step"].transform("max")
    assert (table["step"] >= 0.3 * last).all() and table["run"].nunique() == 44


@pytest.fixture(scope="module")
def public_folder(public_like, tmp_path_factory):
    """The same curves laid out as the public multi-power curves are: one CSV per schedule (columns step, lr, loss;
    the schedule is the file's name)."""
    folder = tmp_path_factory.mktemp("csv_400")
    for name, rows in pd.read_csv(public_like).groupby("schedule"):
        rows.drop(columns="schedule").to_csv(folder / f"{name}.csv", index=False)
    return folder


def test_a_folder_of_one_csv_per_schedule_is_the_same_fit_as_one_table(public_like, public_folder, tmp_path):
    """`fit DIR --curves`: every CSV a run named by its stem; the fit and the held-out errors are the one table's."""
    common = ["--curves", "--loss-col", "loss", "--starts", "2"]
    folder_out, table_out = tmp_path / "folder.json", tmp_path / "table.json"
    fit_runs = ["--fit-runs", "step", "constant", "cosine"]  # the complement of --holdout wsd
    res = run_cli(["fit", str(public_folder), *common, *fit_runs, "--out", str(folder_out)])
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("read as one run named") == 4 and "'cosine'" in res.stdout
    res = run_cli(
        ["fit", str(public_like), "--run-col", "schedule", *common, "--holdout", "wsd", "--out", str(table_out)]
    )
    assert res.returncode == 0, res.stderr
    by_folder, by_table = json.loads(folder_out.read_text()), json.loads(table_out.read_text())
    assert by_folder["fitted_runs"] == ["constant", "cosine", "step"]
    assert by_folder["params"] == pytest.approx(by_table["params"], rel=1e-9)
    assert by_folder["holdout_summary"] == pytest.approx(by_table["holdout_summary"], rel=1e-9)
    # the folder's files named one by one (in its name order): the same fit, the record naming every file
    files = [str(public_folder / f"{k}.csv") for k in ("constant", "cosine", "step", "wsd")]
    files_out = tmp_path / "files.json"
    assert run_cli(["fit", *files, *common, *fit_runs, "--out", str(files_out)]).returncode == 0
    by_files = json.loads(files_out.read_text())
    assert by_folder["table"] == str(public_folder) and by_files["table"] == files
    assert by_files["params"] == pytest.approx(by_folder["params"], rel=1e-12)


def test_curve_files_read_together_name_each_run_once(public_folder, tmp_path):
    """Files given one by one read as the folder does; a run in two files and an empty folder are refused."""
    from loopscale.errors import InputError
    from loopscale.fit.curves.fit import read_curve_tables

    files = [public_folder / f"{k}.csv" for k in ("wsd", "constant")]
    table, notes = read_curve_tables(files, "run")
    assert list(pd.unique(table["run"])) == ["wsd", "constant"] and len(notes) == 2
    assert len(table) == sum(len(pd.read_csv(f)) for f in files)
    with pytest.raises(InputError, match="constant.csv is given twice"):
        read_curve_tables([public_folder, public_folder / "constant.csv"], "run")
    other = tmp_path / "other"
    other.mkdir()
    pd.read_csv(files[1]).to_csv(other / "constant.csv", index=False)
    with pytest.raises(InputError, match="run 'constant' is in both"):
        read_curve_tables([public_folder, other], "run")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="a folder with no table in it"):
        read_curve_tables([tmp_path / "empty"], "run")


def test_a_folder_with_another_csv_is_refused_by_that_files_name(public_folder, tmp_path):
    """A CSV that is no curves table in a folder of them (a summary beside the schedules) is refused naming it
    and the columns it lacks, not by row numbers of the merged table (review, issue 55)."""
    mixed = tmp_path / "mixed"
    shutil.copytree(public_folder, mixed)
    pd.DataFrame({"model": ["400M"], "params": [4e8]}).to_csv(mixed / "summary.csv", index=False)
    res = run_cli(["fit", str(mixed), "--curves", "--loss-col", "loss", "--starts", "1"])
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert f"{mixed / 'summary.csv'} has no column(s) ['step', 'lr', 'loss'] (it has ['model', 'params'])" in res.stderr


def test_a_folder_reads_parquet_and_json_lines_tables_and_leaves_other_files(public_folder, tmp_path):
    """A folder's tables are every CSV, Parquet (.parquet, .pq) and JSON-lines file in it, as `read_table` reads
    them; a file of another kind (a README) is no table (review, issue 55)."""
    from loopscale.fit.curves.fit import read_curve_tables

    mixed = tmp_path / "formats"
    mixed.mkdir()
    runs = {k: pd.read_csv(public_folder / f"{k}.csv") for k in ("wsd", "constant", "cosine", "step")}
    runs["wsd"].to_parquet(mixed / "wsd.parquet")
    runs["constant"].to_parquet(mixed / "constant.pq")
    runs["cosine"].to_json(mixed / "cosine.jsonl", orient="records", lines=True)
    runs["step"].to_csv(mixed / "step.CSV", index=False)
    (mixed / "README.md").write_text("the public 400M curves\n")
    table, notes = read_curve_tables([mixed], "run")
    assert list(pd.unique(table["run"])) == ["constant", "cosine", "step", "wsd"] and len(notes) == 4  # name order
    for name, rows in runs.items():
        got = table[table["run"] == name].drop(columns="run").reset_index(drop=True)
        pd.testing.assert_frame_equal(got, rows, check_dtype=False)


def test_a_run_without_warmup_fitted_from_its_first_steps_gets_a_note():
    """A run whose lr starts at its peak at step 0 (no warmup to read) is fitted from an untrained model's loss
    unless told otherwise: one note names it and the options; a run with a warmup, or one fitted from later, none."""
    from loopscale.fit.curves.fit import evaluations_from, no_warmup_note
    from loopscale.fit.curves.table import CurveColumns, read_curves

    steps = np.arange(0, 1001, 50)
    flat = pd.DataFrame({"run": "flat", "step": steps, "lr": 1e-3, "loss": 10.4 / (1 + steps / 20)})
    warm = flat.assign(run="warm", lr=np.minimum(1e-3, 1e-3 * (steps + 1) / 200))
    curves = read_curves(pd.concat([flat, warm]), CurveColumns(loss="loss"))
    assert curves[0].warmup_end == 0 and curves[1].warmup_end > 0
    note = no_warmup_note(curves)
    assert note is not None and note.startswith("run(s) flat:") and "--from-step STEP" in note
    assert no_warmup_note(evaluations_from(curves, 0.0, 50)) is None  # fitted from step 50 = 5% of 1,000
    assert no_warmup_note(curves[1:]) is None


def test_a_bad_row_in_one_of_several_files_is_named_by_its_file_and_its_row_there(public_folder, tmp_path):
    """Files read together are checked file by file: the error names the file and the row of that file, not a row
    number of the merged table."""
    from loopscale.errors import InputError
    from loopscale.fit.curves.fit import read_trained_curves
    from loopscale.fit.curves.table import CurveColumns

    folder = tmp_path / "bad"
    folder.mkdir()
    for name in ("constant", "cosine"):
        pd.read_csv(public_folder / f"{name}.csv").to_csv(folder / f"{name}.csv", index=False)
    broken = pd.read_csv(public_folder / "wsd.csv").astype({"step": float})
    broken.loc[3, "step"] = 1.5
    broken.to_csv(folder / "wsd.csv", index=False)
    columns = CurveColumns(loss="loss")
    with pytest.raises(InputError, match=r"wsd\.csv: column 'step': rows? 3\b"):
        read_trained_curves([folder], columns, warmup_from_zero=True)
    curves, other_r, _ = read_trained_curves([folder / "constant.csv", folder / "cosine.csv"], columns, True)
    assert [c.run for c in curves] == ["constant", "cosine"] and other_r == 0
