"""Recipe probes and their dense (r = 1) runs.

The published probes (truncated backprop, hyper-connections) train only r in {2, 4, 8}: at r = 1 every
recipe is the same plain model, so their fits reuse the baseline sweep's r = 1 runs. Without those rows the
looped law L = E + A (N_once + r^phi N_rec)^(-alpha) + B D^(-beta) has no unlooped anchor: phi then rests
on the r = 2 / 4 / 8 curves alone, which is not the fit the study reports. Two halves:

    collect side  `loopscale collect PROBE_DIR --dense BASELINE_DIR` appends the baseline's finished r = 1
                  rows, each marked with the sweep it came from in the `dense_from` column (dense_rows);
    fit side      `loopscale fit` refuses a looped fit of a table without r = 1 rows and names that fix
                  (check_dense_rows), unless --allow-no-dense says it is meant.
"""

from __future__ import annotations

from pathlib import Path

from loopscale.errors import InputError
from loopscale.fit.laws.registry import law_class
from loopscale.train.collect import Point, collect, runs_table

DENSE_COLUMN = "dense_from"  # in the runs table: the sweep dir an r = 1 row was borrowed from, else empty


class DensePoint(Point):
    dense_from: str  # DENSE_COLUMN: the baseline sweep it is borrowed from


def dense_rows(probe_rows: list[Point], baseline_dir: Path) -> list[DensePoint]:
    """The baseline sweep's finished r = 1 rows, marked `dense_from = baseline_dir`, to append to a probe's
    rows. ValueError when the probe already has r = 1 rows (they would be counted twice) or when the
    baseline has none."""
    baseline_dir = Path(baseline_dir)
    if not baseline_dir.is_dir():
        raise InputError(f"--dense {baseline_dir} is not a directory")
    own = sum(1 for row in probe_rows if row.get("r") == 1)
    if own:
        raise InputError(
            f"the sweep already has {own} r = 1 runs; --dense adds another sweep's r = 1 runs "
            "only to a probe that has none"
        )
    rows, _ = collect(baseline_dir)
    dense = [DensePoint(**row, dense_from=str(baseline_dir)) for row in rows if row.get("r") == 1]
    if not dense:
        raise InputError(
            f"--dense {baseline_dir} has no finished r = 1 runs (`loopscale status {baseline_dir}` lists its runs)"
        )
    return dense


def probe_table(rows: list[Point], dense: list[DensePoint]):
    """The runs table of a probe's rows plus its borrowed dense rows, with the `dense_from` column last
    (empty for the probe's own runs)."""
    table = runs_table(rows + dense)
    table[DENSE_COLUMN] = table["run_dir"].map({row["run_dir"]: row[DENSE_COLUMN] for row in dense})
    return table


def check_dense_rows(table, law: str, allow_no_dense: bool = False) -> None:
    """Refuse a fit of the looped laws on a table with no r = 1 row (a probe collected without --dense).
    `table` has the canonical column `r`; a dense law (`Law.dense`: chinchilla) does not use r and is never
    refused."""
    if law_class(law).dense or allow_no_dense or (table["r"] == 1).any():
        return
    raise InputError(
        f"no r = 1 runs in the table (r = {', '.join(f'{r:g}' for r in sorted(table['r'].unique()))}): a probe "
        "sweep trains no dense runs, so its fit needs the baseline's; collect with `loopscale collect "
        "PROBE_DIR --dense BASELINE_DIR`, or pass --allow-no-dense to fit without r = 1 on purpose"
    )
