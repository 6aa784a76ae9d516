"""Which code produced a result: the git commit of the source tree and the library versions, recorded in run.json
and fit JSONs. Foundation: imports nothing of loopscale."""

from __future__ import annotations

import platform
import subprocess
from collections.abc import Iterable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path


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
    out = {"python": platform.python_version()}
    for name in names:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            pass
    return out
