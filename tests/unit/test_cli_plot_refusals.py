"""`loopscale plot` and `report`: where they write and what they refuse before reading a fit (issue 58,
loopscale/cli/plot.py): the report's figure prefix and default folder, an --out of the wrong kind, a source that does
not exist, --dpi out of range; each one line, exit 2, nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopscale.cli import build_parser
from loopscale.cli.plot import report_prefix
from support.cli import run_cli

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "plots"


def test_a_reports_figures_are_prefixed_by_its_name_beside_it_by_default():
    assert report_prefix(Path("out/sweep.report.md")) == "sweep.report_"
    assert report_prefix(Path("report.md")) == "report_"
    args = build_parser("report").parse_args(["report", "runs", "--out", "r.md"])
    assert (args.figures, args.dpi, args.drop_top_k, args.title, args.fit) == (None, 200, 0, None, None)


def refused(tmp_path, argv) -> str:
    before = sorted(p.name for p in tmp_path.iterdir())
    res = run_cli(argv)
    assert (res.returncode, res.stdout) == (2, ""), res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    (line,) = res.stderr.strip().splitlines()
    return line


def test_plot_refuses_an_out_that_is_a_file_and_a_dpi_out_of_range(tmp_path):
    (tmp_path / "figs").write_text("")
    table, fit = str(FIXTURE / "runs.csv"), str(FIXTURE / "fit.baseline.json")
    line = refused(tmp_path, ["plot", table, fit, "--out", str(tmp_path / "figs")])
    assert line == f"loopscale plot: error: --out {tmp_path / 'figs'} exists and is not a directory"
    for dpi in ("9", "1001"):
        line = refused(tmp_path, ["plot", table, fit, "--out", str(tmp_path / "out"), "--dpi", dpi])
        assert line == f"loopscale plot: error: --dpi must be between 10 and 1000; got {dpi}"


@pytest.mark.parametrize("kind", ["directory", "missing source"])
def test_report_refuses_an_out_folder_and_a_source_that_does_not_exist(tmp_path, kind):
    if kind == "directory":
        (tmp_path / "r.md").mkdir()
        line = refused(tmp_path, ["report", str(FIXTURE / "runs.csv"), "--out", str(tmp_path / "r.md")])
        assert (
            line
            == f"loopscale report: error: --out {tmp_path / 'r.md'} is a directory; give the Markdown file to write"
        )
    else:
        line = refused(tmp_path, ["report", str(tmp_path / "none"), "--out", str(tmp_path / "r.md")])
        assert line == f"loopscale report: error: {tmp_path / 'none'} does not exist"
