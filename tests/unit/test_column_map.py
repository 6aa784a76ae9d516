"""`--columns` of `plot` and `report`: a table's own column names mapped to the canonical ones
(fit/runs_table.ColumnMap.parse), and the one-line refusals of what is not such a map."""

from __future__ import annotations

import pytest

from loopscale.errors import InputError
from loopscale.fit.runs_table import ColumnMap
from support.cli import run_cli
from support.paths import CHINCHILLA


def test_a_map_names_the_tables_columns_and_keeps_the_rest_canonical():
    assert ColumnMap.parse(None) is None
    parsed = ColumnMap.parse(" N = Model Size , C=Training FLOP,L=loss")
    assert parsed == ColumnMap(N="Model Size", C="Training FLOP", L="loss")
    assert (parsed.r, parsed.D) == ("r", "D")


@pytest.mark.parametrize(
    "text, message",
    [
        ("N", "'N' is not CANON=column"),
        ("N=", "'N=' is not CANON=column"),
        ("=params", "'=params' is not CANON=column"),
        ("P=params", "'P' is not one of r, N_once, N_rec, N, D, C, L"),
        ("N=a,N=b", "N is mapped twice"),
    ],
)
def test_what_is_not_a_map_is_refused_by_its_item(text, message):
    with pytest.raises(InputError, match=message):
        ColumnMap.parse(text)


def test_plot_refuses_a_bad_map_in_one_line_before_drawing(tmp_path):
    res = run_cli(["plot", CHINCHILLA, tmp_path / "fit.json", "--columns", "N=a,N=b", "--out", tmp_path / "plots"])
    assert res.returncode == 2 and res.stderr.strip().splitlines() == [res.stderr.strip()], res.stderr
    assert "N is mapped twice" in res.stderr and not (tmp_path / "plots").exists()
