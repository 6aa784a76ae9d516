"""`loopscale power`'s menu of a runs-table design, by hand (issue 58; loopscale/analysis/power_designs.py): the
design as given with the seeds its table holds, twice and four times as many; each point repeated once per seed
with its seed index; a table's cost its C summed, and with a second recipe its looped runs' C again."""

from __future__ import annotations

import pandas as pd
import pytest

import loopscale.analysis.power_designs as power_designs


@pytest.fixture
def runs(tmp_path):
    rows = []
    shapes = ((1, 4e6, 0.0, 1e9), (2, 1e6, 3e6, 1e9), (4, 1e6, 3e6, 2e9))
    for r, n_once, n_rec, D in (*shapes, *((r, a, b, 3 * D) for r, a, b, D in shapes)):  # 6 points
        C = 6 * (n_once + r * n_rec) * D
        for seed, L in enumerate((3.1, 3.12)):  # two seeds a point
            rows.append({"r": r, "N_once": n_once, "N_rec": n_rec, "D": D, "C": C, "L": L + 0.1 * r, "seed": seed})
    path = tmp_path / "runs.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_a_tables_menu_is_its_seeds_twice_and_four_times(runs):
    menu = power_designs._menu(power_designs.PowerRequest(table=str(runs)))
    assert [(name, structure, spec["seeds"]) for name, structure, spec in menu] == [
        ("as given", "as given", 2),
        ("4 seeds", "as given", 4),
        ("8 seeds", "as given", 8),
    ]
    given = power_designs._menu(power_designs.PowerRequest(table=str(runs), seeds=3))
    assert [spec["seeds"] for _, _, spec in given] == [3, 6, 12] and given[0][0] == "as given"


def test_a_tables_design_is_each_point_once_per_seed_and_its_cost_the_c_summed(runs):
    design, seeds = power_designs._design({"table": str(runs), "recipe": None, "seeds": 3})
    assert seeds == 3 and len(design) == 18 and "L" not in design.columns
    assert design["r"].tolist() == [1, 1, 1, 2, 2, 2, 4, 4, 4] * 2 and design["D"].tolist()[9] == 3e9
    assert design["seed"].tolist() == [0, 1, 2] * 6
    cost = power_designs._cost(power_designs.PowerRequest(table=str(runs)), {"table": str(runs), "seeds": 3})
    C = {1: 6 * 4e6 * 1e9, 2: 6 * 7e6 * 1e9, 4: 6 * 13e6 * 2e9}
    assert cost["flops"] == pytest.approx(3 * 4 * sum(C.values()), rel=1e-12)  # D and 3 D: 4 x, 3 seeds
    assert cost["flops_with_candidate"] == pytest.approx(3 * 4 * (sum(C.values()) + C[2] + C[4]), rel=1e-12)
    assert power_designs._table_seeds(runs, None) == 2
