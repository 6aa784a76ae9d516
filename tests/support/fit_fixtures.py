"""The committed fit fixture (tests/fixtures/plots: a looped-law runs table and REAL fits of it, made by
make_fixture.py), as fixtures for the figure, report and notebook tests (a pytest plugin: tests/conftest.py
registers it). Module-scoped: every test module reads its own copy."""

from __future__ import annotations

import pytest

from loopscale.fit.result import load_fit
from loopscale.plots.inputs import read_table, rows_for_fit
from support.paths import FIXTURES

PLOTS_FIXTURE = FIXTURES / "plots"


@pytest.fixture(scope="module")
def table():
    return read_table(PLOTS_FIXTURE / "runs.csv")


@pytest.fixture(scope="module")
def fit():
    return load_fit(PLOTS_FIXTURE / "fit.baseline.json")


@pytest.fixture(scope="module")
def baseline(table, fit):
    """The rows the baseline fit was made on (`loopscale fit --group recipe`)."""
    return rows_for_fit(table, fit)
