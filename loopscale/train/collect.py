"""`collect`: a sweep's run dirs (find_run_dirs) and their records (run.json, run_json.py) turned into the runs
table the fitter reads, and the list of runs that are not points of it (running, stale, failed, incomplete,
unreadable, inconsistent, copies), which `loopscale collect` writes beside it; and the curves table (issue 55):
one row per (run, evaluation of its loss curve, r_eval), each run's model and schedule with it (`fit --curves` reads
its trained-r rows: fit/curves/table.py, trained_r_rows).
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any, TypedDict

import pandas as pd

from loopscale.atomic import atomic_paths
from loopscale.config.model import recorded_model
from loopscale.errors import LoopscaleError
from loopscale.model.accounting import eval_flops_per_token
from loopscale.train.lock import lock_state
from loopscale.train.run_json import (
    PARENT_FILE,
    REPLACED_DIR,
    RUN_FILE,
    TABLE_COLUMNS,
    BadRecord,
    CurvePoint,
    TableRow,
    read_record,
    record_problem,
)

# Columns of the curves table: the run and its model (as the runs table names them), then one evaluation: the
# step, tokens and lr at it (the lr of the update that step made), the training loss and the subset's val loss.
# Long form (issue 56): one row per pass count the point was scored at (trainer.curve_r_eval; the trained r alone
# by default), r_eval and the forward FLOPs per token there beside its val_loss; r_eval = r is the run's own curve.
# `from_parent`: a forked branch's rows up to its fork step, its parent's stable phase.
CURVE_RUN_COLUMNS = ["run", "run_dir", "parent", "recipe", "r", "N_once", "N_rec", "N_pass", "N", "width", "seed"]
# C_budget: the budget each run was given, so a curves table groups by budget as its runs table (runs_table.budgets)
CURVE_RUN_COLUMNS += ["steps", "D", "C", "C_budget", "L"]
CURVE_COLUMNS = [*CURVE_RUN_COLUMNS, "step", "tokens", "lr", "lr_multiplier", "train_loss"]
CURVE_COLUMNS += ["r_eval", "val_loss", "flops_per_token_eval", "from_parent"]


class Problem(TypedDict):
    """A run that is not a point of the table (collect's second result, a row of <name>_problems.csv)."""

    run_dir: str
    status: str
    reason: str
    step: int | None


class Point(TableRow):
    """A finished run as collect hands it on: its runs-table row, and for the curves table (`curves_table`) its
    loss curve, the forward FLOPs per token at its trained r and its fork step."""

    curve: list[CurvePoint] | None
    curve_eval_flops: float | None
    fork_step: int | None


PROBLEM_COLUMNS = list(Problem.__annotations__)
RUN_MARKERS = (RUN_FILE, PARENT_FILE)  # and .hydra/config.yaml, checkpoints/last.ckpt (find_run_dirs)


def find_run_dirs(sweep_dir: Path) -> list[Path]:
    """Every run directory below a sweep: those with a run.json, a fork parent's record, a checkpoint or a
    composed Hydra config. Symlinked folders are followed (a run moved to scratch and linked back is still
    the sweep's), each real folder once: by its own path when it is also reachable without a link (a link
    to a run of the sweep, `alias -> run005`, is the duplicate, whichever name sorts first)."""
    sweep_dir = Path(sweep_dir)
    base = os.path.realpath(sweep_dir)
    direct = {os.path.realpath(root) for root, _, _ in _walk(sweep_dir, followlinks=False)}
    dirs, seen = [], set()
    for root, subdirs, files in _walk(sweep_dir, followlinks=True):
        real = os.path.realpath(root)
        reached_by_link = real != os.path.normpath(os.path.join(base, os.path.relpath(root, sweep_dir)))
        if real in seen or (reached_by_link and real in direct):  # a link to a folder walked by its own path
            subdirs[:] = []  # (or a link cycle): not walked twice
            continue
        seen.add(real)
        here = Path(root)
        if any(m in files for m in RUN_MARKERS) or (here / ".hydra" / "config.yaml").is_file():
            dirs.append(here)
        elif (here / "checkpoints" / "last.ckpt").is_file():
            dirs.append(here)
    return sorted(dirs)


def _walk(sweep_dir: Path, followlinks: bool):
    """os.walk below a sweep, in sorted order, not into a run's .hydra/ or checkpoints/ nor into the folders
    earlier configs' outputs were set aside in (.replaced/)."""
    for root, subdirs, files in os.walk(sweep_dir, followlinks=followlinks):
        subdirs.sort()
        if Path(root).name in (".hydra", "checkpoints"):
            subdirs[:] = []
        subdirs[:] = [d for d in subdirs if d != REPLACED_DIR]
        yield root, subdirs, files


def _problem(run_dir: Path, status: str, reason: str, step=None) -> Problem:
    return Problem(run_dir=str(run_dir), status=status, reason=reason, step=step)


def _incomplete(run_dir: Path) -> Problem:
    if (run_dir / "checkpoints" / "last.ckpt").exists():
        return _problem(run_dir, "incomplete", "checkpoint but no run.json (killed or running)")
    return _problem(run_dir, "incomplete", "started but no checkpoint and no run.json")


def _read_point(run_dir: Path) -> tuple[Point | None, str | None, Problem | None]:
    """(point, its identity, None) for a run dir holding a trusted done record, else (None, None, its problem),
    or (None, None, None) for a forked sweep's finished stable parent (its branches are the points)."""
    name = PARENT_FILE if os.path.lexists(run_dir / PARENT_FILE) else RUN_FILE
    try:
        record = read_record(run_dir, name)
    except BadRecord as err:
        return None, None, _problem(run_dir, "unreadable", str(err))
    held = lock_state(run_dir)
    if held is not None and (record is None or record.status != "done"):
        # a process trains here now (a resumed run: its old record says how the last attempt ended), or the
        # one that did died without a record: running / stale, from the lock's holder and heartbeat
        step = None if record is None else record.step
        return None, None, _problem(run_dir, held[0], held[1], step)
    if record is None:
        return None, None, _incomplete(run_dir)
    role = "stable parent: " if name == PARENT_FILE else ""
    if record.status != "done":
        status = record.status if isinstance(record.status, str) else "unreadable"
        return None, None, _problem(run_dir, status, role + str(record.reason or ""), record.step)
    if name == PARENT_FILE:
        return None, None, None
    problem = record_problem(run_dir, record)
    if problem is not None:
        return None, None, _problem(run_dir, "inconsistent", problem, record.step)
    flops = trained_eval_flops(record.config) if record.curve else None
    point = Point(**record.table_row(), curve=record.curve, curve_eval_flops=flops, fork_step=record.fork_step)
    point["run_dir"] = str(run_dir)
    return point, record.identity, None


def trained_eval_flops(config: dict[str, Any] | None) -> float | None:
    """The forward FLOPs per token at the trained r of a run's recorded config (run.json's `config`): a curve row
    scored at that r alone (trainer.curve_r_eval off, or a record from before it) carries them. None when this
    version cannot rebuild the model from it (a record without its config, or from before a field it needs)."""
    try:
        return eval_flops_per_token(recorded_model(config["model"]))
    except (LoopscaleError, TypeError, KeyError, ValueError):  # collect never fails over an old record
        return None


def collect(sweep_dir: Path) -> tuple[list[Point], list[Problem]]:
    """Return (rows of finished runs, problems) for a sweep directory.

    A problem is a run that is not a point of the table: {'run_dir', 'status', 'reason', 'step'} with status
    running (a live process holds its lock), stale (its lock's holder died: lock.lock_state), failed /
    diverged / interrupted / terminated (its record says so), incomplete (a checkpoint or config
    but no record: still running, killed, or never finished), unreadable (a record that is not one: cut, not
    JSON, a link), inconsistent (a done record that is not this dir's: record_problem) or copy (the same
    run as another dir's: same identity and run name). One bad record never stops the others."""
    rows, problems, first_of = [], [], {}
    for run_dir in find_run_dirs(sweep_dir):
        row, identity, problem = _read_point(run_dir)
        if problem is not None:
            problems.append(problem)
        if row is None:
            continue
        key = (identity, row["run_name"])
        if key[0] is not None and key in first_of:
            problems.append(_problem(run_dir, "copy", f"the same run as {first_of[key]} (same identity and name)"))
            continue
        first_of[key] = run_dir
        rows.append(row)
    return rows, problems


def duplicate_points(rows: list[Point]) -> list[str]:
    """Rows that are one run counted twice: one point of the law (recipe, r, N_once, N_rec, D) and one seed (without
    a seed: one loss); a point's other seeds are replicates (`fit.noise`). One line per repeat, naming its runs."""
    groups: dict[tuple, list[str]] = {}
    for row in rows:
        same = ("seed", row["seed"]) if row.get("seed") is not None else ("L", row.get("L"))
        key = tuple(row.get(c) for c in ("recipe", "r", "N_once", "N_rec", "D")) + same
        groups.setdefault(key, []).append(str(row.get("run_dir")))
    return [
        f"r={k[1]} N_once={k[2]} N_rec={k[3]} D={k[4]} {k[5]}={k[6]} appears {len(dirs)} times: {', '.join(dirs)}"
        for k, dirs in groups.items()
        if len(dirs) > 1
    ]


def runs_table(rows: list[TableRow]):
    """The runs table the fitter reads: TABLE_COLUMNS in order, sorted by recipe, r, C, N."""
    return pd.DataFrame(rows, columns=TABLE_COLUMNS).sort_values(["recipe", "r", "C", "N"], kind="stable")


def curves_table(rows: list[Point]):
    """The curves table: one row per evaluation of each run's loss curve (run.json's `curve`) and pass count it
    was scored at (a point's `r_eval_scores`; without them the trained r alone, r_eval = r), with the run's model;
    a run recorded before curves were (no `curve`) has no rows. Sorted like the runs table, then by r_eval, step."""
    out = []
    for row in rows:
        fork_step = row.get("fork_step")
        run = {c: row.get(c) for c in CURVE_RUN_COLUMNS if c != "run"}
        for point in row.get("curve") or []:
            from_parent = fork_step is not None and point["step"] <= fork_step
            at_r = {"r_eval": row.get("r"), "val_loss": point.get("val_loss")}
            scores = point.get("r_eval_scores") or [{**at_r, "flops_per_token_eval": row.get("curve_eval_flops")}]
            evaluation = {k: v for k, v in point.items() if k != "r_eval_scores"}
            for score in scores:
                out.append({"run": row.get("run_name"), **run, **evaluation, **score, "from_parent": from_parent})
    table = pd.DataFrame(out, columns=CURVE_COLUMNS)
    order = ["recipe", "r", "C", "N", "run", "r_eval", "step"]
    return table.sort_values(order, kind="stable").reset_index(drop=True)


def curves_path(out: Path) -> Path:
    """Where the curves table goes beside the runs table `out`: <name>_curves.csv."""
    return Path(out).with_name(f"{Path(out).stem}_curves.csv")


def testtime_path(out: Path) -> Path:
    """Where the test-time table (train/testtime_eval.testtime_rows) goes beside the runs table `out`:
    <name>_testtime.csv, what `loopscale fit --law testtime` reads."""
    return Path(out).with_name(f"{Path(out).stem}_testtime.csv")


def write_runs_table(table, problems: list[Problem], out: Path, curves=None, testtime=None) -> Path:
    """What `loopscale collect` writes: `out` (.csv), a .parquet beside it, <name>_problems.csv with the
    runs not done, given `curves` (`curves_table`) <name>_curves.csv and, given a `testtime` table with rows,
    <name>_testtime.csv. All are written to temporary files first and renamed into place only when all are
    complete: they are replaced together or not at all. Returns the problems file."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    problems_out = out.with_name(f"{out.stem}_problems.csv")
    extra = {curves_path(out): curves} if curves is not None else {}
    if testtime is not None and len(testtime):  # no test-time file where no run was scored across r
        extra[testtime_path(out)] = testtime
    with atomic_paths(out, out.with_suffix(".parquet"), problems_out, *extra) as tmps:
        table.to_csv(tmps[0], index=False)
        table.to_parquet(tmps[1], index=False)
        pd.DataFrame(problems, columns=PROBLEM_COLUMNS).to_csv(tmps[2], index=False)
        for tmp, t in zip(tmps[3:], extra.values()):
            t.to_csv(tmp, index=False)
    return problems_out


# a sweep's runs by status, in this order (`loopscale status`); a status not listed follows (unreadable, copy, ...)
STATUS_ORDER = ("done", "running", "stale", "failed", "diverged", "interrupted", "terminated", "incomplete")


def status_counts(rows: list[Point], problems: list[Problem]) -> dict[str, int]:
    """How many runs of a sweep (`collect`'s rows and problems) have each status: every one of STATUS_ORDER (0
    where none has it), then any other status found, sorted."""
    counts = Counter({"done": len(rows)}) + Counter(str(p["status"]) for p in problems)
    return {s: counts.get(s, 0) for s in [*STATUS_ORDER, *sorted(set(counts) - set(STATUS_ORDER))]}
