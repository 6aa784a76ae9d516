"""run.json: the one record a run leaves behind, and `collect`, which turns a sweep's records into the runs
table the fitter reads. Outputs come from the code that knows the values; nothing here greps logs.

A run directory holds: run.json (written atomically when the run ends: done / failed / diverged),
checkpoints/last.ckpt, metrics.csv (the CSV logger), .hydra/ (the composed config).
"""

from __future__ import annotations

import json
import platform
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from loopscale.atomic import write_json_atomic  # noqa: F401  (run.json is written with it)

RUN_FILE = "run.json"
# The record of a forked sweep's stable parent (loopscale/forks.py): not a point of the law, so not run.json.
PARENT_FILE = "fork_parent.json"
# Columns of the runs table, in order; the first block is what `loopscale fit` reads by default.
TABLE_COLUMNS = [
    "r",
    "N_once",
    "N_rec",
    "N",
    "D",
    "C",
    "L",
    "variant",
    "F",
    "width",
    "depth",
    "n_rec",
    "bptt_k",
    "injection",
    "C_budget",
    "steps",
    "seed",
    "tokens_per_s",
    "wall_time_s",
    "parent",
    "run_name",
    "run_dir",
]
# Columns of the list of runs that are not done (collect's second result).
PROBLEM_COLUMNS = ["run_dir", "status", "reason", "step"]


def read_record(run_dir: Path, name: str = RUN_FILE) -> dict[str, Any] | None:
    """The run's record (run.json, or `name` such as PARENT_FILE), or None when there is none yet."""
    path = Path(run_dir) / name
    if not path.exists():
        return None
    with open(path) as f:
        return json.load(f)


def is_finished(run_dir: Path) -> bool:
    record = read_record(run_dir)
    return record is not None and record.get("status") == "done"


def git_commit(repo: Path | None = None) -> str | None:
    """The commit of the code that ran (with '+dirty' when the tree had changes), or None when the code is
    not a git checkout. By default `repo` is the directory above the package, which is a checkout's root only
    for a source tree or an editable install: an installed wheel (site-packages, perhaps inside some other
    repository's .venv) is not a checkout, so nothing there is taken for the code's commit."""
    repo = Path(repo or Path(__file__).resolve().parents[1]).resolve()
    try:
        top = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"], cwd=repo, capture_output=True, text=True, timeout=10
        )
        if top.returncode != 0 or Path(top.stdout.strip()).resolve() != repo:
            return None
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, timeout=10)
        if sha.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=repo,
            capture_output=True,
            text=True,
            timeout=10,
        )
        return sha.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.TimeoutExpired):
        return None


def library_versions(
    names: Iterable[str] = ("torch", "lightning", "hydra-core", "numpy", "datasets", "tokenizers", "loopscale"),
) -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for name in names:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            pass
    return out


def find_run_dirs(sweep_dir: Path) -> list[Path]:
    """Every run directory below a sweep: those with a run.json, a checkpoint, or a composed Hydra config."""
    sweep_dir = Path(sweep_dir)
    dirs = set()
    for pattern in (f"**/{RUN_FILE}", "**/.hydra/config.yaml", "**/checkpoints/last.ckpt"):
        for hit in sweep_dir.glob(pattern):
            run_dir = hit.parent if hit.name == RUN_FILE else hit.parent.parent
            dirs.add(run_dir)
    return sorted(dirs)


def collect(sweep_dir: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Return (rows of finished runs, problems) for a sweep directory.

    A problem is a run that is not done: {'run_dir', 'status', 'reason'} with status failed / diverged /
    incomplete (a checkpoint or config but no record: still running, killed, or never finished)."""
    rows, problems = [], []
    for run_dir in find_run_dirs(sweep_dir):
        if (run_dir / PARENT_FILE).exists():
            continue  # stable parent of a forked WSD sweep (loopscale/forks.py): its branches are the points
        record = read_record(run_dir)
        if record is None:
            has_ckpt = (run_dir / "checkpoints" / "last.ckpt").exists()
            problems.append(
                {
                    "run_dir": str(run_dir),
                    "status": "incomplete",
                    "reason": "checkpoint but no run.json (killed or running)"
                    if has_ckpt
                    else "started but no checkpoint and no run.json",
                    "step": None,
                }
            )
            continue
        if record.get("status") != "done":
            problems.append(
                {
                    "run_dir": str(run_dir),
                    "status": record.get("status"),
                    "reason": record.get("reason") or "",
                    "step": record.get("step"),
                }
            )
            continue
        row = {col: record.get(col) for col in TABLE_COLUMNS}
        row["run_dir"] = str(run_dir)
        rows.append(row)
    return rows, problems


def runs_table(rows: list[dict[str, Any]]):
    """The runs table the fitter reads: TABLE_COLUMNS in order, sorted by variant, r, C, N."""
    import pandas as pd

    return pd.DataFrame(rows, columns=TABLE_COLUMNS).sort_values(["variant", "r", "C", "N"], kind="stable")


def write_runs_table(table, problems: list[dict[str, Any]], out: Path) -> Path:
    """What `loopscale collect` writes: `out` (.csv), a .parquet beside it and <name>_problems.csv with the
    runs not done, each through a temporary file and an atomic rename. Returns the problems file."""
    import pandas as pd

    from loopscale.atomic import atomic_path

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    problems_out = out.with_name(f"{out.stem}_problems.csv")
    with atomic_path(out) as tmp:
        table.to_csv(tmp, index=False)
    with atomic_path(out.with_suffix(".parquet")) as tmp:
        table.to_parquet(tmp, index=False)
    with atomic_path(problems_out) as tmp:
        pd.DataFrame(problems, columns=PROBLEM_COLUMNS).to_csv(tmp, index=False)
    return problems_out
