"""The repository as the GPU node gets it, and an interpreter that has the node's packages but not loopscale:
what the bare-tree tests (tests/system/test_bare_tree.py, tests/system/test_gpu_check.py) run with.

- The tree: `git archive` of a commit (HEAD: commit before running these tests) unpacked into a temp dir, so
  only what git tracks is there: no .venv, no egg-info, no build output, no __pycache__.
- The packages: a folder of links to the distributions installed for this interpreter whose names are on the
  node image's list (benchmarks/gpu_image_packages.txt) or in the bundle (benchmarks/gpu_bundle.txt), each
  distribution's own top-level files (from its RECORD), on PYTHONPATH as the bundle is on the node. loopscale
  itself, its editable finder and every other package (datasets, wandb, submitit, ...) stay out. .pth files in
  a PYTHONPATH folder are never run, so no finder can come in that way either.
- The interpreter: a venv made with --without-pip from this interpreter's base Python: its own site-packages
  is empty, so nothing is importable but the standard library, the folder above and the tree itself. Child
  processes (sys.executable) get the same.
- The environment: only PATH, LANG, PYTHONPATH, an empty HOME and the variables a test adds; no network (a
  network namespace of its own via `unshare -n` where the kernel allows it, else proxies that lead nowhere
  and the HF / W&B offline switches).
"""

from __future__ import annotations

import functools
import io
import re
import subprocess
import sys
import tarfile
from importlib.metadata import distributions
from pathlib import Path

from support.paths import REPO_ROOT

# no network when unshare cannot make a namespace: every library that honours proxies reaches nowhere
OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "WANDB_MODE": "offline",
    "http_proxy": "http://127.0.0.1:9",
    "https_proxy": "http://127.0.0.1:9",
    "HTTP_PROXY": "http://127.0.0.1:9",
    "HTTPS_PROXY": "http://127.0.0.1:9",
    "no_proxy": "",
}


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def node_package_names() -> set[str]:
    """The node image's packages and the bundle's, canonical names (PEP 503)."""
    names = set()
    for listing in ("gpu_image_packages.txt", "gpu_bundle.txt"):
        for line in (REPO_ROOT / "benchmarks" / listing).read_text().splitlines():
            line = line.split("#")[0].strip()
            if line:
                names.add(_canonical(re.split(r"[=<>~!\[ ]", line)[0]))
    names.add("antlr4-python3-runtime")  # built by gpu_bundle.sh from its sdist, not named in gpu_bundle.txt
    return names


def archive(commit: str, dest: Path) -> Path:
    """`git archive COMMIT` of this repository unpacked into `dest`; returns dest."""
    blob = subprocess.run(["git", "-C", str(REPO_ROOT), "archive", commit], capture_output=True, check=True).stdout
    dest.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def node_site(dest: Path) -> Path:
    """A folder of links to the installed distributions the node has (module docstring); returns it."""
    wanted = node_package_names()
    owners: dict[str, set[str]] = {}  # top-level name -> the distributions that put files there
    chosen: dict[str, Path] = {}  # top-level name -> where it is
    for dist in distributions():
        name = _canonical(dist.metadata["Name"] or "")
        for file in dist.files or ():
            parts = Path(file).parts
            if not parts or parts[0] == ".." or parts[0].endswith(".pth") or parts[0] == "__pycache__":
                continue
            owners.setdefault(parts[0], set()).add(name)
            if name in wanted:
                chosen[parts[0]] = Path(str(dist.locate_file(parts[0])))
    dest.mkdir(parents=True)
    for top, path in chosen.items():
        if owners[top] <= wanted or not path.is_dir():
            (dest / top).symlink_to(path)
            continue
        # a namespace folder shared with a distribution the node lacks (hydra_plugins, google): one level down
        (dest / top).mkdir()
        for dist in distributions():
            if _canonical(dist.metadata["Name"] or "") in wanted:
                for file in dist.files or ():
                    parts = Path(file).parts
                    if len(parts) > 1 and parts[0] == top and not (dest / top / parts[1]).exists():
                        (dest / top / parts[1]).symlink_to(Path(str(dist.locate_file(Path(*parts[:2])))))
    return dest


def bare_python(dest: Path) -> Path:
    """A venv without pip from this interpreter's base Python (nothing installed in it); returns its python."""
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(dest)], check=True, capture_output=True)
    return dest / "bin" / "python"


@functools.cache
def network_namespace_prefix() -> tuple[str, ...]:
    """`unshare -n` (root) or `unshare -rn` (a user namespace) when this kernel allows one, else nothing."""
    for prefix in (("unshare", "-n"), ("unshare", "-rn")):
        try:
            if subprocess.run([*prefix, "true"], capture_output=True, timeout=30).returncode == 0:
                return prefix
        except (OSError, subprocess.TimeoutExpired):
            continue
    return ()


def run_bare(
    python: Path, site: Path, args: list, cwd: Path, home: Path, timeout_s: float = 600, **env: str
) -> subprocess.CompletedProcess:
    """`python ARGS` as on the node: a clean environment, PYTHONPATH = the node's packages, an empty HOME,
    no network."""
    home.mkdir(parents=True, exist_ok=True)
    environ = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HOME": str(home),
        "PYTHONPATH": str(site),
        "PYTHONUNBUFFERED": "1",
        "MPLBACKEND": "Agg",
        **OFFLINE_ENV,
        **env,
    }
    cmd = [*network_namespace_prefix(), str(python), *map(str, args)]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout_s, env=environ)
